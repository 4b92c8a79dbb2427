"""The tool budget of a response is min(max_tool_calls, the gateway's own cap), and the gateway's
own cap bounds the calls it refuses too."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.config import GatewayConfig
from responses_parity.reference_impl.json_body import JsonBody
from responses_parity.reference_impl.runtime import Runtime
from responses_parity.reference_impl.service import ResponsesService


@pytest.mark.parametrize(("requested", "cap", "budget"), [(None, 3, 3), (5, 3, 3), (2, 3, 2), (1, 32, 1)])
def test_budget(requested: int | None, cap: int, budget: int) -> None:
    runtime = Runtime.build(GatewayConfig(upstream_url="http://127.0.0.1:9/v1", tool_call_cap=cap))
    body = {"model": "m", "input": "x"} | ({"max_tool_calls": requested} if requested else {})
    _, ctx, _ = asyncio.run(ResponsesService(runtime).prepare(JsonBody(body, 0), api_key="k"))
    assert ctx.tool_budget == budget


def test_refused_calls_stop_at_the_gateways_cap_then_the_model_answers_without_tools() -> None:
    """Each such call is refused and the model told; without a bound, a model that answers so
    every time was asked again for as long as the request lasted."""
    asked: list[dict] = []

    async def model(request: Request) -> JSONResponse:
        asked.append(await request.json())
        call = {"type": "function_call", "id": "fc_1", "call_id": f"call_{len(asked)}", "name": "upper",
                "arguments": "{}", "status": "completed"}
        return JSONResponse({"id": "resp_up", "object": "response", "created_at": 1, "status": "completed",
                             "model": "m", "output": [call]})

    upstream = ServerThread(Starlette(routes=[Route("/v1/responses", model, methods=["POST"])])).start()
    config = GatewayConfig(upstream_url=f"{upstream.url}/v1", store_path=":memory:", tool_call_cap=3)
    gateway = ServerThread(build_gateway_app(config)).start()
    try:
        answer = httpx2.post(f"{gateway.url}/v1/responses", timeout=30, json={
            "model": "m", "input": "hi",
            "tools": [{"type": "function", "name": "lower", "parameters": {"type": "object", "properties": {}}}]})
    finally:
        gateway.stop()
        upstream.stop()
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    assert ["tools" in body for body in asked] == [True, True, True, False]
