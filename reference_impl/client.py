"""The client's side of `/v1/responses`: the parsed request, its tools, the Response object.

`CreateRequest` is what validation hands to the loop; `response_object` renders what the
client reads back. Neither knows about the upstream model's wire format or the store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from .ids import new_id

REDACTED = "<redacted>"


@dataclass(frozen=True)
class FunctionTool:
    """A client-executed function: the loop stops when the model calls it."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    output_schema: dict[str, Any] | None = None

    def echo(self) -> dict[str, Any]:
        """The tool as OpenAI echoes it: `strict` defaults to true, and a strict schema is echoed
        as OpenAI enforces it (no further properties, every property required); `output_schema`
        as sent, null when not (recorded since July 2026)."""
        strict = True if self.strict is None else self.strict
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": _strict_schema(self.parameters) if strict else self.parameters, "strict": strict,
                "output_schema": self.output_schema}


def _strict_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An object schema as strict mode reads it: `additionalProperties` false and every
    property required (as recorded in OpenAI's echoes since late 2025)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return schema
    return schema | {"additionalProperties": False, "required": schema.get("required", list(schema.get("properties")
                                                                                               or {}))}


@dataclass(frozen=True)
class ApprovalPolicy:
    """`require_approval` as OpenAI applies it. Recorded OpenAI behaviour: with
    `{always: {tool_names: [x]}}`, a call to a tool *not* named still needed approval, so only
    `never` exempts a tool (`never` wins over `always`), and the default is `always`."""

    mode: Literal["always", "never", "filter"] = "always"
    never: frozenset[str] = frozenset()
    raw: Any = "always"

    def requires_approval(self, tool_name: str) -> bool:
        if self.mode == "filter":
            return tool_name not in self.never
        return self.mode == "always"


@dataclass(frozen=True)
class McpTool:
    """A remote MCP server named in the request (`type: mcp`)."""

    server_label: str
    server_url: str
    headers: dict[str, str] = field(default_factory=dict)
    authorization: str | None = None
    allowed_tool_names: frozenset[str] | None = None
    read_only_only: bool = False
    approval: ApprovalPolicy = ApprovalPolicy()
    server_description: str | None = None
    raw_allowed_tools: Any = None

    @property
    def transport(self) -> Literal["streamable_http", "sse"]:
        """OpenAI has no transport field; a URL path ending in `/sse` means the SSE transport."""
        return "sse" if urlsplit(self.server_url).path.rstrip("/").endswith("/sse") else "streamable_http"

    def allows(self, tool_name: str, read_only: bool | None) -> bool:
        if self.allowed_tool_names is not None and tool_name not in self.allowed_tool_names:
            return False
        return not self.read_only_only or bool(read_only)

    def echo(self) -> dict[str, Any]:
        """The tool as the Response echoes it: header values and `authorization` are never shown."""
        echoed: dict[str, Any] = {
            "type": "mcp",
            "allowed_tools": self.raw_allowed_tools,
            "headers": {name: REDACTED for name in self.headers} or None,
            "require_approval": self.approval.raw,
            "server_description": self.server_description,
            "server_label": self.server_label,
            "server_url": self.server_url,
        }
        if self.authorization is not None:
            echoed["authorization"] = REDACTED
        return echoed


@dataclass(frozen=True)
class FileSearchTool:
    """`type: file_search`: the gateway searches these vector stores (checked: filters,
    ranking options, result count)."""

    vector_store_ids: tuple[str, ...]
    max_num_results: int = 20
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] = field(default_factory=dict)
    score_threshold: float = 0.0

    def echo(self) -> dict[str, Any]:
        """As OpenAI echoes it: `filters`, `max_num_results` (20) and `ranking_options` filled in."""
        return {"type": "file_search", "filters": self.filters, "max_num_results": self.max_num_results,
                "ranking_options": {"ranker": "auto", "score_threshold": 0.0} | self.ranking_options,
                "vector_store_ids": list(self.vector_store_ids)}


_DEFAULT_LOCATION = {"type": "approximate", "city": None, "country": "US", "region": None, "timezone": None}


@dataclass(frozen=True)
class WebSearchTool:
    """`type: web_search` (or `web_search_preview`, dated variants): the gateway's web search
    provider answers; `allowed_domains` from `filters` (web_search types only)."""

    type: str
    raw: dict[str, Any] = field(default_factory=dict)
    allowed_domains: tuple[str, ...] = ()

    def max_results(self, default: int) -> int:
        """Pages per search, by `search_context_size` (low 3, medium 5, high 10); `default`
        when the request does not say."""
        size = self.raw.get("search_context_size")
        return {"low": 3, "medium": 5, "high": 10}[size] if size else default

    def echo(self) -> dict[str, Any]:
        """As OpenAI echoes it: `search_context_size` medium and a US `user_location` by default,
        and `filters` (null) on the web_search types."""
        defaults: dict[str, Any] = {"search_context_size": "medium", "user_location": dict(_DEFAULT_LOCATION)}
        if not self.type.startswith("web_search_preview"):
            defaults["filters"] = None
        given = {key: value for key, value in self.raw.items() if value is not None}
        return {"type": self.type} | defaults | given


HostedTool = FileSearchTool | WebSearchTool
Tool = FunctionTool | McpTool | FileSearchTool | WebSearchTool


@dataclass(frozen=True)
class CreateRequest:
    """A validated `POST /v1/responses` body. `input_items` is always a list of item dicts."""

    model: str
    input_items: list[dict[str, Any]]
    raw: dict[str, Any]
    tools: tuple[Tool, ...] = ()
    instructions: str | None = None
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = None
    max_output_tokens: int | None = None
    stream: bool = False
    store: bool = True
    background: bool = False
    previous_response_id: str | None = None
    conversation_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    include: frozenset[str] = frozenset()

    @property
    def function_tools(self) -> tuple[FunctionTool, ...]:
        return tuple(t for t in self.tools if isinstance(t, FunctionTool))

    @property
    def mcp_tools(self) -> tuple[McpTool, ...]:
        return tuple(t for t in self.tools if isinstance(t, McpTool))

    @property
    def hosted_tools(self) -> tuple[HostedTool, ...]:
        return tuple(t for t in self.tools if isinstance(t, (FileSearchTool, WebSearchTool)))

    def sampling(self) -> dict[str, Any]:
        """The request fields that shape the model's answer and go upstream unchanged."""
        keys = ("temperature", "top_p", "max_output_tokens", "reasoning", "text", "top_logprobs", "user")
        return {key: self.raw[key] for key in keys if self.raw.get(key) is not None}


def item_resource(item: dict[str, Any]) -> dict[str, Any]:
    """An input item as stored and listed (input_items, conversation items): a message gets
    `status` and its content as a list of parts."""
    if item.get("type") != "message":
        return item
    content = item.get("content")
    if isinstance(content, str):
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        content = [{"type": part, "text": content} | ({"annotations": []} if part == "output_text" else {})]
    return {"id": item["id"], "type": "message", "status": item.get("status") or "completed",
            "role": item["role"], "content": content}


_ID_PREFIXES = {"message": "msg", "compaction": "cmp"}


def with_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items as stored and listed: each with an id (a message's `msg_`, a compaction's
    `cmp_`, `item_` for the rest)."""
    return [item_resource(item if item.get("id") else {"id": new_id(_ID_PREFIXES.get(item["type"], "item")), **item})
            for item in items]


def _hosted_tool_use(web_searches: int) -> dict[str, Any]:
    """`tool_usage` as OpenAI reports it: no image generation here, and the web searches run."""
    tokens = {"image_tokens": 0, "text_tokens": 0}
    return {"image_gen": {"input_tokens": 0, "input_tokens_details": dict(tokens), "output_tokens": 0,
                          "output_tokens_details": dict(tokens), "total_tokens": 0},
            "web_search": {"num_requests": web_searches}}


def _reasoning_echo(reasoning: Any) -> dict[str, Any]:
    """`reasoning` as OpenAI echoes it: a summary asked as `auto` is echoed as `detailed`."""
    echoed = {"effort": None, "summary": None} | (reasoning if isinstance(reasoning, dict) else {})
    return echoed | ({"summary": "detailed"} if echoed["summary"] == "auto" else {})


def text_echo(text: Any) -> dict[str, Any]:
    """`text` as OpenAI echoes it: the format as sent (plain text when none), a json_schema
    format with `description` (null when not given), and `verbosity` (medium by default)."""
    text = text if isinstance(text, dict) else {}
    text_format = text.get("format") or {"type": "text"}
    if text_format.get("type") == "json_schema":
        text_format = {"type": "json_schema", "description": None} | text_format
    return {"verbosity": "medium"} | text | {"format": text_format}


FINISHED = ("completed", "incomplete")
"""The statuses of a response that ran to its end."""


def response_object(request: CreateRequest, *, response_id: str, created_at: int, status: str,
                    output: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                    error: dict[str, Any] | None = None, incomplete_reason: str | None = None,
                    web_searches: int = 0) -> dict[str, Any]:
    """The Response object as the client sees it, every key present as OpenAI returns it:
    `service_tier` is the tier asked for (`auto`) until the response has finished and the tier
    it ran on (`default`) after; `billing` only in a finished response's JSON body, never in a
    stream; `conversation` only in a conversation (recorded, 2025 and 2026)."""
    raw = request.raw
    finished = status in FINISHED
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": request.background,
        **({"billing": {"payer": "developer"}} if finished and not request.stream else {}),
        "completed_at": int(time.time()) if status == "completed" else None,
        **({"conversation": {"id": request.conversation_id}} if request.conversation_id else {}),
        "error": error,
        "frequency_penalty": raw.get("frequency_penalty", 0.0),
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "metadata": request.metadata,
        "model": request.model,
        "moderation": None,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls,
        "presence_penalty": raw.get("presence_penalty", 0.0),
        "previous_response_id": request.previous_response_id,
        "prompt_cache_key": raw.get("prompt_cache_key"),
        "prompt_cache_retention": raw.get("prompt_cache_retention"),
        "reasoning": _reasoning_echo(raw.get("reasoning")),
        "safety_identifier": raw.get("safety_identifier"),
        "service_tier": "default" if finished else "auto",
        "store": request.store,
        "temperature": raw.get("temperature", 1.0),
        "text": text_echo(raw.get("text")),
        "tool_choice": request.tool_choice,
        "tool_usage": _hosted_tool_use(web_searches),
        "tools": [tool.echo() for tool in request.tools],
        "top_logprobs": raw.get("top_logprobs", 0),
        "top_p": raw.get("top_p", 1.0),
        "truncation": raw.get("truncation", "disabled"),
        "usage": usage,
        "user": raw.get("user"),
    }
