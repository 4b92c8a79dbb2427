"""SDK-derived schema checks: what would break a client is an error, drift is a note.

The drift cases are the ones real OpenAI traffic shows (fields the SDK added later, open
enums, the nested error event); the breaking ones are what a gateway gets wrong.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from responses_parity.harness.judge.schemas import check_error_envelope, check_event, check_payload, event_validators
from responses_parity.harness.model.findings import Severity
from responses_parity.harness.scenario.vocabulary import output_item_types, sdk_event_types


def a_response() -> dict[str, Any]:
    """A Response as OpenAI sent it in mid-2025: complete for its time."""
    return {
        "id": "resp_68a1", "object": "response", "created_at": 1754000000, "status": "completed",
        "background": False, "error": None, "incomplete_details": None, "instructions": None,
        "max_output_tokens": None, "model": "gpt-4.1-2025-04-14", "parallel_tool_calls": True,
        "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
        "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
        "tools": [], "top_p": 1.0, "truncation": "disabled", "user": None, "metadata": {},
        "output": [
            {"id": "fc_1", "type": "function_call", "status": "completed", "name": "get_weather",
             "call_id": "call_1", "arguments": "{\"city\":\"Paris\"}"},
            {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "Sunny.", "annotations": [], "logprobs": []}]},
        ],
        "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17},
    }


def by_severity(findings: list[Any]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for finding in findings:
        grouped.setdefault(str(finding.severity), []).append(finding.message)
    return grouped


def test_the_installed_sdk_knows_the_core_types() -> None:
    assert {"message", "function_call", "mcp_call", "mcp_list_tools", "mcp_approval_request"} <= \
        output_item_types()
    assert {"response.created", "response.output_text.delta", "response.completed", "error"} <= sdk_event_types()
    assert frozenset(event_validators()) == sdk_event_types()


def test_a_response_recorded_before_cache_write_tokens_is_only_drift() -> None:
    findings = check_payload("response", a_response(), "body")
    assert [(str(f.severity), f.rule) for f in findings] == [("note", "schema.drift")]
    assert "`cache_write_tokens` is absent" in findings[0].message


def test_a_target_answering_now_without_a_field_the_sdk_requires_is_a_warning() -> None:
    findings = check_payload("response", a_response(), "body", current=True)
    assert [(str(f.severity), f.rule) for f in findings] == [("warning", "schema.missing")]
    assert "body usage.input_tokens_details: `cache_write_tokens` is missing" in findings[0].message


def test_an_event_openai_sends_before_the_sdk_declares_it_is_a_note() -> None:
    diff = {"type": "response.apply_patch_call_operation_diff.done", "sequence_number": 7, "output_index": 0,
            "item_id": "apc_1", "diff": "+x"}
    assert [(str(f.severity), f.rule) for f in check_event(diff, 7)] == [("note", "schema.sdk_lag")]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r["output"][0].pop("call_id"), "body output[0]: `call_id` is missing"),
    (lambda r: r["output"][1].pop("id"), "body output[1]: `id` is missing"),
    (lambda r: r.__setitem__("created_at", "yesterday"), "body created_at: 'yesterday' is not of type number"),
    (lambda r: r["output"][1].__setitem__("content", "Sunny."), "body output[1].content: 'Sunny.' is not of "
                                                                  "type array"),
    (lambda r: r["output"].append({"id": "x_1", "type": "teleport", "status": "completed"}),
     "body output[2].type: output item type 'teleport' is not one the installed openai SDK knows"),
])
def test_what_breaks_a_client_is_an_error(change: Any, expected: str) -> None:
    response = a_response()
    change(response)
    assert expected in by_severity(check_payload("response", response, "body")).get("error", [])


def test_an_unknown_content_part_type_is_a_warning_not_an_error() -> None:
    response = a_response()
    response["output"][1]["content"][0]["type"] = "output_hologram"
    findings = by_severity(check_payload("response", response, "body"))
    assert "error" not in findings
    assert any("type 'output_hologram'" in message for message in findings["warning"])


def test_an_open_enum_value_is_a_note() -> None:
    response = copy.deepcopy(a_response()) | {"status": "failed",
                                               "error": {"code": "insufficient_quota", "message": "quota"}}
    findings = by_severity(check_payload("response", response, "body"))
    assert "error" not in findings and "warning" not in findings
    assert "body error.code: 'insufficient_quota' is outside the SDK's values" in findings["note"]


def test_legacy_events_without_sequence_number_or_logprobs_are_drift() -> None:
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "delta": "Hi"}
    findings = check_event(delta, 4)
    assert {str(f.severity) for f in findings} == {"note"}
    assert {m.split("`")[1] for m in by_severity(findings)["note"]} == {"sequence_number", "logprobs"}


def test_the_nested_error_event_openai_sends_is_checked_as_an_envelope() -> None:
    nested = {"type": "error", "sequence_number": 2,
              "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota", "param": None}}
    assert [str(f.severity) for f in check_event(nested, 2)] == ["note"]
    broken = nested | {"error": {"code": "insufficient_quota"}}
    assert "event 2 (error) error: `type` is missing" in by_severity(check_event(broken, 2))["error"]


def test_an_event_the_sdk_does_not_know_is_a_warning() -> None:
    findings = check_event({"type": "response.teleported", "sequence_number": 3}, 3)
    assert [(str(f.severity), f.rule) for f in findings] == [("warning", "schema.unknown_event")]


def test_an_output_item_event_with_an_unknown_item_type_is_an_error() -> None:
    event = {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
             "item": {"id": "x_1", "type": "teleport"}}
    assert any("output item type 'teleport'" in m for m in by_severity(check_event(event, 2))["error"])


@pytest.mark.parametrize(("body", "severity"), [
    ({"error": {"message": "No such model", "type": "invalid_request_error", "param": "model",
                "code": "model_not_found"}}, None),
    ({"error": {"message": "No such model", "type": "invalid_request_error"}}, Severity.WARNING),
    ({"error": {"type": "invalid_request_error", "param": None, "code": None}}, Severity.ERROR),
    ({"error": "No such model"}, Severity.ERROR),
    ({"detail": "Not Found"}, Severity.ERROR),
])
def test_error_envelopes(body: dict[str, Any], severity: Severity | None) -> None:
    assert max((f.severity for f in check_error_envelope(body)), default=None) == severity
