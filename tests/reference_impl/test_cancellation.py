"""A client that goes away stops the loop, even when something below it turns the cancellation
into an ordinary failure (the `mcp` SDK's task groups can, when a cancellation lands mid-call)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from mcp import Client

from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl.mcp_servers import CallResult, McpConnector, McpServer

DISCONNECT = """
id: disconnect-mid-call
title: the client goes away while the first tool runs
evidence: {contract: "7", unrecorded: true}
mcp: [calc]
steps:
  - id: plain
    request:
      model: "{{model}}"
      input: "Sleep, then add."
      tools: [{type: mcp, server_label: calc, server_url: "{{mcp.calc.url}}", require_approval: never}]
    model:
      - call: {tool: sleep, arguments: {seconds: 30}}
      - call: {tool: add, arguments: {a: 1, b: 2}}
      - text: "3"
    disconnect: {when: {upstream: {tool_runs: {sleep: 1}}}}
    expect:
      upstream: {model_calls: 1, tool_runs: {add: 0}}
  - id: settled
    send: false
    wait: {until: {quiet: 0.5}, timeout: 20}
"""


def test_a_call_that_swallows_its_cancellation_does_not_keep_the_loop_going(
        run_scenario: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    real_call = McpConnector.call_tool

    async def swallowing(self: McpConnector, server: McpServer, name: str, arguments: dict[str, Any]) -> CallResult:
        try:
            return await real_call(self, server, name, arguments)
        except asyncio.CancelledError:
            return CallResult(None, {"type": "http_error", "code": 502, "message": "stream closed"}, "stream closed")

    monkeypatch.setattr(McpConnector, "call_tool", swallowing)
    result = run_scenario(DISCONNECT)
    assert result.outcome == "pass", [finding.message for _, finding in result.findings]


def test_an_mcp_call_cancelled_mid_call_raises_the_cancellation(stack: Stack,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calling = asyncio.Event()

    async def breaks_when_cancelled(self: Client, name: str, arguments: dict[str, Any], **_: Any) -> Any:
        calling.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("the read stream broke") from None

    monkeypatch.setattr(Client, "call_tool", breaks_when_cancelled)

    async def go() -> None:
        server = McpServer("calc", stack.mcp["calc"].for_run("cancelprobe").url)
        task = asyncio.create_task(McpConnector(30).call_tool(server, "sleep", {"seconds": 30}))
        await asyncio.wait_for(calling.wait(), 30)  # mid-call: the session is open, the call under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
