"""A CI-style run against a golden set recorded from the reference gateway, a changed golden
caught with everything a reader needs, golden drift between two sets, and a baseline that
keeps known divergences from failing CI while new ones still do."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from faulty_gateways import RewritingGateway
from report_pages import ReportPage

from responses_parity.harness.cli import main
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.model.findings import Kind
from responses_parity.reference_impl import build_gateway_app

SCENARIOS = ("-s", "mcp-call", "-s", "mcp-authorization", "-s", "text-basic")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def record(tmp_path: Path, name: str = "reference") -> Path:
    code, output = invoke("record", *SCENARIOS, "--name", name, "--golden-dir", str(tmp_path / "goldens"),
                          "--report-dir", str(tmp_path / "record-report"))
    assert code == 0, output
    return tmp_path / "goldens" / name


def run_against(tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    report = tmp_path / "report"
    code, output = invoke("run", *SCENARIOS, "--against", "golden:reference", "--golden-dir",
                          str(tmp_path / "goldens"), "--report-dir", str(report), *extra)
    return code, output, json.loads((report / "results.json").read_text())


def drop_event(golden: Path, event: str) -> None:
    """Take every `event` out of the recorded mcp-call stream (its exchange is the golden truth)."""
    path = golden / "mcp-call" / "stream.json"
    unit = json.loads(path.read_text())
    response = unit["steps"][0]["exchange"]["response"]
    frames = response["sse"].split("\n\n")
    response["sse"] = "\n\n".join(frame for frame in frames if f'"type":"{event}"' not in frame)
    path.write_text(json.dumps(unit))


def test_a_run_against_its_own_golden_set_passes(tmp_path: Path) -> None:
    golden = record(tmp_path)
    manifest = json.loads((golden / "manifest.json").read_text())
    assert manifest["target"] == "reference" and manifest["scripted"] is True
    assert {"openai", "mcp", "responses-parity"} <= set(manifest["versions"])
    assert sorted(p.parent.name + "/" + p.name for p in golden.glob("*/*.json")) == [
        "mcp-authorization/nonstream.json", "mcp-authorization/stream.json", "mcp-call/nonstream.json",
        "mcp-call/stream.json", "text-basic/nonstream.json", "text-basic/stream.json"]
    code, output, _ = run_against(tmp_path)
    assert code == 0, output


def test_goldens_keep_no_mcp_authorization(tmp_path: Path) -> None:
    golden = record(tmp_path)
    scenario = (Path(__file__).parents[2] / "scenarios" / "mcp-authorization.yaml").read_text()
    token = scenario.split('authorization: "')[1].split('"')[0]
    written = "".join(p.read_text() for p in golden.rglob("*.json"))
    assert token and token not in written
    assert '"authorization": "<redacted>"' in written


def test_a_changed_golden_names_scenario_step_mode_kind_severity_and_difference(tmp_path: Path) -> None:
    drop_event(record(tmp_path), "response.mcp_call.completed")
    code, _, document = run_against(tmp_path)
    assert code == 1
    failing = [(r["scenario"], r["mode"], s["step"], f) for r in document["results"] for s in r["steps"]
               for f in s["findings"] if f["rule"].startswith("golden.")]
    assert [(scenario, mode, step, f["kind"], f["severity"]) for scenario, mode, step, f in failing] == [
        ("mcp-call", "stream", "ask", "event_sequence", "error")]
    assert failing[0][3]["message"].startswith("event sequence differs: unexpected response.mcp_call.completed")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "### mcp-call [stream]" in report and "golden.events" in report


def test_golden_diff_shows_what_changed_between_two_sets(tmp_path: Path) -> None:
    old = record(tmp_path, "before")
    new = record(tmp_path, "after")
    code, output = invoke("golden", "diff", str(old), str(new))
    assert code == 0 and "0 change(s)" in output
    drop_event(new, "response.mcp_call_arguments.delta")
    code, output = invoke("golden", "diff", str(old), str(new))
    assert code == 1
    assert f"changed: mcp-call [stream] step ask: {Kind.EVENT_SEQUENCE.aspect}: removed: " \
           "response.mcp_call_arguments.delta (event sequence differs: missing " \
           "response.mcp_call_arguments.delta" in output.replace("\n", " ")


def test_a_baseline_keeps_known_divergences_from_failing_but_not_new_ones(tmp_path: Path) -> None:
    golden = record(tmp_path)
    drop_event(golden, "response.mcp_call.completed")
    assert run_against(tmp_path)[0] == 1
    baseline = tmp_path / "baseline.json"
    code, output = invoke("baseline", "update", "--results", str(tmp_path / "report" / "results.json"),
                          "--output", str(baseline))
    assert code == 0 and "1 known divergence(s)" in output
    code, output, document = run_against(tmp_path, "--baseline", str(baseline))
    assert code == 0, output
    assert "1 known divergence(s) from the baseline" in output.replace("\n", " ")
    # The baseline keys on where and what (scenario, mode, step, kind, rule), not on the
    # message: the known event-sequence divergence stays known when its details change.
    drop_event(golden, "response.mcp_call_arguments.done")
    unit = json.loads((golden / "text-basic" / "nonstream.json").read_text())
    unit["steps"][0]["exchange"]["response"]["body"]["status"] = "incomplete"
    (golden / "text-basic" / "nonstream.json").write_text(json.dumps(unit))
    code, _, document = run_against(tmp_path, "--baseline", str(baseline))
    assert code == 1
    outcomes = {(r["scenario"], r["mode"]): r["outcome"] for r in document["results"]}
    assert outcomes[("text-basic", "nonstream")] == "fail"
    assert outcomes[("mcp-call", "stream")] == "known"  # counted apart: neither a failure nor a pass


def test_an_unknown_golden_set_is_a_usage_error(tmp_path: Path) -> None:
    code, output = invoke("run", "-s", "text-basic", "--against", "golden:nowhere", "--golden-dir", str(tmp_path))
    assert code == 2 and "no golden set 'nowhere'" in output
    assert f"record one with `parity record --target TARGET --name nowhere --golden-dir {tmp_path}`" in \
        " ".join(output.split())


def test_the_html_report_shows_the_matrix_and_the_streams_side_by_side(tmp_path: Path) -> None:
    drop_event(record(tmp_path), "response.mcp_call.completed")
    run_against(tmp_path)
    parser = ReportPage.read(tmp_path / "report" / "report.html")
    assert [label for label, _ in parser.matrix["mcp-call"]] == ["pass", "divergence (error)"]
    assert [label for label, _ in parser.matrix["text-basic"]] == ["pass", "pass"]
    links = [link for cells in parser.matrix.values() for _, link in cells]
    assert len(links) == 6 and all(link and link[0] == "#" and link[1:] in parser.ids for link in links)
    assert parser.matrix["mcp-call"][1][1] == "#unit-mcp-call-stream"
    rows = parser.streams[("mcp-call", "stream", "ask")]
    assert [row for row in rows if row[0] != "same"] == [("extra", "", "response.mcp_call.completed")]
    assert all(reference == actual for tag, reference, actual in rows if tag == "same")
    assert ("same", "response.created", "response.created") in parser.streams[("text-basic", "stream", "ask")]
    results = [json.loads(line) for line in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    assert {(r["scenario"], r["mode"]) for r in results} == {(s, m) for s in ("mcp-call", "mcp-authorization",
                                                                               "text-basic")
                                                             for m in ("nonstream", "stream")}


def test_a_field_the_golden_response_has_and_the_target_lacks_is_a_warning(tmp_path: Path) -> None:
    golden = record(tmp_path)
    path = golden / "text-basic" / "nonstream.json"
    unit = json.loads(path.read_text())
    body = unit["steps"][0]["exchange"]["response"]["body"]
    body["safety_summary"] = {"flagged": False}
    body["output"][0]["phase"] = "final_answer"
    path.write_text(json.dumps(unit))
    code, _, document = run_against(tmp_path)
    assert code == 0
    [finding] = [f for r in document["results"] if (r["scenario"], r["mode"]) == ("text-basic", "nonstream")
                 for s in r["steps"] for f in s["findings"] if f["rule"] == "golden.fields"]
    assert finding["severity"] == "warning"
    assert finding["message"].startswith("the Response lacks output[0].phase, safety_summary, which golden "
                                         "reference (recorded ")


CHAINED = """
id: chained
title: a follow-up continues the first answer
evidence: {recordings: [stream-text__openllmetry__1]}
modes: [nonstream]
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hello"}
    model: [{text: "Hi."}]
    expect: {status: completed}
  - id: follow
    request: {model: "{{model}}", input: "And?", previous_response_id: "{{ask.response.id}}"}
    model: [{text: "Nothing more."}]
    expect: {status: completed}
"""


def test_a_baseline_of_every_known_failure_makes_the_run_green_and_counts_them_apart(
        stack: Stack, tmp_path: Path) -> None:
    """A gateway that answers the first step `failed` without an id: the step fails and the
    follow-up cannot be sent. With a baseline of that failure the run exits 0, the unit is
    `known` (the follow-up that could not run is part of it), and the tally says so."""
    (tmp_path / "chained.yaml").write_text(CHAINED)
    app = build_gateway_app(reference_config(stack.upstream_url or ""))
    faulty = ServerThread(RewritingGateway(app, body=lambda body: {
        key: value for key, value in body.items() if key != "id"} | {"status": "failed"})).start()
    try:
        def run(*extra: str) -> tuple[int, str, dict]:
            code, output = invoke("run", str(tmp_path / "chained.yaml"), "--target", faulty.url, "--upstream",
                                  stack.upstream_url or "", "--report-dir", str(tmp_path / "report"), *extra)
            return code, output, json.loads((tmp_path / "report" / "results.json").read_text())

        code, output, document = run()
        assert code == 1 and [step["outcome"] for step in document["results"][0]["steps"]] == [
            "fail", "could_not_run"], output
        baseline = tmp_path / "baseline.json"
        assert invoke("baseline", "update", "--results", str(tmp_path / "report" / "results.json"),
                      "--output", str(baseline))[0] == 0
        code, output, document = run("--baseline", str(baseline))
    finally:
        faulty.stop()
    assert code == 0, output
    assert document["results"][0]["outcome"] == "known"
    assert "0 passed, 1 known, 0 failed, 0 could not run, 0 unsupported; parity with OpenAI 0/1, 1 known" in \
        " ".join(output.split())


def test_a_golden_set_recorded_over_websocket_judges_a_socket_run(tmp_path: Path) -> None:
    code, output = invoke("record", "-s", "text-basic", "--mode", "websocket", "--golden-dir",
                          str(tmp_path / "goldens"), "--report-dir", str(tmp_path / "record-report"))
    assert code == 0, output
    golden = tmp_path / "goldens" / "reference" / "text-basic" / "websocket.json"
    assert json.loads(golden.read_text())["steps"][0]["exchange"]["meta"]["transport"] == "websocket"
    def against_golden() -> tuple[int, str]:
        return invoke("run", "-s", "text-basic", "--mode", "websocket", "--against", "golden:reference",
                      "--golden-dir", str(tmp_path / "goldens"), "--report-dir", str(tmp_path / "report"))

    code, output = against_golden()
    assert code == 0, output
    unit = json.loads(golden.read_text())
    response = unit["steps"][0]["exchange"]["response"]
    response["sse"] = "\n\n".join(frame for frame in response["sse"].split("\n\n")
                                   if '"response.in_progress"' not in frame)
    golden.write_text(json.dumps(unit))
    code, output = against_golden()
    assert code == 1 and "response.in_progress" in output, output  # the golden's frames are what it is held to
