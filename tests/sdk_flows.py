"""Client flows run with the official SDKs against a gateway, on the scripted upstream and the calc
MCP fixture: the `openai` SDK's MCP call, approval and function call round trip (as JSON, as an
SSE stream, or over WebSocket mode), and an openai-agents run (over HTTP or its WebSocket
transport); `stable` makes two runs' answers comparable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from openai import AsyncOpenAI, OpenAI

from responses_parity.fixtures.upstream.script import AdHocScript
from responses_parity.harness.engine.stack import Stack

Transport = Literal["json", "stream", "websocket"]
API_KEY = "sk-proxy-test-secret-4f7a9c2e1b"
MCP_TOKEN = "mcp-token-9d8c7b6a5f4e"
VOLATILE = {"id", "created_at", "completed_at", "call_id", "approval_request_id", "previous_response_id", "item_id",
            "response_id", "obfuscation"}
FLOW_TURNS: list[dict[str, Any]] = [
    {"call": {"tool": "add", "arguments": {"a": 2, "b": 3}}}, {"text": "2 + 3 = 5."},          # MCP call
    {"call": {"tool": "add", "arguments": {"a": 4, "b": 5}}}, {"text": "4 + 5 = 9."},          # approval
    {"call": {"tool": "get_weather", "arguments": {"city": "Paris"}}}, {"text": "Sunny, 18 °C."},  # function
]
AGENT_TURNS: list[dict[str, Any]] = [
    {"call": {"tool": "add", "arguments": {"a": 19, "b": 23}}},
    {"call": {"tool": "get_weather", "arguments": {"city": "Paris"}}}, {"text": "42, and 18 °C."}]
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
_TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


def stable(value: Any) -> Any:
    """An SDK object as the plain data it was parsed from, without what differs between two runs
    (ids, times)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", exclude_unset=True)  # what came on the wire
    if isinstance(value, dict):
        return {key: stable(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list | tuple):
        return [stable(item) for item in value]
    return value


def stack_with(turns: list[dict[str, Any]]) -> Stack:
    return Stack(mcp_names=["calc"], with_reference=True, adhoc_script=AdHocScript.model_validate({"turns": turns}))


def sdk_flow(client: OpenAI, mcp_url: str, transport: Transport, sent: list[dict[str, Any]] | None = None
             ) -> list[Any]:
    """An MCP call, an approval, a function call round trip: every answer the SDK parsed (when
    streamed, over SSE or a WebSocket, every event too); each request's fields go to `sent`."""
    seen: list[Any] = []
    opened: AbstractContextManager[Any] = client.responses.connect() if transport == "websocket" else nullcontext()
    with opened as connection:
        def create(**request: Any) -> Any:
            if sent is not None:
                sent.append({"model": "parity-model", **request})
            if transport == "json":
                seen.append(client.responses.create(model="parity-model", **request))
                return seen[-1]
            if transport == "stream":
                events = list(client.responses.create(model="parity-model", stream=True, **request))
            else:
                connection.response.create(model="parity-model", **request)
                events = list(_one_response(connection))
            seen.extend(events)
            return events[-1].response

        _flow(create, mcp_url)
    return seen


def _one_response(connection: Any) -> Iterator[Any]:
    """A WebSocket connection's events up to the response's end."""
    for event in connection:
        yield event
        if event.type in _TERMINAL:
            return


def _flow(create: Callable[..., Any], mcp_url: str) -> None:
    calc = {"type": "mcp", "server_label": "calc", "server_url": mcp_url, "authorization": MCP_TOKEN}
    create(input="What is 2 + 3?", tools=[calc | {"require_approval": "never"}])
    asked = create(input="What is 4 + 5?", tools=[calc | {"require_approval": "always"}])
    approval = next(item for item in asked.output if item.type == "mcp_approval_request")
    create(previous_response_id=asked.id, tools=[calc | {"require_approval": "always"}],
           input=[{"type": "mcp_approval_response", "approval_request_id": approval.id, "approve": True}])
    first = create(input="Weather in Paris?", tools=[WEATHER])
    call = next(item for item in first.output if item.type == "function_call")
    create(previous_response_id=first.id, tools=[WEATHER],
           input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"celsius": 18}'}])


def agent_run(base_url: str, mcp_url: str, transport: Transport) -> tuple[Any, list[Any]]:
    """The openai-agents Runner with a hosted MCP tool and a function tool (`AGENT_TURNS`): its
    final output and the raw items it produced; over a WebSocket, through the SDK's
    `responses_websocket_session`."""
    from agents import (Agent, HostedMCPTool, OpenAIResponsesModel, Runner, function_tool,
                        responses_websocket_session, set_tracing_disabled)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"18 °C in {city}"

    calc = HostedMCPTool(tool_config={"type": "mcp", "server_label": "calc", "require_approval": "never",
                                      "server_url": mcp_url})
    question = "19 + 23, and the weather in Paris?"

    async def go() -> tuple[Any, list[Any]]:
        set_tracing_disabled(True)
        if transport == "websocket":
            socket_url = "ws" + base_url.removeprefix("http")
            async with responses_websocket_session(api_key=API_KEY, base_url=base_url,
                                                   websocket_base_url=socket_url) as session:
                result = session.run_streamed(Agent(name="assistant", tools=[calc, get_weather],
                                                    model="parity-model"), question)
                async for _ in result.stream_events():
                    pass
                return result.final_output, [item.raw_item for item in result.new_items]
        model = OpenAIResponsesModel(model="parity-model", openai_client=AsyncOpenAI(base_url=base_url,
                                                                                   api_key=API_KEY))
        agent = Agent(name="assistant", tools=[calc, get_weather], model=model)
        if transport == "stream":
            result = Runner.run_streamed(agent, question)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, question)
        return result.final_output, [item.raw_item for item in result.new_items]

    return asyncio.run(go())

