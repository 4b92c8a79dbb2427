"""The official SDKs over the reference gateway's WebSocket mode get what they get over SSE: the
`openai` SDK's `client.responses.connect()` through an MCP call, an approval and a function call
round trip, event for event; and openai-agents' WebSocket transport (`responses_websocket_session`)
through a run with a hosted MCP tool and a function tool, item for item. The events of each
response over the socket are judged by the harness's own contract as an SSE stream is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import OpenAI
from sdk_flows import AGENT_TURNS, API_KEY, FLOW_TURNS, agent_run, sdk_flow, stable, stack_with

from responses_parity.harness.judge.judgement import Case, judge
from responses_parity.harness.model.contract import project
from responses_parity.harness.model.findings import Severity
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.harness.wire.websocket import answered, socket_exchange


def _exchanges(events: list[Any], sent: list[dict[str, Any]]) -> list[Exchange]:
    """The events of a flow as one exchange per response (created by the `sent` requests), as
    the harness reads a socket's."""
    responses: list[list[dict[str, Any]]] = [[]]
    for event in events:
        responses[-1].append(json.loads(event.model_dump_json(exclude_unset=True)))
        if event.type in ("response.completed", "response.failed", "response.incomplete"):
            responses.append([])
    exchanges = []
    for request, frames in zip(sent, responses[:-1], strict=True):
        exchanges.append(socket_exchange("ws://gateway/v1/responses", request))
        answered(exchanges[-1], frames)
    return exchanges


def test_the_openai_sdk_gets_over_a_socket_what_it_gets_over_sse() -> None:
    with stack_with(FLOW_TURNS * 2) as stack:
        client = OpenAI(base_url=f"{stack.reference_url}/v1", api_key=API_KEY, max_retries=0)
        mcp_url = stack.mcp["calc"].base_url + "/mcp"
        sent_over_sse: list[dict[str, Any]] = []
        sent_over_socket: list[dict[str, Any]] = []
        over_sse = sdk_flow(client, mcp_url, "stream", sent_over_sse)
        over_socket = sdk_flow(client, mcp_url, "websocket", sent_over_socket)
    assert stable(over_socket) == stable(over_sse)
    socket_exchanges = _exchanges(over_socket, sent_over_socket)
    assert [project(e).to_dict() for e in socket_exchanges] == [
        project(e).to_dict() for e in _exchanges(over_sse, sent_over_sse)]
    assert [[item.type for item in project(e).output] for e in socket_exchanges] == [
        ["mcp_list_tools", "mcp_call", "message"], ["mcp_list_tools", "mcp_approval_request"], ["mcp_call", "message"],
        ["function_call"], ["message"]]
    for exchange in socket_exchanges:
        assert [f.message for f in judge(Case(exchange, current=True)).findings if f.severity >= Severity.WARNING] == []


def test_the_agents_sdk_gets_over_its_websocket_transport_what_it_gets_over_http() -> None:
    pytest.importorskip("agents", reason="the openai-agents SDK comes with the test extra: .[test]")
    with stack_with(AGENT_TURNS * 2) as stack:
        mcp_url = stack.mcp["calc"].base_url + "/mcp"
        over_http = agent_run(f"{stack.reference_url}/v1", mcp_url, "stream")
        over_socket = agent_run(f"{stack.reference_url}/v1", mcp_url, "websocket")
    assert over_socket[0] == "42, and 18 °C."
    assert stable(over_socket) == stable(over_http)
