"""The peer tier: `parity record --target smg` installs (on first use), starts, runs and stops
SMG and writes a golden set that names the gateway and its version, holds no secret, and
diffs against the reference gateway's set as a changelog. Opt in with `pytest --peers`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from responses_parity.harness.cli import main
from responses_parity.harness.engine.profile import find_profile
from responses_parity.harness.judge.goldens import load

pytestmark = pytest.mark.peers
SELECTION = ("-s", "text-basic", "-s", "mcp-call", "-s", "error-missing-model", "-s", "function-call")


def record(tmp_path: Path, target: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["record", *SELECTION, "--target", target, "--golden-dir",
                                       str(tmp_path / "goldens"), "--report-dir", str(tmp_path / target)],
                                catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("peer-goldens")
    for target in ("reference", "smg"):
        code, output = record(root, target)
        assert code in (0, 1), output  # 1: the gateway diverges somewhere, which the set records
    return root / "goldens"


def test_a_set_recorded_from_smg_names_the_gateway_and_its_version(sets: Path) -> None:
    profile = find_profile("smg")
    assert profile is not None and profile.version is not None
    golden = load(sets / f"smg-{profile.version}")
    assert golden.manifest["target"] == "smg" and golden.manifest["gateway"] == profile.identity()
    assert golden.manifest["gateway"]["packages"] == [f"smg=={profile.version}"]
    assert {scenario for scenario, _ in golden.units} == {"text-basic", "mcp-call", "error-missing-model",
                                                          "function-call"}
    assert all(unit.diverges.keys() == unit.steps.keys() for unit in golden.units.values())


def test_no_secret_reaches_the_set(sets: Path) -> None:
    written = "".join(path.read_text() for path in sets.rglob("*.json"))
    assert "sk-parity-" not in written and "Bearer sk-" not in written


def test_the_sets_of_the_reference_gateway_and_smg_diff_as_a_changelog(sets: Path, tmp_path: Path) -> None:
    profile = find_profile("smg")
    assert profile is not None
    output = tmp_path / "changelog.md"
    result = CliRunner().invoke(main, ["golden", "diff", str(sets / "reference"), str(sets / f"smg-{profile.version}"),
                                       "--output", str(output), "--json"], catch_exceptions=False)
    document = json.loads(result.stdout)
    assert result.exit_code == (1 if document["changes"] else 0)
    assert document["new"]["version"] == profile.version and document["old"]["target"] == "reference"
    assert sum(document["summary"].values()) == len(document["changes"])
    assert f"| version | — | {profile.version} |" in output.read_text()
