"""The pytest plugin tells the same truth as `parity run` (in every mode: `--parity-mode all` adds
the WebSocket): a pass passes, a divergence fails, a scenario the harness could not run is an
error, and the session ends with the CLI's tally; `--parity-against` and `--parity-baseline`
judge as the CLI does."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
from pathlib import Path

import pydantic.root_model  # noqa: F401
import pytest
import uvicorn.protocols.http.httptools_impl  # noqa: F401
from click.testing import CliRunner
from test_cli import COULD_NOT_RUN, FAILING, PASSING

from responses_parity.harness.cli import main
from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.stack import Stack

pytest_plugins = ["pytester"]
# uvicorn's httptools protocol is imported before any in-process pytest run below:
# pytester drops the modules a run imported once it ends, and a later run's server would then
# catch httptools' upgrade exception as a class of the dropped module (its WebSocket upgrade
# answered with nothing) when this file runs on its own. So is pydantic's RootModel: the mcp SDK's
# types before 2.2 parametrise it as they are imported, which fails once its module was dropped.
BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_outcomes_and_the_tally_are_the_clis(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", passing=PASSING, failing=FAILING, broken_step=COULD_NOT_RUN)
    result = pytester.runpytest("--parity", "--parity-mode", "nonstream", "-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 failed, 1 could not run, 0 unsupported; parity with OpenAI 1/2*"])
    result.stdout.fnmatch_lines(["*ERROR at setup of scenario unreachable-step*", "*could not run*",
                                 "*cannot resolve*ask.output has 1 output item(s), no [[]7]*"])


def test_parity_shard_runs_the_part_parity_run_would(pytester: pytest.Pytester) -> None:
    for name in ("one", "two", "three", "four"):
        pytester.makefile(".yaml", **{name: PASSING.replace("id: passing", f"id: {name}")})
    parts = []
    for index in (1, 2):
        result = pytester.runpytest("--parity", "--parity-mode", "nonstream", "--parity-shard", f"{index}/2",
                                    "-p", "no:cacheprovider", "-p", "no:asyncio", "-v")
        parts.append({line.split("::")[1].split()[0] for line in result.outlines if " PASSED" in line})
        result.assert_outcomes(passed=2, deselected=2)
    assert not parts[0] & parts[1]
    assert parts[0] | parts[1] == {f"{name}[nonstream]" for name in ("one", "two", "three", "four")}
    wrong = pytester.runpytest("--parity", "--parity-shard", "3/2", "-p", "no:cacheprovider", "-p", "no:asyncio")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    wrong.stderr.fnmatch_lines(["*--parity-shard*I must be from 1 to N*"])


def test_parity_mode_all_adds_a_test_over_the_websocket(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", passing=PASSING)
    result = pytester.runpytest("--parity", "--parity-mode", "all", "-p", "no:cacheprovider", "-p", "no:asyncio", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*passing*websocket*PASSED*"])


def test_a_golden_and_a_baseline_judge_pytest_runs_too(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makefile(".yaml", passing=PASSING)
    goldens = tmp_path / "goldens"
    runner = CliRunner()
    recorded = runner.invoke(main, ["record", str(pytester.path), "--name", "mine", "--golden-dir", str(goldens),
                                    "--mode", "nonstream", "--report-dir", str(tmp_path / "r")])
    assert recorded.exit_code == 0, recorded.output
    unit = goldens / "mine" / "passing" / "nonstream.json"
    document = json.loads(unit.read_text())
    document["steps"][0]["exchange"]["response"]["body"]["status"] = "incomplete"
    unit.write_text(json.dumps(document))
    options = ["--parity", "--parity-mode", "nonstream", "--parity-against", "golden:mine", "--parity-golden-dir",
               str(goldens), "-p", "no:cacheprovider", "-p", "no:asyncio"]  # as a gateway's project runs it
    result = pytester.runpytest(*options)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*error*golden.status*status is 'completed', expected 'incomplete' (golden mine)*"])
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"format": 1, "divergences": [
        {"scenario": "passing", "mode": "nonstream", "step": "ask", "kind": "status", "rule": "golden.status",
         "severity": "error"}]}))
    result = pytester.runpytest(*options, "--parity-baseline", str(baseline))
    assert result.ret == 0
    result.assert_outcomes(xfailed=1)  # a known divergence is an expected failure: shown, never a pass
    result.stdout.fnmatch_lines(["*0 passed, 1 known, 0 failed, 0 could not run, 0 unsupported*1 known divergence(s)*"])


def _nothing_listening() -> str:
    """The URL of a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_wrong_responses_path_stops_pytest_at_once_with_one_error(pytester: pytest.Pytester, stack: Stack) -> None:
    pytester.makefile(".yaml", passing=PASSING, other=PASSING.replace("id: passing", "id: other"))
    result = pytester.runpytest("--parity", "--parity-target", stack.reference_url or "", "--parity-upstream",
                                stack.upstream_url or "", "--parity-responses-path", "/responses",
                                "-p", "no:cacheprovider", "-p", "no:asyncio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*answered HTTP 404*give the path of its Responses API with --responses-path "
                                 "(pytest: --parity-responses-path; now /responses)*"])
    result.assert_outcomes()  # stopped before a test ran


def test_target_means_parity_target_only_when_the_plugin_is_asked_for(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", passing=PASSING)
    nowhere = _nothing_listening()
    result = pytester.runpytest("--parity", "--target", nowhere, "--parity-mode", "nonstream", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*the target {nowhere} at {nowhere} is unreachable*"])
    result = pytester.runpytest("--target", nowhere, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --target*"])


THEIR_TARGET = """
def pytest_addoption(parser):
    parser.addoption("--target", default="theirs-by-default", help="another plugin's target")
"""


@pytest.mark.parametrize("where", ["conftest", "plugin"])
def test_another_plugins_target_keeps_its_name(pytester: pytest.Pytester, where: str) -> None:
    if where == "conftest":
        pytester.makeconftest(THEIR_TARGET)
        loading: tuple[str, ...] = ()
    else:
        pytester.makepyfile(their_plugin=THEIR_TARGET)
        pytester.syspathinsert()
        loading = ("-p", "their_plugin")
    pytester.makepyfile(test_theirs="def test_theirs(pytestconfig):\n"
                                    "    assert pytestconfig.getoption('target') == 'http://their.example'\n")
    pytester.makefile(".yaml", passing=PASSING)
    result = pytester.runpytest(*loading, "--parity", "--target", "http://their.example", "--parity-mode", "nonstream",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)  # their test got the value; the scenario ran on the reference gateway
    result.stdout.fnmatch_lines(["*1 passed, 0 failed, 0 could not run, 0 unsupported; parity with OpenAI 1/1*"])


POLICY = PASSING.replace("id: passing", "id: policy").replace("title: passing",
                                                             "title: policy\nopenai_counterpart: false")


def test_under_xdist_the_controller_tallies_every_workers_runs(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", passing=PASSING, failing=FAILING, broken_step=COULD_NOT_RUN, policy=POLICY)
    options = ("--parity", "-p", "no:cacheprovider", "-p", "no:asyncio")

    def tally(result: pytest.RunResult) -> list[str]:
        return [line for line in result.outlines if "parity with OpenAI" in line]

    alone = pytester.runpytest_subprocess(*options)
    parallel = pytester.runpytest_subprocess(*options, "-n", "2")
    parallel.stdout.fnmatch_lines(["*2 workers [[]8 items[]]*"])
    for result in (alone, parallel):
        result.assert_outcomes(passed=4, failed=2, errors=2)
    assert tally(parallel) == tally(alone) == [
        "4 passed, 2 failed, 2 could not run, 0 unsupported; parity with OpenAI 2/4, gateway policy 2/2"]


def test_the_plugin_imports_nothing_but_its_options_until_it_is_used() -> None:
    imported_by_the_plugin = ("import json, sys, pytest; before = set(sys.modules); "
                              "import responses_parity.harness.pytest_plugin; "
                              "print(json.dumps(sorted(set(sys.modules) - before)))")
    completed = child_process.run([sys.executable, "-c", imported_by_the_plugin], capture_output=True, text=True,
                                  check=True)
    assert set(json.loads(completed.stdout)) <= {
        "responses_parity", "responses_parity.harness", "responses_parity.harness.pytest_plugin",
        "responses_parity.harness.options", "responses_parity.harness.defaults"}


def test_a_project_that_does_not_use_the_plugin_sees_the_same_run_and_no_warning(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("startup", BENCHMARKS / "startup.py")
    assert spec is not None and spec.loader is not None
    startup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(startup)
    project = startup.fresh_project(tmp_path / "project")
    runs = [child_process.run(startup.one_test_run(sys.executable, with_plugin), cwd=project, capture_output=True,
                              text=True, check=False, env=os.environ | {"PYTEST_ADDOPTS": ""})
            for with_plugin in (True, False)]
    assert [run.returncode for run in runs] == [0, 0], runs
    assert "responses-parity-" in runs[0].stdout and "responses-parity-" not in runs[1].stdout
    with_plugin, without = (startup.without_timing(run.stdout) + run.stderr for run in runs)
    assert "1 passed in <time>" in with_plugin
    assert with_plugin == without
