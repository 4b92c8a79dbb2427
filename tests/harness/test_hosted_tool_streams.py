"""Hosted tool families in the stream grammar: a stream shaped as OpenAI sends each family
passes with items the openai SDK's types accept; each broken rule is caught and named. The
streams are written here by hand; the last test holds the rules against every real recording."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from openai_streams import message_item, one_item_events, sse_text

from responses_parity.harness.judge.checks import no_reference_findings
from responses_parity.harness.judge.grammar import check_stream
from responses_parity.harness.judge.schemas import check_event
from responses_parity.harness.model.findings import Severity
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.harness.wire.sse import parse_sse


def findings(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(rule, message) of every error and warning of the grammar."""
    return [(f.rule, f.message) for f in check_stream(parse_sse(sse_text(events))) if f.severity >= Severity.WARNING]


def rules(events: list[dict[str, Any]]) -> list[str]:
    return [rule for rule, _ in findings(events)]


def code_interpreter(code: str, status: str) -> dict[str, Any]:
    return {"id": "ci_1", "type": "code_interpreter_call", "status": status, "code": code,
            "container_id": "cntr_1", "outputs": None}


def custom_tool_call(tool_input: str, status: str) -> dict[str, Any]:
    return {"id": "ctc_1", "type": "custom_tool_call", "status": status, "call_id": "call_1", "name": "run_sql",
            "input": tool_input}


def apply_patch_call(diff: str, status: str) -> dict[str, Any]:
    return {"id": "apc_1", "type": "apply_patch_call", "status": status, "call_id": "call_2",
            "operation": {"type": "update_file", "path": "notes.md", "diff": diff}}


def shell_call(command: str, status: str) -> dict[str, Any]:
    return {"id": "sh_1", "type": "shell_call", "status": status, "call_id": "call_3",
            "action": {"commands": [command], "max_output_length": None, "timeout_ms": None},
            "environment": None}


def code_interpreter_stream(pieces: list[str]) -> list[dict[str, Any]]:
    code, ids = "".join(pieces), {"item_id": "ci_1", "output_index": 0}
    return one_item_events(code_interpreter("", "in_progress"), [
        {"type": "response.code_interpreter_call.in_progress", **ids},
        *({"type": "response.code_interpreter_call_code.delta", **ids, "delta": p} for p in pieces),
        {"type": "response.code_interpreter_call_code.done", **ids, "code": code},
        {"type": "response.code_interpreter_call.interpreting", **ids},
        {"type": "response.code_interpreter_call.completed", **ids},
    ], code_interpreter(code, "completed"))


def custom_tool_stream(pieces: list[str]) -> list[dict[str, Any]]:
    tool_input, ids = "".join(pieces), {"item_id": "ctc_1", "output_index": 0}
    return one_item_events(custom_tool_call("", "in_progress"), [
        *({"type": "response.custom_tool_call_input.delta", **ids, "delta": p} for p in pieces),
        {"type": "response.custom_tool_call_input.done", **ids, "input": tool_input},
    ], custom_tool_call(tool_input, "completed"))


def apply_patch_stream(pieces: list[str]) -> list[dict[str, Any]]:
    diff, ids = "".join(pieces), {"item_id": "apc_1", "output_index": 0}
    return one_item_events(apply_patch_call("", "in_progress"), [
        *({"type": "response.apply_patch_call_operation_diff.delta", **ids, "delta": p} for p in pieces),
        {"type": "response.apply_patch_call_operation_diff.done", **ids, "diff": diff},
    ], apply_patch_call(diff, "completed"))


def shell_stream(pieces: list[str]) -> list[dict[str, Any]]:
    """Shell command events name no item_id: they belong to the item at their output_index."""
    command, at = "".join(pieces), {"output_index": 0, "command_index": 0}
    return one_item_events(shell_call("", "in_progress"), [
        {"type": "response.shell_call_command.added", **at, "command": ""},
        *({"type": "response.shell_call_command.delta", **at, "delta": p} for p in pieces),
        {"type": "response.shell_call_command.done", **at, "command": command},
    ], shell_call(command, "completed"))


STREAMED_VALUES = {
    # family: (stream builder, the pieces it streams, the .done event, its field, how to break the item's copy)
    "code_interpreter_call": (code_interpreter_stream, ["rows = [1, 2]\n", "print(sum(rows))"],
                              "response.code_interpreter_call_code.done", "code",
                              lambda item: item.update(code="print(0)")),
    "custom_tool_call": (custom_tool_stream, ["SELECT name ", "FROM pets"],
                         "response.custom_tool_call_input.done", "input",
                         lambda item: item.update(input="SELECT 1")),
    "apply_patch_call": (apply_patch_stream, ["@@\n-old line\n", "+new line\n"],
                         "response.apply_patch_call_operation_diff.done", "diff",
                         lambda item: item["operation"].update(diff="+other\n")),
    "shell_call": (shell_stream, ["du -sh ", "/srv/data"], "response.shell_call_command.done", "command",
                   lambda item: item["action"].update(commands=["df -h"])),
}


@pytest.mark.parametrize("family", STREAMED_VALUES)
def test_a_hosted_call_streamed_as_openai_does_passes(family: str) -> None:
    build, pieces, _, _, _ = STREAMED_VALUES[family]
    events = build(pieces)
    assert findings(events) == []
    item_events = [e for e in events if "response" not in e]
    assert [f.message for position, event in enumerate(item_events)
            for f in check_event(event, position, current=True) if f.severity >= Severity.WARNING] == []


@pytest.mark.parametrize("family", STREAMED_VALUES)
def test_deltas_must_add_up_to_the_done_value(family: str) -> None:
    build, pieces, done_type, field, _ = STREAMED_VALUES[family]
    events = build(pieces)
    done = next(e for e in events if e["type"] == done_type)
    done[field] += "!"
    assert "grammar.deltas" in rules(events)


@pytest.mark.parametrize("family", STREAMED_VALUES)
def test_the_done_value_must_be_the_one_the_item_carries(family: str) -> None:
    build, pieces, done_type, _, break_item = STREAMED_VALUES[family]
    events = build(pieces)
    for event in events:
        if event["type"] == "response.output_item.done":
            break_item(event["item"])
            events[-1]["response"]["output"] = [copy.deepcopy(event["item"])]
    assert rules(events) == ["grammar.done_value"]
    assert findings(events)[0][1].startswith(f"{done_type} at output_index 0 says ")


def test_shell_deltas_without_item_id_are_named_by_their_output_index() -> None:
    events = shell_stream(["ls ", "-la"])
    next(e for e in events if e["type"] == "response.shell_call_command.delta")["delta"] = "rm "
    assert findings(events) == [("grammar.deltas", "the response.shell_call_command.delta events of the item at "
                                 "output_index 0 concatenate to 'rm -la', but response.shell_call_command.done "
                                 "says 'ls -la'")]


def citation(start: int, end: int, url: str) -> dict[str, Any]:
    return {"type": "url_citation", "start_index": start, "end_index": end, "url": url, "title": url}


def cited_message_stream(annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text, at = "Tides follow the moon.", {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    done = message_item(text)
    done["content"][0]["annotations"] = annotations
    return one_item_events(message_item("", "in_progress") | {"content": []}, [
        {"type": "response.content_part.added", **at, "part": part},
        {"type": "response.output_text.delta", **at, "delta": text, "logprobs": []},
        *({"type": "response.output_text.annotation.added", **at, "annotation_index": i, "annotation": a}
          for i, a in enumerate(annotations)),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part | {"text": text, "annotations": annotations}},
    ], done)


CITATIONS = [citation(0, 5, "https://tides.example/a"), citation(6, 21, "https://tides.example/b")]


def test_annotations_added_as_openai_does_pass() -> None:
    assert findings(cited_message_stream(CITATIONS)) == []


def test_annotation_indices_go_up_by_one_within_a_part() -> None:
    events = cited_message_stream(CITATIONS)
    next(e for e in events if e.get("annotation_index") == 1)["annotation_index"] = 2
    assert findings(events) == [("grammar.annotations", "output_text.annotation.added at output_index 0, "
                                 "content_index 0 has annotation_index 2, expected 1")]


def test_the_annotations_added_are_the_ones_the_part_carries() -> None:
    events = cited_message_stream(CITATIONS)
    for event in events:
        if event["type"] == "response.output_item.done":
            event["item"]["content"][0]["annotations"] = CITATIONS[:1]
            events[-1]["response"]["output"] = [copy.deepcopy(event["item"])]
    assert rules(events) == ["grammar.annotations"]


def web_search(status: str) -> dict[str, Any]:
    return {"id": "ws_1", "type": "web_search_call", "status": status,
            "action": {"type": "search", "query": "tide tables"}}


def web_search_stream(phases: list[str]) -> list[dict[str, Any]]:
    return one_item_events(web_search("in_progress"), [
        {"type": f"response.web_search_call.{phase}", "item_id": "ws_1", "output_index": 0} for phase in phases
    ], web_search("completed"))


def test_web_search_phases_as_openai_sends_them_pass() -> None:
    assert findings(web_search_stream(["in_progress", "searching", "completed"])) == []


def test_phases_open_with_in_progress_and_end_with_one_final_phase() -> None:
    assert findings(web_search_stream(["searching", "completed"])) == [
        ("grammar.call_phases", "response.web_search_call.searching is the first phase of the web_search_call "
         "at output_index 0; its phases open with response.web_search_call.in_progress")]
    assert findings(web_search_stream(["in_progress", "completed", "searching"])) == [
        ("grammar.call_phases", "response.web_search_call.searching for the web_search_call at output_index 0 "
         "after its completed phase")]


def test_a_phase_event_belongs_to_an_item_of_its_type() -> None:
    events = web_search_stream(["in_progress", "searching", "completed"])
    events[4]["type"] = "response.file_search_call.searching"
    assert ("grammar.call_phases", "response.file_search_call.searching for output_index 0, which is a "
            "web_search_call") in findings(events)


def image_generation(status: str, result: str | None) -> dict[str, Any]:
    return {"id": "ig_1", "type": "image_generation_call", "status": status, "result": result}


def image_stream(partial_indices: list[int]) -> list[dict[str, Any]]:
    ids = {"item_id": "ig_1", "output_index": 0}
    return one_item_events(image_generation("in_progress", None), [
        {"type": "response.image_generation_call.in_progress", **ids},
        {"type": "response.image_generation_call.generating", **ids},
        *({"type": "response.image_generation_call.partial_image", **ids, "partial_image_index": i,
           "partial_image_b64": "aGVsbG8="} for i in partial_indices),
        {"type": "response.image_generation_call.completed", **ids},
    ], image_generation("completed", "aGVsbG8="))


def test_partial_images_number_from_zero() -> None:
    assert findings(image_stream([0, 1])) == []
    assert findings(image_stream([0, 2])) == [
        ("grammar.call_phases", "response.image_generation_call.partial_image at output_index 0 has "
         "partial_image_index 2, expected 1")]


RECORDINGS = Path(os.environ.get("PARITY_OPENAI_RECORDINGS",
                                 Path(__file__).resolve().parents[2].parent / "shared" / "openai-recordings"))


def test_every_real_openai_recording_passes_without_error_or_warning() -> None:
    if not RECORDINGS.is_dir():
        pytest.skip(f"no recordings of OpenAI traffic at {RECORDINGS} (set PARITY_OPENAI_RECORDINGS)")
    broken = {path.name: [f.message for f in no_reference_findings(Exchange.from_file(json.loads(path.read_text())))
                          if f.severity >= Severity.WARNING]
              for path in sorted(RECORDINGS.glob("*.json"))}
    assert len(broken) > 0
    assert {name: messages for name, messages in broken.items() if messages} == {}
