"""Stream grammar: real-OpenAI-shaped streams pass; each broken rule is caught and named."""

from __future__ import annotations

from typing import Any

import pytest
from openai_streams import message_item, numbered_events, one_item_events, response, sse_text, text_events

from responses_parity.harness.judge.grammar import check_stream
from responses_parity.harness.model.findings import Severity
from responses_parity.harness.wire.sse import parse_sse


def check(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(str(f.severity), f.rule, f.message) for f in check_stream(parse_sse(sse_text(events)))]


def errors(events: list[dict[str, Any]]) -> list[str]:
    return [message for severity, _, message in check(events) if severity == "error"]


def test_an_openai_text_stream_passes_without_findings() -> None:
    assert check(text_events(["Once", " upon", " a time."])) == []


def test_a_stream_recorded_before_sequence_numbers_is_only_a_note() -> None:
    findings = check(text_events(["Hi", "!"], numbered=False))
    assert [(s, r) for s, r, _ in findings] == [("note", "grammar.sequence_numbers")]


def test_numbering_must_start_at_zero_and_go_up_by_one() -> None:
    events = text_events(["Hi"])
    events[3]["sequence_number"] = 7
    assert errors(events) == ["event 3 (response.content_part.added) has sequence_number 7, expected 3: "
                              "numbering starts at 0 and goes up by 1"]


def test_an_item_never_closed_is_an_error() -> None:
    events = numbered_events([e for e in text_events(["Hi"]) if e["type"] != "response.output_item.done"])
    assert "message at output_index 0 is added but never closed with response.output_item.done" in errors(events)


def test_deltas_must_concatenate_to_the_done_text() -> None:
    events = text_events(["Hel", "lo"])
    events[6]["text"] = "Help"
    assert any("concatenate to 'Hello', but response.output_text.done says 'Help'" in e for e in errors(events))


def test_exactly_one_terminal_event_and_it_is_last() -> None:
    events = text_events(["Hi"])
    events.append(dict(events[-1]))
    assert errors(numbered_events(events)) == ["the stream has 2 terminal events: response.completed, "
                                               "response.completed"]
    assert "the stream ended without a terminal event (response.completed, response.incomplete or " \
           "response.failed)" in errors(text_events(["Hi"])[:-1])


def test_the_terminal_output_must_equal_the_items_done() -> None:
    events = text_events(["Hi"])
    events[-1]["response"]["output"] = [message_item("Bye")]
    assert errors(events) == ["response.completed output[0] differs from the item its output_item.done carried "
                              "(fields: content)"]


def test_item_ids_must_match_the_item_at_their_index() -> None:
    events = text_events(["Hi"])
    events[4]["item_id"] = "msg_other"
    assert "response.output_text.delta names item_id 'msg_other', but output_index 0 is item 'msg_1'" in \
        errors(events)


def list_tools_item(index: int, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": f"mcpl_{index}", "type": "mcp_list_tools", "server_label": f"s{index}", "tools": tools}


def test_several_mcp_servers_with_only_the_last_list_closed_is_a_note() -> None:
    # As OpenAI streams it: all lists start, complete out of order, and only the last gets output_item.done.
    tool = [{"name": "t", "input_schema": {}, "annotations": None, "description": None}]
    events = [{"type": "response.created", "response": response("in_progress")},
              {"type": "response.in_progress", "response": response("in_progress")}]
    for index in range(3):
        events += [{"type": "response.output_item.added", "output_index": index, "item": list_tools_item(index, [])},
                   {"type": "response.mcp_list_tools.in_progress", "output_index": index, "item_id": f"mcpl_{index}"}]
    for index in (1, 0, 2):
        events.append({"type": "response.mcp_list_tools.completed", "output_index": index, "item_id": f"mcpl_{index}"})
    events.append({"type": "response.output_item.done", "output_index": 2, "item": list_tools_item(2, tool)})
    final = [list_tools_item(i, tool) for i in range(3)]
    events.append({"type": "response.completed", "response": response("completed", final)})
    findings = check(numbered_events(events))
    assert [s for s, _, _ in findings] == ["note", "note"]
    assert "OpenAI closes only the last of several" in findings[0][2]


def test_a_failed_stream_may_leave_items_open() -> None:
    events = text_events(["Hi"])[:5]
    events += [{"type": "error", "error": {"type": "server_error", "code": "server_error", "message": "boom",
                                           "param": None}},
               {"type": "response.failed", "response": response("failed")}]
    findings = check(numbered_events(events))
    assert all(s == "note" for s, _, _ in findings), findings


def test_events_must_carry_a_type() -> None:
    events = text_events(["Hi"])
    events[2] = {"sequence_number": 2}
    assert "event 2 has no `type`" in errors(events)


def test_severities_order() -> None:
    assert Severity.NOTE < Severity.WARNING < Severity.ERROR


def test_reasoning_encrypted_anew_in_the_terminal_event_is_a_note() -> None:
    """OpenAI re-encrypts a reasoning item's `encrypted_content` for the terminal event, so it
    differs from the `output_item.done` copy (seen in recorded web-search and MCP streams)."""
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA-first"}
    events = numbered_events([
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.in_progress", "response": response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning | {"encrypted_content": None}},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.completed",
         "response": response("completed", [reasoning | {"encrypted_content": "gAAAA-second"}])},
    ])
    assert [(s, r) for s, r, _ in check(events)] == [("note", "grammar.terminal_output")]
    events[-1]["response"]["output"][0]["summary"] = [{"type": "summary_text", "text": "changed"}]
    assert errors(events) == ["response.completed output[0] differs from the item its output_item.done carried "
                              "(fields: encrypted_content, summary)"]


def test_a_done_sentinel_is_a_warning() -> None:
    text = sse_text(text_events(["Hi"])) + "data: [DONE]\n\n"
    findings = [(str(f.severity), f.rule) for f in check_stream(parse_sse(text))]
    assert findings == [("warning", "grammar.done_sentinel")]


@pytest.mark.parametrize("field", ["id", "created_at", "model"])
def test_the_terminal_response_is_the_one_created(field: str) -> None:
    events = text_events(["Hi"])
    for event in events:
        if "response" in event:
            event["response"] |= {"created_at": 1754000000, "model": "gpt-4.1"}
    events[-1]["response"][field] = {"id": "resp_other", "created_at": 1754000001, "model": "gpt-4o"}[field]
    assert [rule for _, rule, _ in check(events)] == ["grammar.response_identity"]
    assert errors(events)[0].startswith(f"response.completed carries a response whose {field} ")


def mcp_call_events(event: str, status: str) -> list[dict[str, Any]]:
    call = {"id": "mcp_1", "type": "mcp_call", "server_label": "calc", "name": "add", "arguments": "{}",
            "approval_request_id": None, "error": None, "output": None}
    done = call | {"status": status, "output": "3" if status == "completed" else None}
    return numbered_events([
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.in_progress", "response": response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": call | {"status": "in_progress"}},
        {"type": "response.mcp_call.in_progress", "output_index": 0, "item_id": "mcp_1"},
        {"type": event, "output_index": 0, "item_id": "mcp_1"},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": response("completed", [done])},
    ])


def test_an_mcp_call_ends_as_its_event_says() -> None:
    assert errors(mcp_call_events("response.mcp_call.completed", "completed")) == []
    assert errors(mcp_call_events("response.mcp_call.failed", "failed")) == []
    assert errors(mcp_call_events("response.mcp_call.completed", "failed")) == [
        "mcp_call 'mcp_1' ends with status 'failed' after response.mcp_call.completed"]


def file_search_events(queries_added: list[str]) -> list[dict[str, Any]]:
    call = {"id": "fs_1", "type": "file_search_call", "results": None}
    done = call | {"status": "completed", "queries": ["zephyr valve"]}
    return one_item_events(call | {"status": "in_progress", "queries": queries_added}, [
        {"type": "response.file_search_call.in_progress", "output_index": 0, "item_id": "fs_1"},
        {"type": "response.file_search_call.searching", "output_index": 0, "item_id": "fs_1"},
        {"type": "response.file_search_call.completed", "output_index": 0, "item_id": "fs_1"}], done)


def test_an_item_is_added_with_each_field_empty_or_as_it_is_done() -> None:
    """OpenAI adds a file_search_call with `queries: []` (three recordings); llama-stack adds it
    with the model's raw arguments as its one query, which the item is not done with."""
    assert errors(file_search_events([])) == []
    assert errors(file_search_events(["zephyr valve"])) == []
    assert errors(file_search_events(['{"query": "zephyr valve"}'])) == [
        'the file_search_call at output_index 0 is added with queries ["{\\"query\\": \\"zephyr valve\\"}"], but '
        'done with ["zephyr valve"]: a field is added empty or as it ends']
