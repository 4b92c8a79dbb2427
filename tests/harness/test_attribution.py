"""What each step caused is told by cause, not by when the harness looked: a model request by the
scripted turn it asked for, an MCP request by the request in flight when it arrived."""

from __future__ import annotations

from typing import Any

from responses_parity.harness.model.attribution import Sent, attribute
from responses_parity.harness.model.observed import Observed


def model(step: int, at: float) -> dict[str, Any]:
    return {"step": step, "at": at, "item_types": [], "anomalies": []}


def call(tool: str, at: float) -> dict[str, Any]:
    return {"method": "tools/call", "tool": tool, "fixture": "calc", "at": at, "ended_at": at + 0.1}


def tools_by_step(observed: Observed, sent: list[Sent]) -> dict[int, list[str]]:
    return {step: [c["tool"] for c in caused.mcp_calls] for step, caused in attribute(observed, sent).items()
            if caused.mcp_calls}


def test_a_background_requests_model_call_is_its_own_however_late_it_comes() -> None:
    observed = Observed(model_requests=[model(0, at=5.0), model(2, at=6.0)])
    caused = attribute(observed, [Sent(0, 1.0, None), Sent(2, 4.0, 7.0)])
    assert {step: len(o.model_requests) for step, o in caused.items()} == {0: 1, 2: 1}


def test_an_mcp_call_goes_to_the_request_in_flight() -> None:
    sent = [Sent(0, 1.0, 2.0), Sent(1, 3.0, 4.0)]
    observed = Observed(model_requests=[model(0, 1.2), model(1, 3.2)], mcp_calls=[call("add", 1.5), call("echo", 3.5)])
    assert tools_by_step(observed, sent) == {0: ["add"], 1: ["echo"]}


def test_an_approved_call_belongs_to_the_request_that_approved_it() -> None:
    # ask (step 0) asked for the call at 1.2; approve (step 1) runs it at 3.1, before its own model call
    sent = [Sent(0, 1.0, 2.0), Sent(1, 3.0, 4.0)]
    observed = Observed(model_requests=[model(0, 1.2), model(1, 3.5)], mcp_calls=[call("add", 3.1)])
    assert tools_by_step(observed, sent) == {1: ["add"]}


def test_an_abandoned_loop_that_goes_on_is_blamed_on_its_own_request() -> None:
    # the client left step 0 (no end), step 1 only reads a stored response (no create request)
    observed = Observed(model_requests=[model(0, 1.2), model(0, 6.0)], mcp_calls=[call("sleep", 1.5), call("add", 6.5)])
    assert tools_by_step(observed, [Sent(0, 1.0, None)]) == {0: ["sleep", "add"]}


def test_of_two_requests_in_flight_the_one_active_last_takes_the_call() -> None:
    # a background request (step 0) and a later one (step 1) overlap; step 1's model call asked last
    sent = [Sent(0, 1.0, None), Sent(1, 3.0, 5.0)]
    observed = Observed(model_requests=[model(0, 1.2), model(1, 3.2)], mcp_calls=[call("add", 3.4)])
    assert tools_by_step(observed, sent) == {1: ["add"]}
