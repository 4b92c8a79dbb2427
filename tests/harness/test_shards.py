"""A run, a matrix or a probe run split over machines: `--shard I/N` on each, `parity merge` of
what they wrote, gives what one unsplit run gives (verdicts, counts, coverage, order, the JUnit
XML; a matrix's cells and each target's report, also from a job matrix of gateway x shard; the
probe document, command line included); the split is stable, covers every unit once and
balances recorded durations (probes: their count); merging what is not the N shards of one run
is refused, naming what is missing, repeated or wrong."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_cli import FAILING, PASSING
from test_junit import _cases, _counts
from test_probe import FaultyGateway

from responses_parity.harness.cli import main
from responses_parity.harness.defaults import DEFAULT_MODEL
from responses_parity.harness.engine.shards import Shard, deal, durations_of, recorded_durations, split
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.probe.generate import all_probes, select
from responses_parity.harness.probe.send import BASE_INPUT
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load, units_of
from responses_parity.harness.scenario.model import MODES
from responses_parity.reference_impl.app import build_gateway_app

BUILTINS = ("text-basic", "function-call", "mcp-call", "reasoning-summary", "error-missing-model")


def _verdicts(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(entry["scenario"], entry["mode"], entry["outcome"],
             [(step["step"], step["outcome"], sorted(f["rule"] for f in step["findings"])) for step in entry["steps"]])
            for entry in document["results"]]


def _scenarios(folder: Path, builtins: tuple[str, ...]) -> Path:
    """A scenario folder: a passing and a failing scenario of its own, and `builtins`."""
    folder.mkdir()
    (folder / "passing.yaml").write_text(PASSING)
    (folder / "failing.yaml").write_text(FAILING)
    for name in builtins:
        shutil.copy(builtin_scenarios_dir() / f"{name}.yaml", folder)
    return folder


def test_shards_merged_give_what_one_run_gives(tmp_path: Path, stack: Stack) -> None:
    scenarios = _scenarios(tmp_path / "scenarios", BUILTINS)
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

    def report_md(name: str) -> list[str]:  # but for the line saying when it started and how long it took
        return [line for line in (tmp_path / name / "report.md").read_text().splitlines()
                if not line.startswith("Target **")]

    assert report_md("merged") == report_md("whole") and "## What failed" in report_md("whole")
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
    shard1 = (tmp_path / "shard1" / "results.json").read_text()
    short = json.loads(shard1)
    dropped = short["results"].pop()
    (tmp_path / "shard1" / "results.json").write_text(json.dumps(short))
    unrun = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"shard{i}") for i in (1, 2, 3)),
                                      "--report-dir", str(tmp_path / "refused")])
    assert unrun.exit_code == 2 and f"unit(s) no shard ran: {dropped['scenario']}[{dropped['mode']}]" in unrun.output
    broken = json.loads(shard1)
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


PROFILE = Path(__file__).parent / "profiles" / "reference-process.yaml"
"""The reference gateway in a child process: a second target beside the embedded one."""


def _timeless(matrix_md: str) -> str:
    """A matrix in Markdown without what only timing changes: when and by what command it was
    made, and the latencies."""
    return re.sub(r"[\d.]+( / [\d.]+)? ms", "- ms", re.sub(r"^Generated .*$", "", matrix_md, flags=re.MULTILINE))


def test_matrix_shards_merged_give_what_one_matrix_gives_also_from_a_job_matrix_of_gateway_x_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "cache"))
    _scenarios(tmp_path / "scenarios", ("text-basic", "background-poll"))  # unsupported by the child's profile

    def matrix(folder: str, targets: str, *extra: str) -> int:
        return CliRunner().invoke(main, ["matrix", "scenarios", "--targets", targets, "--output", f"{folder}/matrix.md",
                                         "--report-dir", f"{folder}/matrix", *extra]).exit_code

    both = f"reference,{PROFILE}"
    assert matrix("whole", both) == 0  # divergences are what a matrix reports
    assert matrix("both-1", both, "--shard", "1/2") == 0  # one machine runs shard 1 of every target
    assert matrix("reference-2", "reference", "--shard", "2/2") == 0  # shard 2 on a machine per target
    assert matrix("child-2", str(PROFILE), "--shard", "2/2") == 0
    merged = CliRunner().invoke(main, ["merge", "both-1", "child-2", "reference-2", "--report-dir", "merged"])
    assert merged.exit_code == 0, merged.output
    assert "reference: parity 6/8" in merged.output and "reference-process: parity 4/6" in merged.output

    whole, together = (json.loads(Path(folder, "matrix.json").read_text()) for folder in ("whole", "merged"))
    assert together["command"] == whole["command"].replace("whole/", "merged/")
    assert together["targets"] == whole["targets"] and "shard" not in together
    assert [target["name"] for target in together["targets"]] == ["reference", "reference-process"]
    durations: Counter[str] = Counter()
    for name in ("reference", "reference-process"):
        one, parts = (json.loads(Path(folder, "matrix", name, "results.json").read_text())
                      for folder in ("whole", "merged"))
        assert _verdicts(parts) == _verdicts(one) and parts["summary"] == one["summary"]
        assert parts["coverage"] == one["coverage"]
        durations.update(durations_of(one))
    assert recorded_durations(Path("whole/matrix.json")) == dict(durations)  # the targets' together
    assert len(_verdicts(whole_reference := json.loads(Path("whole/matrix/reference/results.json").read_text()))) \
        == 4 * 2 and {entry["outcome"] for entry in whole_reference["results"]} == {"pass", "fail"}
    assert _timeless(Path("merged/matrix.md").read_text()) == _timeless(Path("whole/matrix.md").read_text())
    assert sorted(path.name for path in Path("merged/matrix/reference/exchanges").glob("*.json")) == \
        sorted(path.name for path in Path("whole/matrix/reference/exchanges").glob("*.json")) != []

    def refused(*parts: str) -> str:
        result = CliRunner().invoke(main, ["merge", *parts, "--report-dir", "refused"])
        assert result.exit_code == 2, result.output
        return " ".join(result.output.split())

    assert "target reference-process: shard(s) 2 of 2 missing" in refused("both-1", "reference-2")
    assert "target reference: shard(s) 2 of 2 given more than once" in refused("both-1", "child-2", "reference-2",
                                                                               "reference-2")
    assert "whole/matrix.json is not the matrix document of a shard" in refused("whole")
    heavy = {"results": [{"scenario": name, "duration_s": 5 if name in ("background-poll", "passing") else 1}
                         for name in ("background-poll", "passing", "failing", "text-basic")]}
    Path("heavy.json").write_text(json.dumps(heavy))  # another split: passing goes to shard 2
    assert matrix("other-2", "reference", "--shard", "2/2", "--shard-durations", "heavy.json") == 0
    assert "run twice or outside the run: passing[nonstream], passing[stream] (the shards must split the run " \
           "alike: give every one the same --shard-durations, or none)" in refused("both-1", "child-2", "other-2")
    assert "is a part of a matrix and both-1/matrix/reference/results.json of a run" in refused(
        "both-1", "both-1/matrix/reference")
    for field, value, problem in (("name", "../../escaped", "its name would write its report outside"),
                                  ("report", "../../whole/matrix/reference", "is outside hostile-2")):
        hostile = json.loads(Path("reference-2/matrix.json").read_text())
        hostile["targets"][0][field] = value  # a part is input like any other: it names no place elsewhere
        Path("hostile-2").mkdir(exist_ok=True)
        Path("hostile-2/matrix.json").write_text(json.dumps(hostile))
        assert problem in refused("both-1", "child-2", "hostile-2"), field
    assert not Path("refused").exists() and not Path("escaped").exists()


def test_probe_shards_merged_give_what_one_probe_run_gives(tmp_path: Path, stack: Stack,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = ServerThread(FaultyGateway(build_gateway_app(reference_config(stack.upstream_url or "")))).start()
    args = ["probe", "--target", gateway.url, "--upstream", str(stack.upstream_url), "--field", "temperature",
            "--field", "metadata", "--count", "9", "--jobs", "8"]

    def probe(*extra: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["parity", *args, *extra])  # the command line the report shows
        result = CliRunner().invoke(main, [*args, *extra])
        return result.exit_code, result.stdout

    try:
        code, whole = probe("--json")
        parts = [probe("--shard", f"{index}/3", "--json") for index in (1, 2, 3)]
    finally:
        gateway.stop()
    assert code == 1 and json.loads(whole)["diverging"] > 0  # the gateway answers a 500 for temperature
    assert sorted(json.loads(text)["probes"] for _, text in parts) == [3, 3, 3]
    for index, (_, text) in enumerate(parts, 1):
        (tmp_path / f"probe-{index}.json").write_text(text)
    merged = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"probe-{i}.json") for i in (3, 1, 2)),
                                       "--report-dir", str(tmp_path / "merged")])
    assert merged.exit_code == 1, merged.output
    assert json.loads((tmp_path / "merged" / "probe.json").read_text()) == json.loads(whole)
    report = (tmp_path / "merged" / "probe.md").read_text()
    assert "9 probes (9 of " in report and "--shard" not in report

    def refused(*indexes: int) -> str:
        result = CliRunner().invoke(main, ["merge", *(str(tmp_path / f"probe-{i}.json") for i in indexes),
                                           "--report-dir", str(tmp_path / "refused")])
        assert result.exit_code == 2, result.output
        return " ".join(result.output.split())

    assert "shard(s) 2 of 3 missing" in refused(1, 3)
    assert "shard(s) 3 of 3 given more than once" in refused(1, 2, 3, 3)
    without = CliRunner().invoke(main, [*args, "--shard", "1/3"])
    assert without.exit_code == 2 and "--shard: give --json too" in without.output


def test_probes_are_dealt_one_by_one_by_id_as_many_to_each_shard() -> None:
    probes = select(all_probes(DEFAULT_MODEL, BASE_INPUT), 17, 30)
    parts = deal(probes, lambda probe: probe.id, 4)
    assert parts == deal(list(probes), lambda probe: probe.id, 4)
    assert sorted(probe.id for part in parts for probe in part) == sorted(probe.id for probe in probes)
    assert sorted(map(len, parts)) == [7, 7, 8, 8]
    assert all(part == [probe for probe in probes if probe in part] for part in parts)  # each in the selection's order
