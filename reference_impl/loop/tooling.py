"""Which tools the model sees, and how the client's `tool_choice` reaches it each turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hosted_items import HOSTED_CHOICE_TYPES, WEB_SEARCH_TYPES
from ..hosted_tools import HostedRunner
from ..upstream.items import ToolSpec, TurnRequest
from .state import GatewayTool, LoopContext, LoopState, ServerBinding


def expose_tools(bindings: tuple[ServerBinding, ...], listed: Mapping[str, tuple[Any, ...]],
                 reserved: frozenset[str]) -> dict[str, GatewayTool]:
    """Gateway tools by name, in binding order; a name already taken (by a client function, a
    hosted tool or an earlier server) stays with its first owner."""
    tools: dict[str, GatewayTool] = {}
    for binding in bindings:
        for tool in listed.get(binding.server.label, ()):
            if binding.offers(tool) and tool.name not in tools and tool.name not in reserved:
                tools[tool.name] = GatewayTool(binding, tool)
    return tools


def _server_functions(label: str, tools: Mapping[str, GatewayTool]) -> list[dict[str, str]]:
    return [{"type": "function", "name": name} for name, t in tools.items() if t.binding.server.label == label]


def _hosted_name(choice_type: str, hosted: Mapping[str, HostedRunner]) -> str:
    """The function name of the hosted tool a built-in `tool_choice` type names (`file_search`,
    `web_search_preview`, ...); the type itself when the request offers no such tool."""
    kind = "web_search" if choice_type in WEB_SEARCH_TYPES else choice_type
    return next((name for name, runner in hosted.items() if runner.kind == kind), choice_type)


def upstream_tool_choice(choice: Any, tools: Mapping[str, GatewayTool], first_turn: bool,
                         hosted: Mapping[str, HostedRunner] | None = None) -> Any:
    """The client's `tool_choice` as the model reads it. MCP choices become the server's
    functions, a built-in tool's type (`{type: file_search}`) the hosted tool's function. After
    the first model turn anything that forces a call relaxes to `auto`, so a forced choice
    cannot make the loop call tools forever."""
    hosted = hosted or {}
    if isinstance(choice, dict) and choice.get("type") in HOSTED_CHOICE_TYPES:
        choice = {"type": "function", "name": _hosted_name(choice["type"], hosted)}
    if isinstance(choice, dict) and choice.get("type") == "mcp":
        if choice.get("name"):
            choice = {"type": "function", "name": choice["name"]}
        else:
            choice = {"type": "allowed_tools", "mode": "required",
                      "tools": _server_functions(choice["server_label"], tools)}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        expanded: list[dict[str, Any]] = []
        for entry in choice.get("tools") or []:
            if entry.get("type") == "mcp" and not entry.get("name"):
                expanded += _server_functions(entry.get("server_label", ""), tools)
            elif entry.get("type") in HOSTED_CHOICE_TYPES:
                expanded.append({"type": "function", "name": _hosted_name(entry["type"], hosted)})
            else:
                expanded.append({"type": "function", "name": entry.get("name")})
        choice = {"type": "allowed_tools", "mode": choice.get("mode", "auto"), "tools": expanded}
    if first_turn or choice == "none":
        return choice
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return choice | {"mode": "auto"}
    return "auto"


def turn_request(ctx: LoopContext, state: LoopState, with_tools: bool) -> TurnRequest:
    request = ctx.request
    specs: list[ToolSpec] = []
    if with_tools:
        specs += [ToolSpec(t.name, t.description, t.parameters, t.strict) for t in request.function_tools]
        specs += [runner.spec() for runner in ctx.hosted.values()]
        specs += [ToolSpec(name, tool.listed.description, tool.listed.input_schema)
                  for name, tool in state.gateway_tools.items()]
    return TurnRequest(
        model=request.model,
        instructions=request.instructions,
        transcript=tuple(state.transcript),
        tools=tuple(specs),
        tool_choice=upstream_tool_choice(request.tool_choice, state.gateway_tools, state.model_calls == 0,
                                         ctx.hosted),
        parallel_tool_calls=request.parallel_tool_calls,
        stream=request.stream,
        sampling=request.sampling,
        previous_response_id=state.upstream_response_id,
        new_from=state.sent_upto,
    )
