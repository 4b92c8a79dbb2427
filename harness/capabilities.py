"""What a scenario needs of a gateway beyond a plain `/v1/responses`, told from its steps, so
a target profile can declare what its gateway lacks and such scenarios are reported as
unsupported rather than failed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .scenario import Scenario

Capability = Literal["chat_completions", "request_mcp_tools", "mcp_sse_transport", "conversations", "background"]
MEANING: dict[str, str] = {
    "chat_completions": "talks to /v1/chat/completions",
    "request_mcp_tools": "names MCP servers by URL in its requests (`type: mcp` tools)",
    "mcp_sse_transport": "uses an MCP server over the SSE transport",
    "conversations": "uses the Conversations API",
    "background": "runs responses in the background",
}


def _mcp_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, dict) and t.get("type") == "mcp"] if isinstance(tools, list) else []


def required_capabilities(scenario: Scenario) -> set[Capability]:
    needs: set[Capability] = set()
    if scenario.surface == "chat":
        needs.add("chat_completions")
    for step in scenario.steps:
        body = step.request or {}
        if "conversations" in (step.path or "") or "conversation" in body:
            needs.add("conversations")
        if body.get("background") is True:
            needs.add("background")
        for tool in _mcp_tools(body):
            if "server_url" in tool:
                needs.add("request_mcp_tools")
                if ".sse_url" in str(tool["server_url"]):
                    needs.add("mcp_sse_transport")
    return needs


def missing_capability(scenario: Scenario, lacks: Mapping[str, str]) -> str | None:
    """Why a gateway lacking `lacks` (capability -> reason) cannot run the scenario, or None."""
    for capability in sorted(required_capabilities(scenario)):
        if capability in lacks:
            return f"the scenario {MEANING[capability]}; the gateway lacks that: {lacks[capability]}"
    return None
