"""Validate a `POST /v1/responses` body the way OpenAI does, or raise its 400.

Order follows what OpenAI was observed to do: a missing `model`, then a missing `input`, then
unknown top-level keys, then each key's value in body order; the relation between keys
(empty input, `previous_response_id` with `conversation`) comes last. Messages are OpenAI's
(`Missing required parameter: 'model'.`, `Invalid type for 'x': expected ...`).
Store lookups are not done here: they belong to the state phase (`app.py`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from .client import ApprovalPolicy, CreateRequest, FunctionTool, McpTool, Tool
from .errors import InvalidRequest
from .sdk_shapes import Shape, create_params, input_item_shapes, tool_shapes

ROLES = ("assistant", "system", "developer", "user")
_INPUT_ITEM_REQUIRED_EXTRA = {"function_call_output": {"call_id"}, "function_call": {"call_id", "name", "arguments"}}
_TOOL_REQUIRED = {"function": {"name"}, "mcp": {"server_label"}}
_SUPPORTED_TOOL_TYPES = {"function", "mcp"}
_TOOL_CHOICE_MODES = ("none", "auto", "required")


def json_type(value: Any) -> str:
    """How OpenAI names a JSON value's type in its messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def missing(param: str) -> InvalidRequest:
    return InvalidRequest(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_type(param: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
                          param=param, code="invalid_type")


def invalid_value(param: str, value: Any, supported: tuple[str, ...]) -> InvalidRequest:
    quoted = [f"'{s}'" for s in supported]
    listing = " and ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
    return InvalidRequest(f"Invalid value: '{value}'. Supported values are: {listing}.", param=param,
                          code="invalid_value")


def unknown(param: str, key: str, known: frozenset[str]) -> InvalidRequest:
    message = f"Unknown parameter: '{param}'."
    if close := difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75):
        message += f" Did you mean '{close[0]}'?"
    return InvalidRequest(message, param=param, code="unknown_parameter")


def _number_in_range(param: str, value: Any, low: float, high: float | None, *, integer: bool) -> None:
    kind = "integer" if integer else "decimal"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise invalid_type(param, "an integer" if integer else "a decimal", value)
    if value < low:
        raise InvalidRequest(f"Invalid '{param}': {kind} below minimum value. Expected a value >= {low:g}, "
                             f"but got {value} instead.", param=param, code=f"{kind}_below_min_value")
    if high is not None and value > high:
        raise InvalidRequest(f"Invalid '{param}': {kind} above maximum value. Expected a value <= {high:g}, "
                             f"but got {value} instead.", param=param, code=f"{kind}_above_max_value")


def _expect(param: str, value: Any, kind: type | tuple[type, ...], expected: str, *, nullable: bool = True) -> None:
    if value is None and nullable:
        return
    if isinstance(value, bool) and kind is not bool:
        raise invalid_type(param, expected, value)
    if not isinstance(value, kind):
        raise invalid_type(param, expected, value)


def _check_keys(param: str, item: dict[str, Any], shape: Shape, required: set[str]) -> None:
    for key in item:
        if key not in shape.allowed:
            raise unknown(f"{param}.{key}", key, shape.allowed)
    for key in sorted(required):
        if item.get(key) is None:
            raise missing(f"{param}.{key}")


def input_items(value: Any, name: str = "input") -> list[dict[str, Any]]:
    """Validated input items (of `input`, or of a conversation's `items`)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}] if value else []
    if not isinstance(value, list):
        raise invalid_type(name, "one of a string or array of input items", value)
    shapes = input_item_shapes()
    items: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        param = f"{name}[{index}]"
        if not isinstance(item, dict):
            raise invalid_type(param, "an object", item)
        item_type = item.get("type") or ("message" if "role" in item else None)
        if item_type is None:
            raise missing(f"{param}.type")
        if item_type not in shapes:
            raise invalid_value(f"{param}.type", item_type, tuple(sorted(shapes)))
        shape = shapes[item_type]
        _check_keys(param, item, shape, set(shape.required) | _INPUT_ITEM_REQUIRED_EXTRA.get(item_type, set()))
        if item_type == "message":
            if item["role"] not in ROLES:
                raise invalid_value(param, item["role"], ROLES)
            _expect(f"{param}.content", item["content"], (str, list), "one of a string or array of content parts")
        items.append({"type": item_type, **item})
    return items


def _mcp_tool(param: str, raw: dict[str, Any]) -> McpTool:
    if raw.get("server_url") is None:
        if raw.get("connector_id") is not None or raw.get("tunnel_id") is not None:
            raise InvalidRequest("The reference gateway reaches MCP servers by 'server_url' only.",
                                 param=f"{param}.connector_id", code="unsupported_value")
        raise missing(f"{param}.server_url")
    _expect(f"{param}.server_url", raw["server_url"], str, "a string")
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise invalid_type(f"{param}.headers", "an object of strings", headers)
    allowed, read_only = raw.get("allowed_tools"), False
    names: frozenset[str] | None = None
    if isinstance(allowed, list):
        names = frozenset(str(n) for n in allowed)
    elif isinstance(allowed, dict):
        if "tool_names" in allowed:
            names = frozenset(str(n) for n in allowed["tool_names"] or [])
        read_only = bool(allowed.get("read_only"))
    elif allowed is not None:
        raise invalid_type(f"{param}.allowed_tools", "an array of strings or a tool filter", allowed)
    return McpTool(
        server_label=raw["server_label"],
        server_url=raw["server_url"],
        headers=dict(headers),
        authorization=raw.get("authorization"),
        allowed_tool_names=names,
        read_only_only=read_only,
        approval=_approval(f"{param}.require_approval", raw.get("require_approval")),
        server_description=raw.get("server_description"),
        raw_allowed_tools=allowed,
    )


def _approval(param: str, value: Any) -> ApprovalPolicy:
    if value is None or value == "always":
        return ApprovalPolicy("always", raw="always")
    if value == "never":
        return ApprovalPolicy("never", raw="never")
    if isinstance(value, str):
        raise invalid_value(param, value, ("always", "never"))
    if not isinstance(value, dict):
        raise invalid_type(param, "one of a string or an approval filter", value)
    never = (value.get("never") or {}).get("tool_names") or []
    echoed = {"always": value.get("always"), "never": value.get("never")}
    return ApprovalPolicy("filter", never=frozenset(never), raw=echoed)


def _tools(value: Any) -> tuple[Tool, ...]:
    if not isinstance(value, list):
        raise invalid_type("tools", "an array", value)
    shapes = tool_shapes()
    tools: list[Tool] = []
    labels: set[str] = set()
    for index, raw in enumerate(value):
        param = f"tools[{index}]"
        if not isinstance(raw, dict):
            raise invalid_type(param, "an object", raw)
        tool_type = raw.get("type")
        if tool_type is None:
            raise missing(f"{param}.type")
        if tool_type not in shapes:
            raise invalid_value(f"{param}.type", tool_type, tuple(sorted(shapes)))
        if tool_type not in _SUPPORTED_TOOL_TYPES:
            raise InvalidRequest(f"The reference gateway does not support tools of type '{tool_type}'.",
                                 param=f"{param}.type", code="unsupported_value")
        _check_keys(param, raw, shapes[tool_type], _TOOL_REQUIRED[tool_type])
        if tool_type == "function":
            _expect(f"{param}.parameters", raw.get("parameters"), dict, "an object")
            tools.append(FunctionTool(raw["name"], raw.get("description"), raw.get("parameters"), raw.get("strict")))
        else:
            tool = _mcp_tool(param, raw)
            if tool.server_label in labels:
                raise InvalidRequest(f"Duplicate MCP server_label '{tool.server_label}' in tools.",
                                     param=f"{param}.server_label")
            labels.add(tool.server_label)
            tools.append(tool)
    return tuple(tools)


def _tool_choice(value: Any) -> None:
    if isinstance(value, str):
        if value not in _TOOL_CHOICE_MODES:
            raise invalid_value("tool_choice", value, _TOOL_CHOICE_MODES)
        return
    if not isinstance(value, dict):
        raise invalid_type("tool_choice", "one of a string or an object", value)
    kind = value.get("type")
    if kind == "function" and not isinstance(value.get("name"), str):
        raise missing("tool_choice.name")
    if kind == "mcp" and not isinstance(value.get("server_label"), str):
        raise missing("tool_choice.server_label")
    if kind == "allowed_tools":
        if value.get("mode") not in ("auto", "required"):
            raise invalid_value("tool_choice.mode", value.get("mode"), ("auto", "required"))
        if not isinstance(value.get("tools"), list):
            raise invalid_type("tool_choice.tools", "an array", value.get("tools"))
    elif kind not in ("function", "mcp"):
        raise invalid_value("tool_choice.type", kind, ("allowed_tools", "function", "mcp"))


def metadata(value: Any) -> None:
    if not isinstance(value, dict):
        raise invalid_type("metadata", "an object", value)
    if len(value) > 16:
        raise InvalidRequest(f"Invalid 'metadata': too many properties. Expected an object with at most 16 "
                             f"properties, but got an object with {len(value)} properties instead.",
                             param="metadata", code="object_above_max_properties")
    for key, item in value.items():
        if not isinstance(item, str):
            raise invalid_type(f"metadata.{key}", "a string", item)


def _truncation(value: Any) -> None:
    if value not in ("auto", "disabled"):
        raise invalid_value("truncation", value, ("auto", "disabled"))


def _conversation(value: Any) -> None:
    if isinstance(value, dict):
        if not isinstance(value.get("id"), str):
            raise missing("conversation.id")
    elif not isinstance(value, str):
        raise invalid_type("conversation", "one of a string or an object", value)


_CHECKS: dict[str, Callable[[Any], None]] = {
    "instructions": lambda v: _expect("instructions", v, str, "a string"),
    "tool_choice": _tool_choice,
    "metadata": metadata,
    "temperature": lambda v: _number_in_range("temperature", v, 0, 2, integer=False),
    "top_p": lambda v: _number_in_range("top_p", v, 0, 1, integer=False),
    "max_output_tokens": lambda v: _number_in_range("max_output_tokens", v, 16, None, integer=True),
    "max_tool_calls": lambda v: _number_in_range("max_tool_calls", v, 1, None, integer=True),
    "top_logprobs": lambda v: _number_in_range("top_logprobs", v, 0, 20, integer=True),
    "parallel_tool_calls": lambda v: _expect("parallel_tool_calls", v, bool, "a boolean"),
    "store": lambda v: _expect("store", v, bool, "a boolean"),
    "stream": lambda v: _expect("stream", v, bool, "a boolean"),
    "background": lambda v: _expect("background", v, bool, "a boolean"),
    "previous_response_id": lambda v: _expect("previous_response_id", v, str, "a string"),
    "conversation": _conversation,
    "truncation": _truncation,
    "reasoning": lambda v: _expect("reasoning", v, dict, "an object"),
    "text": lambda v: _expect("text", v, dict, "an object"),
    "include": lambda v: _expect("include", v, list, "an array"),
    "user": lambda v: _expect("user", v, str, "a string"),
}


def validate_create(body: Any) -> CreateRequest:
    """The validated request, or the `InvalidRequest` OpenAI would answer with."""
    if not isinstance(body, dict):
        raise InvalidRequest("We could not parse the JSON body of your request. The OpenAI API expects a "
                             "JSON payload (an object).")
    if "model" not in body:
        raise missing("model")
    if not isinstance(body["model"], str):
        raise invalid_type("model", "a string", body["model"])
    if "input" not in body:
        raise missing("input")
    known = create_params()
    for key in body:
        if key == "messages":
            raise InvalidRequest("Unsupported parameter: 'messages'. In the Responses API, this parameter has "
                                 "moved to 'input'. Try again with the new parameter.",
                                 code="unsupported_parameter")
        if key not in known:
            raise unknown(key, key, known)
    items: list[dict[str, Any]] = []
    tools: tuple[Tool, ...] = ()
    for key, value in body.items():
        if key == "input":
            items = input_items(value)
        elif key == "tools" and value is not None:
            tools = _tools(value)
        elif key in _CHECKS and value is not None:
            _CHECKS[key](value)
    conversation = body.get("conversation")
    conversation_id = conversation.get("id") if isinstance(conversation, dict) else conversation
    if not items and body.get("previous_response_id") is None and conversation_id is None:
        raise InvalidRequest("One of \"input\" or \"previous_response_id\" or 'prompt' or 'conversation' "
                             "must be provided.", code="missing_required_parameter")
    if body.get("previous_response_id") is not None and conversation_id is not None:
        raise InvalidRequest("Mutually exclusive parameters: Ensure you are only providing one of: "
                             "'previous_response_id' or 'conversation'.", code="mutually_exclusive_parameters")
    store = body.get("store", True) is not False
    if body.get("background") and not store:
        raise InvalidRequest("Background mode requires 'store' to be true.", param="background")
    return CreateRequest(
        model=body["model"],
        input_items=items,
        raw=body,
        tools=tools,
        instructions=body.get("instructions"),
        tool_choice=body.get("tool_choice") or "auto",
        parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        max_tool_calls=body.get("max_tool_calls"),
        max_output_tokens=body.get("max_output_tokens"),
        stream=bool(body.get("stream")),
        store=store,
        background=bool(body.get("background")),
        previous_response_id=body.get("previous_response_id"),
        conversation_id=conversation_id,
        metadata=body.get("metadata") or {},
    )
