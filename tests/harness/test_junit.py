"""`parity run --junitxml` writes what pytest writes of the same scenarios through the plugin:
the same test cases, outcomes, failure texts, skip reasons and properties; it parses, and a
character XML cannot hold is written visibly, as pytest writes it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner
from test_cli import COULD_NOT_RUN, FAILING, PASSING

from responses_parity.harness.cli import main
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.results import ScenarioResult, StepResult
from responses_parity.harness.model.findings import Finding, Kind, Severity
from responses_parity.harness.report.documents import RunInfo, results_document
from responses_parity.harness.report.junit import junit_xml
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load_file
from responses_parity.harness.wire.redaction import Redactor

pytest_plugins = ["pytester"]


def _cases(path: Path) -> dict[str, dict[str, object]]:
    """Each test case by `classname::name`: its result elements (tag, text, and for a skip its
    message) and its properties."""
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert suite is not None
    cases: dict[str, dict[str, object]] = {}
    for case in suite.iter("testcase"):
        results = [(node.tag, node.attrib["message"] if node.tag == "skipped" else node.text)
                   for node in case if node.tag in ("failure", "error", "skipped")]
        properties = {node.attrib["name"]: node.attrib["value"] for node in case.iter("property")}
        cases[f"{case.attrib['classname']}::{case.attrib['name']}"] = {"results": results, "properties": properties}
    return cases


def _counts(path: Path) -> dict[str, str]:
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {name: suite.attrib[name] for name in ("tests", "failures", "errors", "skipped")}


def test_parity_run_writes_the_junit_xml_pytest_writes_of_the_same_scenarios(pytester: pytest.Pytester,
                                                                            stack: Stack) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makefile(".yaml", passing=PASSING, failing=FAILING, broken_step=COULD_NOT_RUN)
    shutil.copy(builtin_scenarios_dir() / "mcp-gateway-server.yaml", pytester.path)  # unsupported by a URL target
    target = [str(stack.reference_url), str(stack.upstream_url)]
    ours, theirs = pytester.path / "parity.xml", pytester.path / "pytest.xml"
    result = CliRunner().invoke(main, ["run", str(pytester.path), "--target", target[0], "--upstream", target[1],
                                       "--report-dir", str(pytester.path / "reports"), "--junitxml", str(ours)])
    assert result.exit_code == 2, result.output  # a scenario could not run
    pytester.runpytest("--parity", "--parity-target", target[0], "--parity-upstream", target[1],
                       f"--junitxml={theirs}", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=2, errors=2,
                                                                                           skipped=2)
    assert _counts(ours) == _counts(theirs) == {"tests": "8", "failures": "2", "errors": "2", "skipped": "2"}
    assert _cases(ours) == _cases(theirs)
    assert _cases(ours)["failing.yaml::failing[stream]"]["properties"] == {
        "parity_outcome": "fail", "parity_openai_counterpart": "true", "parity_known": "0"}


def test_a_character_xml_cannot_hold_is_written_visibly_and_a_secret_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "failing.yaml"
    path.write_text(FAILING)
    scenario = load_file(path)
    assert not isinstance(scenario, list)
    finding = Finding(Kind.WIRE, Severity.ERROR, "wire.json", "the gateway said \x00\x1b[31m sk-0123456789abcdef")
    result = ScenarioResult(scenario, str(path), "nonstream", "gateway", [StepResult("ask", findings=[finding])])
    info = RunInfo(Target("gateway", "http://127.0.0.1:9"), datetime.now(UTC), 1.0, Redactor())
    xml = junit_xml(results_document([result], info), Redactor())
    failure = ElementTree.fromstring(xml.encode()).find(".//failure")
    assert failure is not None
    assert "the gateway said #x00#x1B[31m <redacted>" in (failure.text or "")
