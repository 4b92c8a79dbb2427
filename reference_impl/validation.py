"""Validate a `POST /v1/responses` body the way OpenAI does, or raise its 400.

Order follows what OpenAI was observed to do (contract notes §4.2): a missing `model`, then a
missing `input`, then unknown top-level keys, then each key's value in body order against
OpenAI's description of the body (`request_schema`); the relation between keys (empty input,
`previous_response_id` with `conversation`) comes last, and then what this gateway cannot do
(tool types it does not run, MCP servers it cannot reach by URL). Store lookups are not done
here: they belong to the state phase (`service.py`).
"""

from __future__ import annotations

from typing import Any

from .client import (
    ApprovalPolicy, CreateRequest, FileSearchTool, FunctionTool, HostedTool, McpTool, Tool, WebSearchTool,
)
from .errors import InvalidRequest
from .hosted_items import HOSTED_CHOICE_TYPES, WEB_SEARCH_TYPES
from .refusals import BodyCheck, compact_schema, input_tokens_schema, invalid_type, missing, responses_schema, unknown
from .vector_stores import checked_filter, score_threshold

_SUPPORTED_TOOL_TYPES = {"function", "mcp", "file_search"} | WEB_SEARCH_TYPES
_MAX_NUM_RESULTS = (1, 50)


def input_items(value: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items (of a valid `input`, or of a conversation's `items`), each with its `type`."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}] if value else []
    return [item if "type" in item else {"type": "message", **item} for item in value]


def _mcp_tool(param: str, raw: dict[str, Any]) -> McpTool:
    if raw.get("server_url") is None:
        if raw.get("connector_id") is not None or raw.get("tunnel_id") is not None:
            raise InvalidRequest("The reference gateway reaches MCP servers by 'server_url' only.",
                                 param=f"{param}.connector_id", code="unsupported_value")
        raise missing(f"{param}.server_url")
    allowed, read_only = raw.get("allowed_tools"), False
    names: frozenset[str] | None = None
    if isinstance(allowed, list):
        names = frozenset(allowed)
    elif isinstance(allowed, dict):
        if "tool_names" in allowed:
            names = frozenset(allowed["tool_names"] or [])
        read_only = bool(allowed.get("read_only"))
    return McpTool(
        server_label=raw["server_label"],
        server_url=raw["server_url"],
        headers=dict(raw.get("headers") or {}),
        authorization=raw.get("authorization"),
        allowed_tool_names=names,
        read_only_only=read_only,
        approval=_approval(raw.get("require_approval")),
        server_description=raw.get("server_description"),
        raw_allowed_tools=allowed,
    )


def _approval(value: Any) -> ApprovalPolicy:
    if value is None or value == "always":
        return ApprovalPolicy("always", raw="always")
    if value == "never":
        return ApprovalPolicy("never", raw="never")
    never = (value.get("never") or {}).get("tool_names") or []
    echoed = {"always": value.get("always"), "never": value.get("never")}
    return ApprovalPolicy("filter", never=frozenset(never), raw=echoed)


def _file_search_tool(param: str, raw: dict[str, Any]) -> FileSearchTool:
    """A checked file_search tool (its vector stores are looked up later, in `service.py`)."""
    limit = raw.get("max_num_results")
    low, high = _MAX_NUM_RESULTS
    if limit is not None and not low <= limit <= high:
        raise InvalidRequest(f"Invalid '{param}.max_num_results': expected an integer between {low} and {high}, "
                             f"but got {limit} instead.", param=f"{param}.max_num_results", code="invalid_value")
    ranking = raw.get("ranking_options")
    threshold = score_threshold(ranking, f"{param}.ranking_options")
    filters = checked_filter(raw["filters"], f"{param}.filters") if raw.get("filters") is not None else None
    return FileSearchTool(tuple(raw["vector_store_ids"]), 20 if limit is None else limit, filters,
                          dict(ranking or {}), threshold)


def _web_search_tool(raw: dict[str, Any]) -> WebSearchTool:
    """`filters.allowed_domains` exists on the web_search types only (not the preview ones)."""
    preview = raw["type"].startswith("web_search_preview")
    domains = [] if preview else (raw.get("filters") or {}).get("allowed_domains") or []
    return WebSearchTool(raw["type"], {key: value for key, value in raw.items() if key != "type"}, tuple(domains))


def hosted_tool(param: str, raw: dict[str, Any]) -> HostedTool | None:
    """The hosted tool a schema-valid tool object describes (None: not a hosted tool); a 400
    naming `param`'s part that this gateway cannot use."""
    if raw["type"] == "file_search":
        return _file_search_tool(param, raw)
    if raw["type"] in WEB_SEARCH_TYPES:
        return _web_search_tool(raw)
    return None


def _tools(value: list[dict[str, Any]]) -> tuple[Tool, ...]:
    """The tools of a valid `tools`; a 400 for a tool this gateway cannot run."""
    tools: list[Tool] = []
    labels: set[str] = set()
    for index, raw in enumerate(value):
        param = f"tools[{index}]"
        if raw["type"] not in _SUPPORTED_TOOL_TYPES:
            raise InvalidRequest(f"The reference gateway does not support tools of type '{raw['type']}'.",
                                 param=f"{param}.type", code="unsupported_value")
        if raw["type"] == "function":
            tools.append(FunctionTool(raw["name"], raw.get("description"), raw.get("parameters"), raw.get("strict"),
                                      raw.get("output_schema")))
            continue
        if (hosted := hosted_tool(param, raw)) is not None:
            if any(isinstance(tool, type(hosted)) for tool in tools):
                raise InvalidRequest(f"The reference gateway runs one {raw['type'].split('_20')[0]} tool per "
                                     "request.", param=f"{param}.type", code="unsupported_value")
            tools.append(hosted)
            continue
        tool = _mcp_tool(param, raw)
        if tool.server_label in labels:
            raise InvalidRequest(f"Duplicate MCP server_label '{tool.server_label}' in tools.",
                                 param=f"{param}.server_label")
        labels.add(tool.server_label)
        tools.append(tool)
    return tuple(tools)


def _check_hosted_choice(choice: Any, tools: tuple[Tool, ...]) -> None:
    """A `tool_choice` naming a built-in tool needs that tool among `tools`."""
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in HOSTED_CHOICE_TYPES:
        return
    wanted = FileSearchTool if kind == "file_search" else WebSearchTool
    if not any(isinstance(tool, wanted) for tool in tools):
        raise InvalidRequest(f"Tool choice '{kind}' not found in 'tools' parameter.", param="tool_choice")


def _valid_body(body: Any, schema: BodyCheck, required: tuple[str, ...]) -> dict[str, Any]:
    """`body` if it is an object with the `required` keys, no key OpenAI does not know and
    every value as OpenAI describes it; else the 400 OpenAI answers, in its order: a missing
    key (or a `model` that is no string), an unknown one, then the values in body order."""
    if not isinstance(body, dict):
        raise InvalidRequest("We could not parse the JSON body of your request. The OpenAI API expects a "
                             "JSON payload (an object).")
    for key in required:
        if key not in body:
            raise missing(key)
        if key == "model" and not isinstance(body["model"], str):
            raise invalid_type("model", "a string", body["model"])
    for key in body:
        if key == "messages":
            raise InvalidRequest("Unsupported parameter: 'messages'. In the Responses API, this parameter has "
                                 "moved to 'input'. Try again with the new parameter.",
                                 code="unsupported_parameter")
        if key not in schema.parameters:
            raise unknown(key, key, schema.parameters)
    if (violation := schema.first_violation(body)) is not None:
        raise violation
    return body


def _conversation_id(body: dict[str, Any]) -> str | None:
    """The conversation a valid body names, if it names one."""
    conversation = body.get("conversation")
    return conversation.get("id") if isinstance(conversation, dict) else conversation


def _continued(body: dict[str, Any], conversation_id: str | None) -> None:
    """A body continues a previous response or a conversation, not both (OpenAI's 400)."""
    if body.get("previous_response_id") is not None and conversation_id is not None:
        raise InvalidRequest("Mutually exclusive parameters: Ensure you are only providing one of: "
                             "'previous_response_id' or 'conversation'.", code="mutually_exclusive_parameters")


def _reasoning_followed(items: list[dict[str, Any]], store: bool) -> None:
    """A reasoning item sent back to a request that stores must come with the item
    the model produced after it, which carries its id: OpenAI refuses one followed by nothing or
    by an item without an id (recorded: an assistant message written as `{role, content}`). With
    `store: false` it resolves nothing and accepts the same input (recorded twice: an id-less
    message after a reasoning item with an id, and a reasoning item without an id)."""
    if not store:
        return
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else {}
        if item["type"] == "reasoning" and not following.get("id"):
            raise InvalidRequest(f"Item '{item.get('id')}' of type 'reasoning' was provided without its required "
                                 "following item.", param="input")


def validate_compact(body: Any) -> CreateRequest:
    """A `POST /v1/responses/compact` body, as the request whose history is compacted."""
    body = _valid_body(body, compact_schema(), ("model",))
    return CreateRequest(model=body["model"], input_items=input_items(body.get("input") or []), raw=body,
                         instructions=body.get("instructions"),
                         previous_response_id=body.get("previous_response_id"))


def validate_count(body: Any) -> CreateRequest:
    """A `POST /v1/responses/input_tokens` body (nothing is required), as the request whose
    input is counted."""
    body = _valid_body(body, input_tokens_schema(), ())
    conversation_id = _conversation_id(body)
    _continued(body, conversation_id)
    return CreateRequest(model=body.get("model") or "", input_items=input_items(body.get("input") or []), raw=body,
                         tools=_tools(body.get("tools") or []), instructions=body.get("instructions"),
                         previous_response_id=body.get("previous_response_id"), conversation_id=conversation_id)


def validate_create(body: Any) -> CreateRequest:
    """The validated request, or the `InvalidRequest` OpenAI would answer with."""
    body = _valid_body(body, responses_schema(), ("model", "input"))
    items = input_items(body["input"])
    conversation_id = _conversation_id(body)
    if not items and body.get("previous_response_id") is None and conversation_id is None:
        raise InvalidRequest("One of \"input\" or \"previous_response_id\" or 'prompt' or 'conversation' "
                             "must be provided.", code="missing_required_parameter")
    _continued(body, conversation_id)
    store = body.get("store", True) is not False
    _reasoning_followed(items, store)
    if body.get("background") and not store:
        raise InvalidRequest("Background mode requires 'store' to be true.", param="background")
    tools = _tools(body.get("tools") or [])
    tool_choice = body.get("tool_choice") or "auto"
    _check_hosted_choice(tool_choice, tools)
    return CreateRequest(
        model=body["model"],
        input_items=items,
        raw=body,
        tools=tools,
        instructions=body.get("instructions"),
        tool_choice=tool_choice,
        parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        max_tool_calls=body.get("max_tool_calls"),
        max_output_tokens=body.get("max_output_tokens"),
        stream=bool(body.get("stream")),
        store=store,
        background=bool(body.get("background")),
        previous_response_id=body.get("previous_response_id"),
        conversation_id=conversation_id,
        metadata=body.get("metadata") or {},
        include=frozenset(body.get("include") or ()),
    )
