"""Comparisons say what differs, in words a gateway author can act on."""

from __future__ import annotations

from responses_parity.harness.compare import compare, compare_upstream, list_diff
from responses_parity.harness.contract import Contract, ErrorShape, Interrupt, ItemShape
from responses_parity.harness.exchange import Exchange
from responses_parity.harness.fixture_client import Observed
from responses_parity.harness.scenario import Expect, UpstreamExpect

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
