"""The pytest plugin tells the same truth as `parity run`: a pass passes, a divergence fails, a
scenario the harness could not run is an error, and the session ends with the CLI's tally;
`--parity-against` and `--parity-baseline` judge as the CLI does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli import COULD_NOT_RUN, FAILING, PASSING

from responses_parity.harness.cli import main

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_outcomes_and_the_tally_are_the_clis(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", passing=PASSING, failing=FAILING, broken_step=COULD_NOT_RUN)
    result = pytester.runpytest("--parity", "--parity-mode", "nonstream", "-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 failed, 1 could not run, 0 unsupported; parity with OpenAI 1/2*"])
    result.stdout.fnmatch_lines(["*ERROR at setup of scenario unreachable-step*", "*could not run*",
                                 "*cannot resolve*has no element 7*"])


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
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 passed, 0 failed, 0 could not run, 0 unsupported*1 known divergence(s)*"])
