"""The HTML report of a real run against the reference gateway: every finding of every scenario
run, each matrix cell a link to its run, and each stream's timeline (a WebSocket's frames too) beside the sequence it is
held against (or the reason there is none), with the arrival time of every event."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
from click.testing import CliRunner
from report_pages import ReportPage, scenarios_for_reports

from responses_parity.harness.cli import main
from responses_parity.harness.model.contract import collapse
from responses_parity.harness.report.charts import (MAX_MARKS_PER_ROW, TIME_PX, latency_chart, side_by_side, ticks,
                                                    timeline)
from responses_parity.harness.report.html import prepare_html, render_html
from responses_parity.harness.scenario.loader import builtin_scenarios_dir

SCENARIOS = ("text-misstated", "text-basic", "mcp-call", "function-call-output-prev-id", "chat-passthrough",
             "error-missing-model", "chain-refused")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], ReportPage, Path]:
    folder = tmp_path_factory.mktemp("report")
    selection = [argument for scenario in SCENARIOS for argument in ("-s", scenario)]
    misstated = scenarios_for_reports(folder / "scenarios")
    result = CliRunner().invoke(main, ["run", str(builtin_scenarios_dir()), str(misstated), *selection,
                                       "--mode", "all", "--report-dir", str(folder)], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # text-misstated fails, on purpose
    return json.loads((folder / "results.json").read_text()), ReportPage.read(folder / "report.html"), folder


def _unit(document: dict[str, Any], scenario: str, mode: str) -> dict[str, Any]:
    return next(r for r in document["results"] if r["scenario"] == scenario and r["mode"] == mode)


def test_every_finding_of_every_run_is_in_the_report(report) -> None:
    document, page, _ = report
    for result in document["results"]:
        shown = page.findings[f"unit-{result['scenario']}-{result['mode']}"]
        findings = [f for step in result["steps"] for f in step["findings"]]
        assert len(shown) == len(findings), result["scenario"]
        for finding in findings:
            assert any(finding["message"] in line and line.startswith(("caused by it: " if finding["consequence"]
                                                                        else "") + finding["severity"])
                       for line in shown)
    json_only = page.findings["unit-text-misstated-nonstream"]
    assert any("status is 'completed', expected 'incomplete'" in line for line in json_only)


def test_the_report_leads_with_what_failed_each_run_once_led_by_its_cause(report) -> None:
    document, page, _ = report
    failed = {f"unit-{r['scenario']}-{r['mode']}" for r in document["results"] if r["outcome"] == "fail"}
    assert len(failed) == 6  # text-misstated and chain-refused, in each mode
    matrix = page.order.index("parity-matrix")
    assert page.order[0] == "failed" and set(page.order[1:matrix]) == failed and len(page.order[1:matrix]) == 6
    assert page.order[matrix + 1] == "units" and page.collapsed == set(page.order[matrix + 2:-1])
    assert page.order[-1] == "coverage" and not failed & page.collapsed
    assert page.collapsed == {f"unit-{r['scenario']}-{r['mode']}" for r in document["results"]} - failed
    for mode in ("nonstream", "stream", "websocket"):
        assert page.causes[f"unit-chain-refused-{mode}"].startswith(
            "step ask: error (status, answer.error): the gateway answered HTTP 400 (invalid_request_error) "
            "\"Invalid 'temperature'")
        assert page.skipped[f"unit-chain-refused-{mode}"] == [
            "Skipped, since they need what a failed step answered: follow_up."]
    assert page.causes["unit-text-misstated-nonstream"] == (
        "step ask: error (status, expect.status): status is 'completed', expected 'incomplete'")


def test_report_md_leads_with_what_failed_too(report) -> None:
    document, _, folder = report
    markdown = (folder / "report.md").read_text()
    section = markdown[markdown.index("## What failed\n"):markdown.index("## Parity matrix\n")]
    failed = [(r["scenario"], r["mode"]) for r in document["results"] if r["outcome"] == "fail"]
    assert sorted(re.findall(r"^### (\S+) \[(\w+)\]$", section, re.MULTILINE)) == sorted(failed)
    unit = section[section.index("### chain-refused [stream]"):].splitlines()
    assert unit[2].startswith("- step `ask`: error (status, `answer.error`): the gateway answered HTTP 400")
    assert unit[3].startswith("  - caused by it: step `ask`: error (response_field, `expect.response_object`)")
    assert unit[4].startswith("- step `follow_up` skipped, since an earlier step failed: it needs what step `ask` "
                              "answered, which was HTTP 400")


def test_every_matrix_cell_links_to_its_run(report) -> None:
    document, page, _ = report
    cells = {(name.split()[0], mode): link for name, row in page.matrix.items()
             for mode, (_, link) in zip(("nonstream", "stream", "websocket"), row, strict=True) if link is not None}
    assert len(cells) == len(document["results"]) == 3 * len(SCENARIOS) - 1  # chat-passthrough runs no socket
    for (scenario, mode), link in cells.items():
        assert link == f"#unit-{scenario}-{mode}" and link[1:] in page.ids


def test_a_stream_is_drawn_beside_its_reference_with_the_differences_marked(report) -> None:
    _, page, _ = report
    rows = page.streams[("text-misstated", "stream", "ask")]
    assert ("extra", "", "response.in_progress") in rows
    assert ("changed", "response.refusal.done", "response.content_part.done") in rows
    assert all(reference == actual for tag, reference, actual in rows if tag == "same")
    assert ("unjudged", "", "response.created") in page.streams[("function-call-output-prev-id", "stream", "ask")]
    assert [tag for tag, _, _ in page.streams[("chat-passthrough", "stream", "ask")]] == ["same"] * 4
    assert not any(mode == "nonstream" for _, mode, _ in page.streams)


def test_a_stream_names_its_reference_or_why_there_is_none(report) -> None:
    document, _, _ = report
    stream = _unit(document, "mcp-call", "stream")["steps"][0]["stream"]
    assert stream["reference_label"].startswith("expected by the scenario: the variant it matched, “mcp_call")
    assert stream["reference"] == stream["events"] and stream["no_reference"] is None
    stream = _unit(document, "function-call-output-prev-id", "stream")["steps"][0]["stream"]
    assert stream["reference"] is None
    assert stream["no_reference"].startswith("the step states no sequence (`expect.events`); the stream is judged by "
                                             "what the step does state (interrupt, output, status)")
    stream = _unit(document, "chat-passthrough", "stream")["steps"][0]["stream"]
    assert stream["reference"] == ["role", "content", "finish", "[DONE]"]


def test_every_event_of_a_stream_has_its_arrival_time(report) -> None:
    document, _, _ = report
    streams = [(step["stream"], step["timing"]) for result in document["results"] for step in result["steps"]
               if step["stream"]]
    # Over SSE and over a WebSocket: error-missing-model's answer is an error, function-call-output-prev-id has two,
    # chat-passthrough runs no socket.
    assert len(streams) == 11
    for stream, timing in streams:
        times = [time for _, time in stream["arrivals"]]
        assert len(times) == stream["arrivals_total"] and times == sorted(times)
        assert times[0] > 0 and times[-1] <= timing["elapsed_s"] * 1000
        assert list(collapse([label for label, _ in stream["arrivals"]])) == stream["events"]


def test_rows_pair_what_both_sequences_have() -> None:
    rows = side_by_side(["a", "b", "c"], ["a", "x", "c", "d"])
    assert [(row.tag, row.reference, row.actual, row.actual_index) for row in rows] == [
        ("same", "a", "a", 0), ("changed", "b", "x", 1), ("same", "c", "c", 2), ("extra", "", "d", 3)]
    assert [row.tag for row in side_by_side(["a", "b"], ["a"])] == ["same", "missing"]


def test_ticks_are_round_and_cover_the_range() -> None:
    assert ticks(74.1) == [0, 20, 40, 60, 80]
    assert ticks(0.9) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert ticks(0) == [0, 1]


def test_a_timeline_marks_each_event_at_its_time() -> None:
    picture = timeline(["a", "b"], ["a", "c"], [("a", 0.0), ("c", 10.0), ("c", 20.0)])
    assert picture.time_x is not None and [row.row.tag for row in picture.rows] == ["same", "changed"]
    first, second = picture.rows
    assert [mark.x for mark in first.marks] == [picture.time_x]
    assert [round(mark.x - picture.time_x, 6) for mark in second.marks] == [TIME_PX / 2, TIME_PX]
    assert second.span == (second.marks[0].x, second.marks[1].x)
    many = timeline(None, ["d"], [("d", float(i)) for i in range(500)])
    assert len(many.rows[0].marks) == MAX_MARKS_PER_ROW and many.rows[0].row.tag == "unjudged"
    assert timeline(None, ["d"], None).time_x is None


def test_latency_bars_share_one_scale() -> None:
    chart = latency_chart({"fast": (2.0, 5.0), "slow": (20.0, 50.0)})
    assert chart is not None
    fast, slow = ((bar.median_x - chart.bars_x, bar.p95_x - chart.bars_x) for bar in chart.bars)
    assert slow == pytest.approx((fast[0] * 10, fast[1] * 10))
    assert latency_chart({}) is None


def test_the_reports_templates_are_compiled_once_ahead_of_the_report(
        report, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run compiles them while its servers start (about 0.1 s), and a matrix, which writes a
    report per target, compiles them once."""
    document, page, _ = report
    compiled = []
    compile_ = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile",
                        lambda environment, *args, **how: compiled.append(args) or compile_(environment, *args, **how))
    prepare_html()
    compiled.clear()
    for _report_of_a_target in range(2):
        assert ReportPage(render_html(document)).order == page.order
    assert compiled == []
