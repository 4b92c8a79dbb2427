"""`--json` on every command that reports: its standard output is one JSON document (read here
with `json.loads`, its fields checked), and every line for people goes to standard error. The
documents of `run`, `probe`, `serve` and `proxy` are tested with those commands, `bench`'s in
test_bench.py."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from conftest import write_scenario

from responses_parity.harness.cli import COMMANDS, main

EXCHANGES = Path(__file__).parent / "exchanges"
TEST_PROFILES = Path(__file__).parent / "profiles"
REPORTING = ("bench", "check-exchange", "list", "matrix", "probe", "profiles", "proxy", "record", "replay", "run",
             "serve", "validate")
"""The commands whose output is a result a script may read; the others (`init`, `schema`, `wait`,
...) only say what they did."""
SCENARIO = """
id: {id}
title: says hello
tags: [{tag}]
evidence: {{recordings: [stream-text__openllmetry__1]}}
steps:
  - id: ask
    request: {{model: "{{{{model}}}}", input: "Hi"}}
    model: [{{text: "Hello"}}]
    expect: {{status: completed, output: [message]}}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("name", REPORTING)
def test_a_reporting_command_has_json_and_its_help_says_what_the_document_holds(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None and name in COMMANDS
    option = next((param for param in command.params if "--json" in getattr(param, "opts", ())), None)
    assert option is not None, f"parity {name} has no --json"
    assert "standard output" in (option.help or "") and "standard error" in (option.help or ""), option.help


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    """Two scenarios (one tagged `greeting`) and a file that is not a scenario."""
    write_scenario(tmp_path, SCENARIO.format(id="hello", tag="greeting"), "hello.yaml")
    write_scenario(tmp_path, SCENARIO.format(id="hi", tag="other"), "hi.yaml")
    (tmp_path / "broken.yaml").write_text("id: broken\ntitle: [unclosed\n")
    return tmp_path


def test_list_json_holds_the_selected_scenarios_and_the_files_that_could_not_be_loaded(catalogue: Path) -> None:
    result = invoke("list", str(catalogue), "--tag", "greeting", "--json")
    assert result.exit_code == 2  # a file could not be loaded
    document = json.loads(result.stdout)
    assert document["scenarios"] == [{"id": "hello", "title": "says hello", "tags": ["greeting"],
                                      "modes": ["nonstream", "stream", "websocket"],
                                      "path": str(catalogue / "hello.yaml")}]
    assert [problem["path"] for problem in document["problems"]] == [str(catalogue / "broken.yaml")]
    assert "YAML" in document["problems"][0]["message"]
    assert "says hello" in result.stderr and "broken.yaml" in result.stderr


def test_validate_json_counts_the_valid_scenarios_and_names_each_problem(catalogue: Path) -> None:
    result = invoke("validate", str(catalogue), "--json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["valid"] == 2
    assert sorted(scenario["id"] for scenario in document["scenarios"]) == ["hello", "hi"]
    assert [problem["path"] for problem in document["problems"]] == [str(catalogue / "broken.yaml")]
    assert "2 scenario(s) valid, 1 problem(s)" in result.stderr


def test_profiles_json_lists_each_profile_with_its_lock_and_what_it_lacks_and_each_broken_one(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    (tmp_path / "reference-process.yaml").write_text((TEST_PROFILES / "reference-process.yaml").read_text())
    result = invoke("profiles", "--profile-dir", str(tmp_path), "--json")
    assert result.exit_code == 2  # one is broken
    document = json.loads(result.stdout)
    by_name = {profile["name"]: profile for profile in document["profiles"]}
    assert by_name["reference-process"]["path"] == str(tmp_path / "reference-process.yaml")
    assert by_name["reference-process"]["lock"] is None and by_name["reference-process"]["lock_command"] is None
    assert set(by_name["smg"]) == {"name", "path", "title", "lock", "lock_command", "lacks"}
    assert by_name["smg"]["lock"] and Path(by_name["smg"]["lock"]).is_file()
    assert all(isinstance(why, str) and why for why in by_name["litellm"]["lacks"].values())
    assert [(broken["name"], broken["path"]) for broken in document["broken"]] == [("broken",
                                                                                   str(tmp_path / "broken.yaml"))]
    assert "cannot read it as YAML" in document["broken"][0]["problem"]
    assert "reference-process" in result.stderr


def test_check_exchange_json_holds_each_exchange_its_grouped_findings_and_the_tally(tmp_path: Path) -> None:
    exchange = json.loads((EXCHANGES / "stream-text-obfuscation.json").read_text())
    exchange["response"]["sse"] = exchange["response"]["sse"].replace('"sequence_number":3', '"sequence_number":7')
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(exchange))
    (tmp_path / "garbage.json").write_text("{not json")
    legacy = EXCHANGES / "legacy-stream-text.json"  # many deltas lack `logprobs`: one finding, counted
    result = invoke("check-exchange", str(broken), str(tmp_path / "garbage.json"), str(legacy), "--json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    worst = {exchange["name"]: exchange["worst"] for exchange in document["exchanges"]}
    assert worst == {str(broken): "error", str(legacy): "ok"}
    found = document["exchanges"][0]["findings"]
    assert any(finding["severity"] == "error" and "has sequence_number 7, expected 3" in finding["message"]
               for finding in found)
    assert set(found[0]) == {"severity", "kind", "rule", "message", "count"}
    assert max(finding["count"] for finding in document["exchanges"][1]["findings"]) > 1
    [unreadable] = document["unreadable"]
    assert unreadable["path"] == str(tmp_path / "garbage.json") and "cannot read it as JSON" in unreadable["problem"]
    summary = document["summary"]
    assert (summary["files"], summary["unreadable"]) == (3, 1) and summary["errors"] >= 1
    assert summary["notes"] == sum(finding["count"] for exchange in document["exchanges"]
                                   for finding in exchange["findings"] if finding["severity"] == "note")
    assert f"{broken}: error" in result.stderr and "3 file(s) checked (1 unreadable)" in result.stderr


def test_matrix_json_is_the_matrix_document_written_beside_it(catalogue: Path, tmp_path: Path) -> None:
    (catalogue / "broken.yaml").unlink()
    output = tmp_path / "out" / "matrix.md"
    result = invoke("matrix", str(catalogue), "--targets", "reference", "--mode", "nonstream", "--output",
                    str(output), "--report-dir", str(tmp_path / "out" / "runs"), "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(output.with_suffix(".json").read_text())
    assert document["command"].startswith("parity matrix --targets reference --mode nonstream")
    [target] = document["targets"]
    assert (target["name"], target["failure"], target["report"]) == ("reference", None, "runs/reference")
    assert "reference: parity 2/2" in result.stderr
