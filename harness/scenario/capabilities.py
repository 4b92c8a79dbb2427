"""What a scenario needs of a gateway beyond a plain `/v1/responses`, told from its steps, so
a target profile can declare what its gateway lacks and such scenarios are reported as
unsupported rather than failed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from .model import Scenario

Capability = Literal["chat_completions", "request_mcp_tools", "mcp_sse_transport", "conversations", "background",
                     "web_search", "file_search", "files_api", "vector_stores", "websocket", "compaction",
                     "input_tokens"]
MEANING: dict[str, str] = {
    "chat_completions": "talks to /v1/chat/completions",
    "request_mcp_tools": "names MCP servers by URL in its requests (`type: mcp` tools)",
    "mcp_sse_transport": "uses an MCP server over the SSE transport",
    "conversations": "uses the Conversations API",
    "background": "runs responses in the background",
    "web_search": "offers the hosted `web_search` tool, which the gateway must run itself",
    "file_search": "offers the hosted `file_search` tool, which the gateway must run over its vector stores",
    "files_api": "uploads or reads files through the Files API (/v1/files)",
    "vector_stores": "uses the Vector Stores API (/v1/vector_stores)",
    "websocket": "creates its responses over a WebSocket (WebSocket mode)",
    "compaction": "compacts a conversation (/v1/responses/compact, `context_management`, compaction items as input)",
    "input_tokens": "counts a request's input tokens (/v1/responses/input_tokens)",
}
HOSTED_TOOLS: tuple[Capability, ...] = ("web_search", "file_search")
"""The capabilities that are hosted tools a gateway runs server-side (the matrix shows them)."""
_API_PATHS: dict[Capability, re.Pattern[str]] = {
    api: re.compile(rf"^(?:\{{\{{\s*{name}_path\s*\}}\}}|(?:/v1)?/{name}(?:[/?]|$))")
    for api, name in (("files_api", "files"), ("vector_stores", "vector_stores"))
}
"""A step's path under an API: literal (`/v1/files/...`) or its placeholder (`{{files_path}}/...`)."""
_RESPONSES_ENDPOINTS: dict[Capability, str] = {"compaction": "/compact", "input_tokens": "/input_tokens"}
"""The endpoints beside `/v1/responses` (`{{responses_path}}/compact`) that are capabilities."""


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def hosted_tool(tool: dict[str, Any]) -> Capability | None:
    """The hosted tool a request's tool is (`web_search`, `web_search_preview`, dated
    variants: all `web_search`), or None."""
    kind = str(tool.get("type", ""))
    if kind.startswith("web_search"):
        return "web_search"
    return "file_search" if kind == "file_search" else None


def body_capabilities(body: Any) -> set[Capability]:
    """What a request body needs of a gateway: the conversation it names, running in the
    background, compaction (`context_management`, a compaction item as input), the hosted tools
    it offers, MCP servers named by URL."""
    if not isinstance(body, dict):
        return set()
    needs: set[Capability] = set()
    if "conversation" in body:
        needs.add("conversations")
    if body.get("background") is True:
        needs.add("background")
    items = body.get("input") if isinstance(body.get("input"), list) else []
    if "context_management" in body or any(isinstance(item, dict) and item.get("type") == "compaction"
                                           for item in items):
        needs.add("compaction")
    for tool in _tools(body):
        if (hosted := hosted_tool(tool)) is not None:
            needs.add(hosted)
        if tool.get("type") == "mcp" and "server_url" in tool:
            needs.add("request_mcp_tools")
            if ".sse_url" in str(tool["server_url"]):
                needs.add("mcp_sse_transport")
    return needs


API_CAPABILITIES: dict[str, Capability] = {"chat": "chat_completions", "conversations": "conversations",
                                           "files": "files_api", "vector_stores": "vector_stores"}
"""The capability each API beside the Responses API is."""


def required_capabilities(scenario: Scenario) -> set[Capability]:
    needs: set[Capability] = set()
    if scenario.surface == "chat":
        needs.add("chat_completions")
    for step in scenario.steps:
        path = step.path or ""
        if "conversations" in path:
            needs.add("conversations")
        needs.update(capability for capability, pattern in _API_PATHS.items() if pattern.match(path))
        needs.update(capability for capability, ending in _RESPONSES_ENDPOINTS.items() if path.endswith(ending))
        needs |= body_capabilities(step.request)
    return needs


def missing_capability(scenario: Scenario, lacks: Mapping[str, str], mode: str = "nonstream") -> str | None:
    """Why a gateway lacking `lacks` (capability -> reason) cannot run the scenario in `mode`,
    or None."""
    needs = required_capabilities(scenario) | ({"websocket"} if mode == "websocket" else set())
    for capability in sorted(needs):
        if capability in lacks:
            return f"the scenario {MEANING[capability]}; the gateway lacks that: {lacks[capability]}"
    return None
