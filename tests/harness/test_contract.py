"""The contract projection keeps what clients rely on, from a JSON body or from a stream."""

from __future__ import annotations

from openai_streams import message_item, response, sse_text, text_events

from responses_parity.harness.judge.reference import compare_with
from responses_parity.harness.model.contract import Interrupt, collapse, project
from responses_parity.harness.wire.exchange import Exchange


def test_a_stream_and_its_json_twin_project_to_the_same_items() -> None:
    streamed = project(Exchange("POST", "u", status=200, sse=sse_text(text_events(["Hi", " there"]))))
    body = response("completed", [message_item("Hi there")])
    plain = project(Exchange("POST", "u", status=200, body=body))
    assert streamed.output == plain.output and streamed.status == plain.status == "completed"
    assert streamed.stream.events[4] == "response.output_text.delta"
    assert streamed.stream.per_item[0] == ("response.output_item.added", "response.content_part.added",
                                           "response.output_text.delta", "response.output_text.done",
                                           "response.content_part.done", "response.output_item.done")
    assert streamed.stream.terminal == "response.completed" and not streamed.stream.done_sentinel


def test_interrupt_boundary() -> None:
    def interrupt(*items: dict) -> Interrupt:
        return project(Exchange("POST", "u", status=200, body=response("completed", list(items)))).interrupt

    call = {"type": "function_call", "name": "get_weather", "call_id": "c", "arguments": "{}"}
    approval = {"type": "mcp_approval_request", "name": "add", "server_label": "calc", "arguments": "{}"}
    assert interrupt(message_item("x")) == Interrupt("none")
    assert interrupt(call) == Interrupt("function_call", "get_weather")
    assert interrupt(call, approval) == Interrupt("mcp_approval_request", "add")


def test_an_error_body_projects_its_envelope() -> None:
    body = {"error": {"message": "Missing required parameter: 'model'.", "type": "invalid_request_error",
                      "param": "model", "code": "missing_required_parameter"}}
    contract = project(Exchange("POST", "u", status=400, body=body))
    assert contract.http_status == 400 and contract.status is None
    assert (contract.error.type, contract.error.code, contract.error.param, contract.error.has_message) == (
        "invalid_request_error", "missing_required_parameter", "model", True)


def test_an_error_code_that_is_no_string_projects_as_its_json_text_and_compares_with_a_golden() -> None:
    """smg 1.12.0 answers `code: 400`: a golden of that answer must still state an expectation."""
    exchange = Exchange("POST", "u", status=400, body={"error": {"message": "bad", "type": "Bad Request", "code": 400,
                                                                 "param": None}})
    contract = project(exchange)
    assert (contract.error.type, contract.error.code, contract.error.param) == ("Bad Request", "400", None)
    assert compare_with(exchange, contract, exchange, "golden smg") == []


def test_mcp_calls_count_as_gateway_tool_calls() -> None:
    calls = [{"type": "mcp_call", "name": "add", "status": "failed", "error": {"type": "mcp_tool_execution_error"},
              "approval_request_id": "mcpr_1"}]
    contract = project(Exchange("POST", "u", status=200, body=response("completed", calls)))
    assert contract.gateway_tool_calls == 1
    assert contract.output[0].error_type == "mcp_tool_execution_error"


def test_an_mcp_call_is_approval_linked_only_to_an_approval_its_request_granted() -> None:
    calls = [{"type": "mcp_call", "name": "add", "status": "completed", "approval_request_id": "mcpr_1"}]

    def linked(approvals: list[dict[str, object]]) -> bool | None:
        body = {"input": [{"type": "mcp_approval_response", **a} for a in approvals]}
        return project(Exchange("POST", "u", request_body=body, status=200,
                                body=response("completed", calls))).output[0].approval_linked

    assert linked([{"approval_request_id": "mcpr_1", "approve": True}]) is True
    assert linked([{"approval_request_id": "mcpr_2", "approve": True}]) is False
    assert linked([{"approval_request_id": "mcpr_1", "approve": False}]) is False


def test_collapse_folds_runs() -> None:
    assert collapse(["a", "b", "b", "b", "c", "b"]) == ("a", "b", "c", "b")
