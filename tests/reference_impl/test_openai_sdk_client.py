"""The official `openai` SDK, as a client of the reference gateway, streams an MCP call and an
approval round trip with `client.responses.stream(...)` without error, and its final response
has the same contract as the non-streamed one."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from openai import OpenAI

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.model.contract import Contract, project
from responses_parity.harness.wire.exchange import Exchange


def contract_of(response: Any) -> Contract:
    return project(Exchange("POST", "", status=200, body=response.model_dump(mode="json")))


def scripted(stack: Stack, turns: list[dict]) -> str:
    run = new_run_token()
    script = RunScript.model_validate({"steps": [turns]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    return run


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


def calc(stack: Stack, run: str, approval: str) -> list[dict]:
    return [{"type": "mcp", "server_label": "calc", "server_url": stack.mcp["calc"].for_run(run).url,
             "require_approval": approval}]


def test_an_mcp_call_streams_and_ends_like_the_json_response(stack: Stack, client: OpenAI) -> None:
    turns = [{"call": {"tool": "add", "arguments": {"a": 2, "b": 3}}}, {"text": "5"}]
    plain_run, streamed_run = scripted(stack, turns), scripted(stack, turns)
    plain = client.responses.create(model="m", input=f"2+3? {run_marker(plain_run, 0)}",
                                    tools=calc(stack, plain_run, "never"))
    with client.responses.stream(model="m", input=f"2+3? {run_marker(streamed_run, 0)}",
                                 tools=calc(stack, streamed_run, "never")) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.mcp_call.completed" in types and types[-1] == "response.completed"
    assert contract_of(final).output == contract_of(plain).output
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert final.output[1].output == "5"


def test_an_approval_round_trip_streams(stack: Stack, client: OpenAI) -> None:
    turns = [{"call": {"tool": "add", "arguments": {"a": 2, "b": 3}}}, {"text": "5"}]
    contracts: dict[str, list[Contract]] = {"plain": [], "streamed": []}
    for kind in contracts:
        run = scripted(stack, turns)
        tools = calc(stack, run, "always")
        request = {"model": "m", "input": f"2+3? {run_marker(run, 0)}", "tools": tools}
        if kind == "plain":
            asked = client.responses.create(**request)
        else:
            with client.responses.stream(**request) as stream:
                asked = stream.get_final_response()
        approval = next(item for item in asked.output if item.type == "mcp_approval_request")
        answer = {"model": "m", "previous_response_id": asked.id, "tools": tools,
                  "input": [{"type": "mcp_approval_response", "approve": True, "approval_request_id": approval.id}]}
        if kind == "plain":
            approved = client.responses.create(**answer)
        else:
            with client.responses.stream(**answer) as stream:
                approved = stream.get_final_response()
        assert approved.output[0].type == "mcp_call" and approved.output[0].approval_request_id == approval.id
        contracts[kind] = [contract_of(asked), contract_of(approved)]
    assert [c.output for c in contracts["streamed"]] == [c.output for c in contracts["plain"]]
    assert [c.interrupt.on for c in contracts["streamed"]] == ["mcp_approval_request", "none"]
