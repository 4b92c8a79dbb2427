"""The tool budget of a response is min(max_tool_calls, the gateway's own cap)."""

from __future__ import annotations

import asyncio

import pytest

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
