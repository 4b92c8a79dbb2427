"""A run split over machines: `parity run --shard I/N` on each, `parity merge` of their report
folders, gives what one unsplit run gives (verdicts, counts, coverage, order, the JUnit XML);
the split is stable, covers every unit once and balances recorded durations; merging what is
not the N shards of one run is refused, naming what is wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_cli import FAILING, PASSING
from test_junit import _cases, _counts

from responses_parity.harness.cli import main
from responses_parity.harness.engine.shards import Shard, split
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load, units_of
from responses_parity.harness.scenario.model import MODES

BUILTINS = ("text-basic", "function-call", "mcp-call", "reasoning-summary", "error-missing-model")


def _verdicts(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(entry["scenario"], entry["mode"], entry["outcome"],
             [(step["step"], step["outcome"], sorted(f["rule"] for f in step["findings"])) for step in entry["steps"]])
            for entry in document["results"]]


def test_shards_merged_give_what_one_run_gives(tmp_path: Path, stack: Stack) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "passing.yaml").write_text(PASSING)
    (scenarios / "failing.yaml").write_text(FAILING)
    for name in BUILTINS:
        shutil.copy(builtin_scenarios_dir() / f"{name}.yaml", scenarios)
    target = ["--target", str(stack.reference_url), "--upstream", str(stack.upstream_url)]

    def run(report: str, *extra: str) -> int:
        result = CliRunner().invoke(main, ["run", str(scenarios), *target, "--report-dir", str(tmp_path / report),
                                           "--junitxml", str(tmp_path / report / "junit.xml"), "-q", *extra])
        return result.exit_code

    assert run("whole") == 1  # `failing` fails
    shard_codes = [run(f"shard{index}", "--shard", f"{index}/3") for index in (1, 2, 3)]
    assert sorted(shard_codes) == [0, 0, 1]  # the failing scenario runs on one shard
    merged = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"shard{i}") for i in (3, 1, 2)),
                                       "--report-dir", str(tmp_path / "merged"),
                                       "--junitxml", str(tmp_path / "merged" / "junit.xml")])
    assert merged.exit_code == 1, merged.output
    whole, together = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("whole", "merged"))
    assert _verdicts(together) == _verdicts(whole) and len(whole["results"]) == 7 * 2  # nonstream, stream
    assert together["summary"] == whole["summary"] and together["coverage"] == whole["coverage"]
    assert "shard" not in together
    assert _cases(tmp_path / "merged" / "junit.xml") == _cases(tmp_path / "whole" / "junit.xml")
    assert _counts(tmp_path / "merged" / "junit.xml") == _counts(tmp_path / "whole" / "junit.xml")
    failing_exchanges = sorted(path.name for path in (tmp_path / "whole" / "exchanges").glob("*.json"))
    assert failing_exchanges and sorted(path.name for path in (tmp_path / "merged" / "exchanges").glob("*.json")) \
        == failing_exchanges

    missing = CliRunner().invoke(main, ["merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"),
                                        "--report-dir", str(tmp_path / "refused")])
    assert missing.exit_code == 2 and "shard(s) 3 of 3 missing" in missing.output
    twice = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"shard{i}") for i in (1, 2, 3, 3)),
                                      "--report-dir", str(tmp_path / "refused")])
    assert twice.exit_code == 2 and "shard(s) 3 of 3 given more than once" in twice.output
    not_a_shard = CliRunner().invoke(main, ["merge", str(tmp_path / "whole"), "--report-dir", str(tmp_path / "x")])
    assert not_a_shard.exit_code == 2 and "is not the results document of a shard" in not_a_shard.output
    broken = json.loads((tmp_path / "shard1" / "results.json").read_text())
    broken["results"][0]["steps"][0]["findings"] = [{"known": "no"}]
    (tmp_path / "shard1" / "results.json").write_text(json.dumps(broken))
    refused = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"shard{i}") for i in (1, 2, 3)),
                                        "--report-dir", str(tmp_path / "x")])
    assert refused.exit_code == 2 and "shard1/results.json: results/0/steps/0/findings/0" in refused.output


def test_the_split_is_stable_covers_every_unit_once_and_balances_durations() -> None:
    units = units_of(load([builtin_scenarios_dir()]).scenarios, MODES)
    parts = split(units, 4)
    assert parts == split(list(units), 4)
    assert sorted(map(id, [unit for part in parts for unit in part])) == sorted(map(id, units))
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 3  # a scenario's modes stay together: at most 3 units apart
    slow = units[0][0].scenario.id
    weighted = split(units, 4, {unit[0].scenario.id: 1.0 for unit in units} | {slow: 1000.0})
    alone = next(part for part in weighted if any(unit[0].scenario.id == slow for unit in part))
    assert {unit[0].scenario.id for unit in alone} == {slow}  # nothing else fits beside it


@pytest.mark.parametrize(("text", "problem"), [("2/1", "I must be from 1 to N"), ("0/3", "I must be from 1 to N"),
                                               ("1/0", "N must be"), ("a/b", "is not I/N")])
def test_a_shard_that_is_not_one_is_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Shard.parse(text)
    assert Shard.parse(" 3 / 4 ") == Shard(3, 4)
