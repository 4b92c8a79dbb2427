"""`parity --version`, `parity -h` and `parity check-exchange` load only what they need: not the reference
gateway, the fixtures, uvicorn or the MCP SDK, and (with the SDK schemas cached) not even the
openai SDK; `parity run` on the reference gateway loads nothing only other targets or other
commands need. Each command runs in a fresh interpreter, which then lists what it imported."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import click
import pytest

from responses_parity.harness.cli import COMMANDS, main
from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.scenario.loader import builtin_scenarios_dir

EXCHANGE = Path(__file__).parent / "exchanges" / "error-429-insufficient-quota.json"
HEAVY = ("mcp", "uvicorn", "openai", "responses_parity.fixtures", "responses_parity.reference_impl.app")
NOT_FOR_A_REFERENCE_RUN = ("responses_parity.harness.engine.gateway_process", "responses_parity.harness.engine.locks",
                           "responses_parity.harness.engine.tls_front", "responses_parity.harness.report.junit",
                           "responses_parity.harness.report.matrix", "packaging", "psutil", "xml.etree")
"""What only a profiled gateway (installing it, its locks, its process, a TLS front before the
scripted upstream), `--junitxml` or `parity matrix` needs. (Not cryptography's x509 itself:
below cryptography 42 its OpenSSL backend imports it, and the reference gateway's Fernet loads
that backend.)"""
_IMPORTED_AFTER = """
import json, sys
from click.testing import CliRunner
from responses_parity.harness.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
print(json.dumps({"exit_code": result.exit_code, "output": result.output, "modules": sorted(sys.modules)}))
"""


def run_parity(cache: Path, *args: str) -> dict:
    completed = child_process.run([sys.executable, "-c", _IMPORTED_AFTER, *args], capture_output=True, text=True,
                                  check=True, env=os.environ | {"PARITY_CACHE_DIR": str(cache)})
    return json.loads(completed.stdout.splitlines()[-1])


def among(modules: list[str], tops: tuple[str, ...]) -> list[str]:
    """The modules that are one of `tops` or inside one."""
    return [name for name in modules if any(name == top or name.startswith(f"{top}.") for top in tops)]


def heavy(modules: list[str]) -> list[str]:
    return among(modules, HEAVY)


@pytest.mark.parametrize(("argument", "said"), [("--version", "parity, version"), ("-h", "Commands:")])
def test_version_and_help_import_no_command(tmp_path: Path, argument: str, said: str) -> None:
    run = run_parity(tmp_path, argument)
    assert run["exit_code"] == 0 and said in run["output"]
    assert not [name for name in run["modules"] if name.startswith("responses_parity.harness.commands.")]
    assert heavy(run["modules"]) == []


def test_each_command_listed_by_help_is_summed_up_by_the_start_of_its_own_help() -> None:
    context = click.Context(main)
    for name, (_, summary) in COMMANDS.items():
        command = main.get_command(context, name)
        assert command is not None and " ".join((command.help or "").split()).startswith(summary), name


def test_check_exchange_imports_neither_servers_nor_the_sdk_once_the_schemas_are_cached(tmp_path: Path) -> None:
    cold = run_parity(tmp_path, "check-exchange", str(EXCHANGE))
    assert cold["exit_code"] == 0 and "1 file(s) checked: 0 error(s)" in cold["output"]
    assert "openai" in cold["modules"]  # deriving the schemas needs the SDK
    assert [name for name in heavy(cold["modules"]) if not name.startswith("openai")] == []
    warm = run_parity(tmp_path, "check-exchange", str(EXCHANGE))
    assert warm["output"] == cold["output"]
    assert [name for name in heavy(warm["modules"]) if not name.startswith("responses_parity.fixtures")] == []


def test_validate_imports_neither_servers_nor_the_sdks_once_the_names_are_cached(tmp_path: Path) -> None:
    """Scenarios are validated, the names of OpenAI's types and of the MCP fixtures' tools
    cached, with neither the `openai` nor the `mcp` SDK (the scripted model's turn types, from
    the fixtures, it needs): `parity validate` on a folder of files answers in well under a
    second."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "text.yaml").write_text(
        "id: text\ntitle: text\nevidence: {recordings: [stream-text__openllmetry__1]}\nsteps:\n  - id: ask\n"
        '    request: {model: "{{model}}", input: "Hi"}\n    model: [{text: Hello}]\n'
        "    expect: {status: completed, output: [message]}\n")
    shutil.copy(builtin_scenarios_dir() / "mcp-call.yaml", folder)  # names the calc fixture's tools
    cold = run_parity(tmp_path, "validate", str(folder))
    assert cold["exit_code"] == 0 and "2 scenario(s) valid" in cold["output"], cold["output"]
    assert "openai" in cold["modules"] and "mcp" in cold["modules"]  # reading the names needs the SDKs once
    warm = run_parity(tmp_path, "validate", str(folder))
    assert warm["output"] == cold["output"]
    assert [name for name in heavy(warm["modules"]) if not name.startswith("responses_parity.fixtures")] == []


def test_run_names_an_unreadable_scenario_file_before_it_imports_what_runs_the_scenarios(tmp_path: Path) -> None:
    """The runtime (the session, the gateway, the SDKs) takes seconds to import: `parity run`
    reads its files first, so a broken one is named at once. `-X importtime` writes each import
    to standard error as it ends, where the line naming the file goes too, so their order shows."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "recursive.yaml").write_text("id: recursive\ntitle: x\nsteps: &r [*r]\n")
    (folder / "text.yaml").write_text(
        "id: text\ntitle: text\nevidence: {recordings: [stream-text__openllmetry__1]}\nsteps:\n  - id: ask\n"
        '    request: {model: "{{model}}", input: "Hi"}\n    model: [{text: Hello}]\n')
    done = child_process.run([sys.executable, "-X", "importtime", "-m", "responses_parity.harness", "run", str(folder),
                              "--target", "http://127.0.0.1:9", "--report-dir", str(tmp_path / "reports")],
                             capture_output=True, text=True, env=os.environ | {"PARITY_CACHE_DIR": str(tmp_path)})
    lines = done.stderr.splitlines()
    named = next(index for index, line in enumerate(lines) if line.startswith("error ") and "recursive.yaml" in line)
    session = next(index for index, line in enumerate(lines)
                   if line.endswith(" responses_parity.harness.engine.session"))
    assert done.returncode == 2 and named < session, done.stderr[-2000:]


_SERVED_IN_ONE_PROCESS = """
import json, sys
from responses_parity.harness.engine.session import open_session
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load, units_of
from responses_parity.harness.scenario.model import MODES
catalogue = load([builtin_scenarios_dir() / f"{name}.yaml" for name in sys.argv[1:]])
units = units_of(catalogue.scenarios, MODES)
with open_session(TargetOptions(), {name for loaded, _ in units for name in loaded.scenario.fixtures}) as session:
    outcomes = {result.outcome for result in session.run(units)}
print(json.dumps({"outcomes": sorted(outcomes), "modules": sorted(sys.modules)}))
"""
SERVERS = ("mcp", "uvicorn", "starlette", "responses_parity.harness.engine.stack",
           "responses_parity.reference_impl.app", "responses_parity.fixtures.upstream.app",
           "responses_parity.fixtures.search.app")
"""The servers and what serves them: the scenario loader reads the scripted model's turns and
the pages a search finds without them."""


def _pytest(modules: list[str]) -> list[str]:
    return [name for name in modules if name.split(".")[0] in ("pytest", "_pytest", "pluggy")]


def test_a_run_on_the_reference_gateway_imports_no_pytest(tmp_path: Path) -> None:
    """pytest is the plugin's dependency (the `pytest` extra), not the tool's: a run imports none
    of it, nor do the reference gateway, its fixtures and the SDKs they load (served apart by
    `parity run`, so run here in one process)."""
    scenarios = ("mcp-call", "web-search-citations")
    run = run_parity(tmp_path, "run", *(word for name in scenarios for word in ("-s", name)), "--report-dir",
                     str(tmp_path / "reports"))
    assert run["exit_code"] == 0, run["output"]
    assert _pytest(run["modules"]) == []
    in_one = json.loads(child_process.run([sys.executable, "-c", _SERVED_IN_ONE_PROCESS, *scenarios],
                                          capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    assert in_one["outcomes"] == ["pass"]
    assert [name for name in SERVERS if name not in in_one["modules"]] == []
    assert _pytest(in_one["modules"]) == []


def test_a_run_of_one_scenario_on_the_reference_gateway_imports_only_what_it_runs(tmp_path: Path) -> None:
    """Seconds of a one-scenario run are imports: its process leaves the servers to the process
    that serves them, begun before the files were read (`stack_process.py`), and what only other
    targets, `--junitxml` or the matrix need stays unimported (`NOT_FOR_A_REFERENCE_RUN`). (The
    first run of a cache reads the MCP fixtures' tool names with the SDK, to check scenarios.)"""
    for _ in ("cold cache", "warm cache"):
        run = run_parity(tmp_path, "run", "-s", "text-basic", "--report-dir", str(tmp_path / "reports"))
        assert run["exit_code"] == 0, run["output"]
        assert among(run["modules"], NOT_FOR_A_REFERENCE_RUN) == []
    assert among(run["modules"], SERVERS) == []
    with_junit = run_parity(tmp_path, "run", "-s", "text-basic", "--report-dir", str(tmp_path / "reports"),
                            "--junitxml", str(tmp_path / "junit.xml"))
    assert with_junit["exit_code"] == 0 and (tmp_path / "junit.xml").is_file(), with_junit["output"]
    assert [name for name in among(with_junit["modules"], NOT_FOR_A_REFERENCE_RUN)
            if not name.startswith("xml.")] == ["responses_parity.harness.report.junit"]


GATEWAY_AND_FIXTURES = ("mcp", "aiohttp", "tiktoken", "responses_parity.reference_impl",
                        "responses_parity.harness.engine.reference_gateway", "responses_parity.fixtures.upstream.app",
                        "responses_parity.fixtures.search.app", "responses_parity.fixtures.mcp.host")
"""The reference gateway (and the SDKs only it loads) and what serves the fixtures."""


def test_a_run_against_your_own_gateway_beside_parity_serve_imports_neither_the_reference_gateway_nor_the_fixtures(
        tmp_path: Path, stack: Stack) -> None:
    """The run a user makes most: their gateway at a URL, the scripted upstream and the fixtures
    running beside `parity serve` (here the session's stack, whose upstream announces its
    fixtures). The run finds them and starts nothing: importing the reference gateway and the
    fixtures' servers cost it more than half of a one-scenario run. (The first run of a cache
    reads the MCP fixtures' tool names from the fixtures themselves.)"""
    assert stack.reference_url is not None and stack.upstream_url is not None
    for _ in ("cold cache", "warm cache"):
        run = run_parity(tmp_path, "run", "-s", "mcp-approval-deny", "-s", "web-search-citations",
                         "--target", stack.reference_url, "--upstream", stack.upstream_url,
                         "--report-dir", str(tmp_path / "reports"))
        assert run["exit_code"] == 0, run["output"]
    assert among(run["modules"], GATEWAY_AND_FIXTURES) == []


def test_serving_the_fixtures_imports_no_reference_gateway() -> None:
    """`parity serve` (what a user starts before their own gateway) serves the fixtures; only
    `parity serve reference` imports the reference gateway."""
    imported = child_process.run([sys.executable, "-c", "import sys; import responses_parity.harness.commands."
                                  "serve; print(' '.join(sorted(sys.modules)))"],
                                 capture_output=True, text=True, check=True).stdout.split()
    assert "responses_parity.fixtures.upstream.app" in imported
    assert among(imported, ("aiohttp", "tiktoken", "responses_parity.harness.engine.reference_gateway",
                            "responses_parity.reference_impl.app")) == []


def test_a_profiled_gateway_without_a_tls_front_imports_no_x509() -> None:
    """The TLS front (a certificate authority made with cryptography's x509) is started, and
    imported, only for a profile whose gateway asks for TLS to its upstream."""
    imported = child_process.run([sys.executable, "-c", "import sys; import responses_parity.harness.engine."
                                  "gateway_process; print(' '.join(sorted(sys.modules)))"],
                                 capture_output=True, text=True, check=True).stdout.split()
    assert "responses_parity.harness.engine.locks" in imported
    assert among(imported, ("responses_parity.harness.engine.tls_front", "cryptography.x509")) == []
