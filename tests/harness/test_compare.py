"""Comparisons say what differs, in words a gateway author can act on."""

from __future__ import annotations

import json

from responses_parity.harness.model.contract import Contract, ErrorShape, Interrupt, ItemShape, project
from responses_parity.harness.model.observed import Observed
from responses_parity.harness.scenario.expectations import (Expect, UpstreamExpect, compare, compare_upstream,
                                                            list_diff, subset_mismatches)
from responses_parity.harness.wire.exchange import Exchange

JSON = Exchange("POST", "u", status=200, body={})


def test_list_diff_names_missing_and_unexpected() -> None:
    assert list_diff(["a", "b", "c"], ["a", "c", "d"]) == "missing b at 1; unexpected d at 2"
    assert list_diff(["a"], ["x"]) == "x instead of a at 0"


def test_item_fields_are_compared_only_where_stated() -> None:
    contract = Contract(200, status="completed", output=(ItemShape("mcp_call", status="failed", name="fail"),),
                        response_fields={"status": "completed"})
    assert compare(Expect.model_validate({"output": ["mcp_call"]}), contract, JSON) == []
    [finding] = compare(Expect.model_validate({"output": [{"type": "mcp_call", "status": "completed"}]}),
                        contract, JSON)
    assert finding.message == "output[0]: expected mcp_call(completed), got mcp_call(fail, failed)"


def test_error_fields_null_is_compared_missing_is_not() -> None:
    contract = Contract(400, error=ErrorShape("invalid_request_error", None, "input", True))
    assert compare(Expect.model_validate({"error": {"code": None}}), contract, JSON) == []
    [finding] = compare(Expect.model_validate({"error": {"param": None}}), contract, JSON)
    assert finding.message == "error.param is 'input', expected None"


def test_interrupt_and_events() -> None:
    contract = Contract(200, status="completed", interrupt=Interrupt("function_call", "get_weather"),
                        response_fields={"status": "completed"})
    [finding] = compare(Expect.model_validate({"interrupt": "none"}), contract, JSON)
    assert finding.message == "the response stops on function_call (get_weather), expected none"


def test_upstream_expectations() -> None:
    observed = Observed(
        model_requests=[{"item_types": ["message"], "body": {"instructions": "x"}},
                        {"item_types": ["message", "function_call", "mcp_list_tools"], "body": {}}],
        mcp_calls=[{"method": "tools/call", "tool": "add", "fixture": "calc"},
                   {"method": "tools/call", "tool": "add", "fixture": "calc"}],
    )
    expect = UpstreamExpect(model_calls=1, never_sent=["mcp_list_tools"], tool_runs={"add": 1})
    assert [f.message for f in compare_upstream(expect, observed)] == [
        "the gateway called the model 2 time(s), expected 1",
        "model request 2 carried mcp_list_tools, which must never reach the model",
        "the MCP tool 'add' ran 2 time(s), expected 1",
    ]


def test_an_answer_without_a_response_object_is_one_finding() -> None:
    contract = Contract(400, error=ErrorShape("invalid_request_error", "x", None, True))
    [finding] = compare(Expect.model_validate({"status": "completed", "output": ["message"]}), contract, JSON)
    assert finding.message == "the answer (HTTP 400) carries no Response object: the body is an error envelope"


def test_headers_match_by_name_in_any_case_and_content_type_as_a_media_type() -> None:
    exchange = Exchange("POST", "u", status=200, body={}, headers={"content-type": "Text/Event-Stream; charset=UTF-8"})
    contract = Contract(200)
    assert compare(Expect.model_validate({"headers": {"Content-Type": "text/event-stream"}}), contract, exchange) == []
    assert compare(Expect.model_validate({"headers": {"content-type": "text/event-stream; charset=utf-8"}}),
                   contract, exchange) == []
    [finding] = compare(Expect.model_validate({"headers": {"content-type": "application/json"}}), contract, exchange)
    assert finding.message == "header content-type is 'Text/Event-Stream; charset=UTF-8', expected 'application/json'"


def stream_exchange(terminal: str, response: dict[str, object]) -> Exchange:
    events = [{"type": "response.created", "sequence_number": 0, "response": response | {"status": "in_progress"}},
              {"type": terminal, "sequence_number": 1, "response": response}]
    return Exchange("POST", "u", status=200, sse="".join(f"data: {json.dumps(e)}\n\n" for e in events))


def test_terminal_body_and_response_are_judged_on_the_terminal_event_of_a_stream() -> None:
    exchange = stream_exchange("response.incomplete", {"object": "response", "status": "incomplete",
                                                       "text": {"format": {"type": "text"}, "verbosity": "low"}})
    contract = project(exchange)
    expect = Expect.model_validate({"terminal": "response.incomplete", "body": {"status": "incomplete"},
                                    "response": {"text": {"format": {"type": "text"}}}})
    assert compare(expect, contract, exchange) == []
    wrong = Expect.model_validate({"terminal": "response.completed", "body": {"status": "completed"},
                                   "response": {"text": {"verbosity": "medium"}}})
    assert [f.message for f in compare(wrong, contract, exchange)] == [
        "the Response differs at $.text.verbosity ('low', expected 'medium')",
        "the body differs at $.status ('incomplete', expected 'completed')",
        "the stream ends with response.incomplete, expected response.completed",
    ]


def test_an_empty_object_in_a_part_means_an_empty_one() -> None:
    assert subset_mismatches({"metadata": {}}, {"metadata": {}}) == []
    assert subset_mismatches({"metadata": {}}, {"metadata": {"a": "1"}}) == [
        "$.metadata (expected an empty object, got keys a)"]


def test_every_difference_of_a_part_is_its_own_finding_not_only_the_first() -> None:
    """A file search result with three wrong fields: three findings, each naming its field (the
    wrong `filename` is no longer hidden behind the first difference)."""
    result = {"file_id": "file-1", "filename": "file-1", "vector_store_id": None, "score": 0.9, "attributes": {}}
    body = {"object": "response", "status": "completed", "output": [{"type": "file_search_call", "results": [result]}]}
    wanted = {"output": [{"type": "file_search_call", "results": [
        {"file_id": "file-1", "filename": "manual.txt", "vector_store_id": "vs_1", "attributes": {"a": 1}}]}]}
    findings = compare(Expect.model_validate({"response": wanted}), project(Exchange("POST", "u", 200, body=body)),
                       Exchange("POST", "u", 200, body=body))
    assert [f.message for f in findings] == [
        "the Response differs at $.output[0].results[0].filename ('file-1', expected 'manual.txt')",
        "the Response differs at $.output[0].results[0].vector_store_id (None, expected 'vs_1')",
        "the Response differs at $.output[0].results[0].attributes.a (missing)",
    ]


def test_tool_runs_none_and_the_request_sent_upstream() -> None:
    observed = Observed(model_requests=[{"item_types": [], "body": {"temperature": 0.2, "text": {"format": {}}}}],
                        mcp_calls=[{"method": "tools/call", "tool": "echo", "fixture": "strings"}])
    expect = UpstreamExpect(tool_runs="none", request={"temperature": 0.5})
    assert [f.message for f in compare_upstream(expect, observed)] == [
        "model request 1 differs at $.temperature (0.2, expected 0.5)",
        "MCP tools ran (strings.echo: 1), expected none",
    ]
    assert compare_upstream(UpstreamExpect(tool_runs="none", request={"temperature": 0.2}),
                            Observed(model_requests=observed.model_requests)) == []
