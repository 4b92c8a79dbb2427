"""`parity` end to end: exit codes 0/1/2, report files, and no secret in any report."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from conftest import write_scenario
from rich.markup import escape
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from responses_parity.harness.cli import main
from responses_parity.harness.commands import catalogue, console, running
from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.stack_process import StackProcess
from responses_parity.harness.scenario.loader import Catalogue, builtin_scenarios_dir

EXCHANGES = Path(__file__).parent / "exchanges"
PASSING = """
id: passing
title: passing
evidence: {recordings: [stream-text__openllmetry__1]}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
    expect: {status: completed, output: [message]}
"""

FAILING = """
id: failing
title: expects an item the gateway does not produce
evidence: {recordings: [stream-text__openllmetry__1]}
mcp: [calc]
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "Hi"
      tools:
        - type: mcp
          server_label: calc
          server_url: "{{mcp.calc.url}}"
          authorization: "sk-mcp-secret-0123456789"
          headers: {X-Api-Key: "header-secret-value"}
          require_approval: never
    model: [{text: "Hello"}]
    expect: {status: completed, output: [function_call]}
"""


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_validate_names_file_and_field_of_a_typo_and_exits_2(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, PASSING.replace("expect:", "expekt:"))
    code, output = invoke("validate", str(path))
    assert code == 2
    error_lines = [line for line in output.splitlines() if line.startswith("error")]
    assert error_lines == [f"error {path}: scenario 'passing': steps[0].expekt: unknown field (did you mean "
                           "'expect'?)"]


def test_run_passes_and_writes_reports(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING)
    reports = tmp_path / "reports"
    code, output = invoke("run", str(tmp_path), "--report-dir", str(reports))
    assert code == 0, output
    document = json.loads((reports / "results.json").read_text())
    assert document["summary"] == {"units": 2, "pass": 2, "known": 0, "fail": 0, "could_not_run": 0,
                                   "unsupported": 0, "file_errors": 0, "parity": {"pass": 2, "known": 0, "runs": 2},
                                   "gateway_policy": {"pass": 0, "known": 0, "runs": 0}, "known_findings": 0,
                                   "not_run": 0}
    assert set(document["sdk"]) == {"openai", "mcp"} and document["scenario_format"] == 1
    assert "| passing | pass | pass |" in (reports / "report.md").read_text()


def test_output_that_is_not_a_terminal_is_not_wrapped(capsys: pytest.CaptureFixture[str]) -> None:
    long_line = "a-path/" * 30
    console.out.print(long_line)
    console.err.print(long_line)
    assert capsys.readouterr() == (long_line + "\n", long_line + "\n")


@pytest.mark.parametrize("args", [("-h",), ("run", "-h"), ("bench", "-h"), ("serve", "upstream", "-h")])
def test_dash_h_is_help(args: tuple[str, ...]) -> None:
    code, output = invoke(*args)
    assert code == 0 and output.startswith("Usage: "), output


def test_run_exits_1_when_a_scenario_fails_and_saves_its_exchange(tmp_path: Path) -> None:
    write_scenario(tmp_path, FAILING)
    reports = tmp_path / "reports"
    code, _ = invoke("run", str(tmp_path), "--report-dir", str(reports), "--mode", "nonstream")
    assert code == 1
    assert "output item types differ" in (reports / "report.md").read_text()
    saved = json.loads((reports / "exchanges" / "failing__nonstream__ask.json").read_text())
    assert saved["response"]["status"] == 200 and saved["request"]["body"]["input"].startswith("Hi")


def test_a_broken_file_exits_2_and_the_others_still_run(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING, "good.yaml")
    write_scenario(tmp_path, PASSING.replace("id: passing", "id: broken").replace("title:", "titel:"), "bad.yaml")
    reports = tmp_path / "reports"
    code, _ = invoke("run", str(tmp_path), "--report-dir", str(reports))
    assert code == 2
    document = json.loads((reports / "results.json").read_text())
    assert document["summary"]["pass"] == 2
    assert [error.split(": ", 1)[1] for error in document["file_errors"]] == [
        "scenario 'broken': title: Field required",
        "scenario 'broken': titel: unknown field (did you mean 'title'?)",
    ]


def test_a_broken_file_and_a_failing_scenario_exit_2(tmp_path: Path) -> None:
    write_scenario(tmp_path, FAILING, "failing.yaml")
    write_scenario(tmp_path, "id: [", "bad.yaml")
    code, _ = invoke("run", str(tmp_path), "--report-dir", str(tmp_path / "reports"), "--mode", "nonstream")
    assert code == 2


def test_a_run_on_the_reference_gateway_begins_its_servers_process_before_it_reads_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers' process imports the gateway and the fixtures (most of a second) while the
    run reads its scenario files, and starts them while the run imports what runs its units; it
    serves the run, and none is left once the run is over."""
    write_scenario(tmp_path, PASSING)
    alive_while_reading: list[list[str]] = []
    read = catalogue.load_catalogue

    def reading(paths: tuple[Path, ...]) -> Catalogue:
        alive_while_reading.append([child.name for child in multiprocessing.active_children()])
        return read(paths)

    monkeypatch.setattr(catalogue, "load_catalogue", reading)
    events: list[Any] = []
    tell, executing = StackProcess.tell, running._executing
    monkeypatch.setattr(StackProcess, "tell", lambda servers, **settings: events.append(settings["mcp_names"])
                        or tell(servers, **settings))
    monkeypatch.setattr(running, "_executing", lambda: events.append("imports what runs the units") or executing())
    code, output = invoke("run", str(tmp_path), "--report-dir", str(tmp_path / "reports"))
    assert code == 0, output
    assert alive_while_reading == [["parity-servers"]]
    assert events[:2] == [(), "imports what runs the units"]  # told what to serve (no MCP fixture) at once
    assert multiprocessing.active_children() == []


def test_a_run_that_ends_at_its_scenario_files_leaves_no_servers_process(tmp_path: Path) -> None:
    write_scenario(tmp_path, "id: [", "bad.yaml")
    code, output = invoke("run", str(tmp_path), "--report-dir", str(tmp_path / "reports"))
    assert code == 2 and "no scenario could be loaded" in output
    assert multiprocessing.active_children() == []


def test_unknown_scenario_id_is_a_usage_error(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING)
    code, output = invoke("run", str(tmp_path), "--scenario", "nope", "--report-dir", str(tmp_path / "r"))
    assert code == 2 and "no scenario with id nope" in output


def test_an_unknown_scenario_id_or_tag_names_the_closest_known_one(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING.replace("title: passing", "title: passing\ntags: [streaming]"))
    code, output = invoke("run", str(tmp_path), "-s", "pasing", "-s", "zzz", "--report-dir", str(tmp_path / "r"))
    assert code == 2 and "no scenario with id pasing (did you mean 'passing'?), zzz" in output
    for command in (("run", "-s", "passing", "--report-dir", str(tmp_path / "r")), ("list",)):
        code, output = invoke(*command, str(tmp_path), "-t", "streming")
        assert code == 2 and "no scenario with tag streming (did you mean 'streaming'?)" in output, command
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("target", "meant"), [("smgg", "smg"), ("refrence", "reference"),
                                                ("127.0.0.1:8080", "http://127.0.0.1:8080"),
                                                ("localhost:8080", "http://localhost:8080")])
def test_a_target_that_names_nothing_names_the_closest_target_or_the_url_it_may_mean(
        target: str, meant: str, tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING)
    code, output = invoke("run", str(tmp_path), "--target", target, "--report-dir", str(tmp_path / "r"))
    assert code == 2 and f"unknown target {target!r} (did you mean {meant!r}?)" in " ".join(output.split()), output
    assert "Running" not in output  # nothing announced runs that never started


def test_a_profile_name_that_names_nothing_names_the_closest_profile(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING)
    for command in (("run", str(tmp_path), "--target", "smgg@1.0", "--report-dir", str(tmp_path / "r")),
                    ("profiles", "lock", "smgg")):
        code, output = invoke(*command)
        assert code == 2 and "smgg: no such profile (did you mean 'smg'?)" in " ".join(output.split()), output


def test_no_secret_reaches_a_report(tmp_path: Path) -> None:
    write_scenario(tmp_path, FAILING)
    reports = tmp_path / "reports"
    code, _ = invoke("run", str(tmp_path), "--report-dir", str(reports), "--api-key", "sk-cli-secret-0123456789",
                     "--header", "X-Team-Token: team-secret-value")
    assert code == 1
    written = "".join(path.read_text() for path in reports.rglob("*") if path.is_file())
    for secret in ("sk-cli-secret-0123456789", "team-secret-value", "sk-mcp-secret-0123456789",
                   "header-secret-value"):
        assert secret not in written
    assert "<redacted>" in written


COULD_NOT_RUN = PASSING.replace("id: passing", "id: unreachable-step") + """
  - id: then
    request: {model: "{{model}}", input: "{{ask.output[7].id}}"}
    model: [{text: "Hello"}]
"""


def test_a_scenario_that_could_not_run_is_its_own_outcome_and_never_counts_toward_parity(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING, "passing.yaml")
    write_scenario(tmp_path, COULD_NOT_RUN, "broken-step.yaml")
    reports = tmp_path / "reports"
    code, output = invoke("run", str(tmp_path), "--report-dir", str(reports), "--mode", "nonstream")
    assert code == 2
    assert "1 passed, 0 failed, 1 could not run, 0 unsupported; parity with OpenAI 1/1" in " ".join(output.split())
    document = json.loads((reports / "results.json").read_text())
    assert (document["summary"]["could_not_run"], document["summary"]["parity"]) == (
        1, {"pass": 1, "known": 0, "runs": 1})
    report = (reports / "report.md").read_text()
    assert "1 passed, 0 failed, 1 could not run" in report and "| unreachable-step | **could not run** |" in report


def test_a_selection_that_matches_nothing_is_a_usage_error(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING)
    code, output = invoke("run", str(tmp_path), "-t", "no-such-tag", "--report-dir", str(tmp_path / "r"))
    assert code == 2 and "no scenario with tag no-such-tag" in output
    assert not (tmp_path / "r").exists()


def test_a_run_in_which_nothing_could_run_leaves_the_previous_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    write_scenario(tmp_path, PASSING, "passing.yaml")
    assert invoke("run", str(tmp_path), "--report-dir", str(reports))[0] == 0
    before = (reports / "results.json").read_text()
    (tmp_path / "passing.yaml").write_text("id: [")
    code, output = invoke("run", str(tmp_path), "--report-dir", str(reports))
    assert code == 2 and "no scenario could be loaded" in output
    (tmp_path / "passing.yaml").write_text(COULD_NOT_RUN)
    code, output = invoke("run", str(tmp_path), "--report-dir", str(reports))
    assert code == 2 and "nothing could run" in output, output
    assert (reports / "results.json").read_text() == before


@pytest.mark.parametrize("command", [
    ("serve", "upstream"), ("serve", "mcp", "calc"),
    ("serve", "reference", "--upstream", "http://127.0.0.1:9/v1", "--store", ":memory:"),
])
def test_serving_on_a_busy_port_is_a_one_line_error_naming_it(command: tuple[str, ...]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        port = occupant.getsockname()[1]
        code, output = invoke(*command, "--port", str(port))
    assert code == 2
    assert output.splitlines() == [f"error port {port} is already in use on 127.0.0.1 (another server listens "
                                   "there); choose another with --port"]


def test_schema_writes_into_the_current_folder_and_never_into_the_package(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = builtin_scenarios_dir() / "scenario.schema.json"
    before = shipped.stat().st_mtime_ns
    monkeypatch.chdir(tmp_path)
    code, output = invoke("schema")
    assert code == 0, output
    assert json.loads((tmp_path / "scenario.schema.json").read_text()) == json.loads(shipped.read_text())
    assert shipped.stat().st_mtime_ns == before
    assert invoke("schema", "--check") == (0, f"{shipped} is up to date\n")


def test_json_puts_the_results_document_alone_on_standard_output(tmp_path: Path) -> None:
    write_scenario(tmp_path, PASSING, "passing.yaml")
    write_scenario(tmp_path, FAILING, "failing.yaml")
    reports = tmp_path / "reports"
    completed = child_process.run([sys.executable, "-m", "responses_parity.harness", "run", str(tmp_path), "--json",
                                   "--mode", "nonstream", "--report-dir", str(reports)],
                                  capture_output=True, text=True, check=False)
    assert completed.returncode == 1, completed.stderr
    assert json.loads(completed.stdout) == json.loads((reports / "results.json").read_text())
    assert "1 passed, 1 failed, 0 could not run" in completed.stderr and "fail  failing [nonstream]" in completed.stderr


def test_quiet_shows_the_runs_that_did_not_pass_the_default_their_findings_verbose_every_run(tmp_path: Path) -> None:
    shutil.copy(builtin_scenarios_dir() / "mcp-call.yaml", tmp_path)  # its stream passes with a note
    write_scenario(tmp_path, FAILING, "failing.yaml")
    run = ("run", str(tmp_path), "--report-dir", str(tmp_path / "reports"), "-j", "1")
    code, quiet = invoke(*run, "-q")
    assert code == 1
    differ = "ask: output item types differ: mcp_list_tools, message instead of function_call at 0"
    tally = ("2 passed, 2 failed, 0 could not run, 0 unsupported; parity with OpenAI 2/4, gateway policy 0/0; report: "
             f"{tmp_path / 'reports' / 'report.md'}")
    assert quiet.splitlines() == [f"fail failing [nonstream]: {differ}", f"fail failing [stream]: {differ}", tally]
    code, default = invoke(*run)
    failing = [line for line in default.splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in failing] == [["[1/4]", "fail", "failing"], ["[2/4]", "fail", "failing"]]
    assert f"        {differ}" in default.splitlines() and default.splitlines()[-3:] == quiet.splitlines()
    assert "mcp-call" not in default, "a passing run is only counted, and the table of runs is -v's"
    code, verbose = invoke(*run, "-v")
    note = "ask: note variant (expect.variants): shows the known variant"
    assert note not in default and note in verbose
    assert "[4/4] pass  mcp-call" in verbose and "│ mcp-call" in verbose


def test_exitfirst_stops_at_the_first_failure_and_says_how_many_runs_were_not_run(tmp_path: Path) -> None:
    write_scenario(tmp_path, FAILING, "a-failing.yaml")
    write_scenario(tmp_path, PASSING, "b-passing.yaml")
    reports = tmp_path / "reports"
    code, output = invoke("run", str(tmp_path), "--report-dir", str(reports), "-j", "1", "-x")
    assert code == 1
    assert "[1/4] fail  failing [nonstream]" in output and "[2/4]" not in output
    assert ("0 passed, 1 failed, 0 could not run, 0 unsupported; parity with OpenAI 0/1, gateway policy 0/0; "
            "3 not run (stopped at the first failure)") in output
    document = json.loads((reports / "results.json").read_text())
    assert (document["summary"]["units"], document["summary"]["not_run"]) == (1, 3)
    assert "3 not run (the run stopped at its first failure)" in (reports / "report.md").read_text()


def test_init_writes_a_scenarios_folder_whose_example_finds_its_schema_and_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = invoke("init")
    assert code == 0, output
    example = tmp_path / "scenarios" / "example-mcp-call.yaml"
    modeline = example.read_text().splitlines()[0]
    assert modeline == "# yaml-language-server: $schema=scenario.schema.json"
    schema = example.parent / modeline.partition("$schema=")[2]  # resolved as an editor does: beside the file
    jsonschema.validate(yaml.safe_load(example.read_text()), json.loads(schema.read_text()))
    code, output = invoke("run", "scenarios", "--report-dir", str(tmp_path / "reports"))
    assert code == 0, output
    assert "2 passed, 0 failed, 0 could not run, 0 unsupported" in output


def test_init_overwrites_nothing_unless_forced(tmp_path: Path) -> None:
    mine = tmp_path / "example-mcp-call.yaml"
    mine.write_text("mine")
    code, output = invoke("init", str(tmp_path))
    assert (code, output) == (2, f"error {mine} already exists; pass --force to overwrite\n")
    assert mine.read_text() == "mine" and not (tmp_path / "scenario.schema.json").exists()
    assert invoke("init", str(tmp_path), "--force")[0] == 0
    assert mine.read_text().startswith("# yaml-language-server: $schema=scenario.schema.json\n")
    assert (tmp_path / "scenario.schema.json").exists()


def test_replay_waits_for_a_slow_target_as_long_as_its_timeout_says(stack: Stack, tmp_path: Path) -> None:
    """The target answers after six seconds (a loaded machine's gateway can), more than an HTTP
    client waits by default: `parity replay` waits as long as `--timeout` says."""
    captured = json.loads((EXCHANGES / "error-400-model-not-found.json").read_text())

    async def late(request: object) -> JSONResponse:
        await asyncio.sleep(6)
        return JSONResponse(captured["response"]["body"], status_code=captured["response"]["status"])

    (tmp_path / "0001-post-v1-responses.json").write_text(json.dumps(captured))
    target = ServerThread(Starlette(routes=[Route("/v1/responses", late, methods=["POST"])])).start()
    try:
        result = CliRunner().invoke(main, ["replay", str(tmp_path / "0001-post-v1-responses.json"), "--target",
                                           target.url, "--upstream", stack.upstream_url or "", "--timeout", "60"])
    finally:
        target.stop()
    assert result.exit_code == 0, result.output


def test_replay_shows_the_message_of_each_error_where_the_answers_differ_and_no_secret(stack: Stack,
                                                                                       tmp_path: Path) -> None:
    """OpenAI refused the captured request with a 400; the target refuses it with a 422 of its
    own, quoting the key it was sent: both messages are shown, the key removed."""
    captured = json.loads((EXCHANGES / "error-400-model-not-found.json").read_text())

    async def refuse(request):  # type: ignore[no-untyped-def]
        return JSONResponse({"error": {"message": f"unknown model for key {request.headers.get('authorization')}",
                                       "type": "invalid_request_error", "param": "model", "code": None}},
                            status_code=422)

    (tmp_path / "0001-post-v1-responses.json").write_text(json.dumps(captured))
    target = ServerThread(Starlette(routes=[Route("/v1/responses", refuse, methods=["POST"])])).start()
    replay = ("replay", str(tmp_path / "0001-post-v1-responses.json"), "--target", target.url, "--upstream",
              stack.upstream_url or "", "--api-key", "sk-replayed-0123456789")
    try:
        (code, output), (_, as_json) = invoke(*replay), invoke(*replay, "--json")
    finally:
        target.stop()
    errors = {"captured": "HTTP 400 (invalid_request_error) \"The requested model 'gpt-4.1-turbo-preview' does not "
                          "exist.\"",
              "replayed": 'HTTP 422 (invalid_request_error) "unknown model for key <redacted>"'}
    assert code == 1, output
    assert [f"    {side}: {error}" for side, error in errors.items()] == output.splitlines()[1:3], output
    assert json.loads(as_json)["errors"] == errors


def test_a_target_that_refuses_the_runs_credentials_is_one_early_error_that_shows_no_secret(
        stack: Stack, tmp_path: Path) -> None:
    """A gateway that answers every request 401, quoting the key it was sent: one error before
    any scenario runs, naming the options that carry credentials, with the key removed."""
    async def refuse(request):  # type: ignore[no-untyped-def]
        return JSONResponse({"error": {"message": f"key {request.headers.get('authorization')} is not valid",
                                       "type": "invalid_request_error", "code": "invalid_api_key"}}, status_code=401)

    server = ServerThread(Starlette(routes=[Route("/v1/responses", refuse, methods=["POST"])])).start()
    try:
        code, output = invoke("run", "--target", server.url, "--upstream", stack.upstream_url or "", "--api-key",
                              "sk-refused-0123456789", "-s", "text-basic", "--report-dir", str(tmp_path))
    finally:
        server.stop()
    text = " ".join(output.split())
    assert code == 2 and "[1/" not in output, output
    assert f"POST {server.url}/v1/responses with an empty body answered HTTP 401" in text
    assert "the target refuses the run's credentials, so every scenario would fail alike; give its key with " \
           "--api-key, or its headers with --header" in text
    assert "sk-refused-0123456789" not in output and "key <redacted> is not valid" in output


def test_a_line_said_is_written_as_is_without_the_control_codes_rich_strips(
        capsys: pytest.CaptureFixture[str]) -> None:
    console.say("[bold]not markup[/bold] a\x07b\x08c\rd")
    console.out.print(escape("[bold]not markup[/bold] a\x07b\x08c\rd"))
    said, printed = capsys.readouterr().out.splitlines()
    assert said == printed == "[bold]not markup[/bold] abcd"
