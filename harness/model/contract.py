"""How an exchange is reduced to its contract: what a client relies on, without what varies
between runs (ids, timestamps, text, token counts).

The contract of a step holds the HTTP status; for errors the envelope's type, code, param
and whether a message is present; the Response's status, incomplete reason and whether usage
is present; the output items in order, each with its status, role, tool name, server label
(for MCP calls) error type and whether it names an approval its request granted, and (for
reasoning and compaction items) whether it carries `encrypted_content`; the
interrupt boundary; the number of gateway-executed tool calls; and, for streams, the event
types with runs collapsed, per output index too, the terminal event and whether `[DONE]` was
sent (the stream grammar judges that).

A chat completion (the `chat` surface) projects to its finish_reason, the message's role,
whether it has text, the tool calls handed back (by name), and for streams the kinds of its
chunks in order (role, content, tool_calls, finish, usage, error, [DONE]), runs collapsed. A
streamed completion is assembled from its chunks first, so both modes compare alike.
"""

from __future__ import annotations

import json

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..wire.exchange import TERMINAL_EVENTS, Exchange

GATEWAY_TOOL_ITEMS = ("mcp_call",)
SEALED_ITEMS = ("reasoning", "compaction")
"""Item types that may carry `encrypted_content`."""


@dataclass(frozen=True)
class ItemShape:
    type: str
    status: str | None = None
    role: str | None = None
    name: str | None = None
    server_label: str | None = None
    error_type: str | None = None
    approval_linked: bool | None = None
    encrypted: bool | None = None
    """For reasoning and compaction items: whether `encrypted_content` is there."""

    def label(self) -> str:
        """Short form for messages: `mcp_call(add, failed)`, `reasoning(encrypted_content)`."""
        details = [d for d in (self.name, self.status, self.encrypted and encrypted_detail(True)) if d]
        return f"{self.type}({', '.join(details)})" if details else self.type


def encrypted_detail(encrypted: bool) -> str:
    """How an item label says whether the item carries `encrypted_content`."""
    return "encrypted_content" if encrypted else "no encrypted_content"


@dataclass(frozen=True)
class ErrorShape:
    type: str | None
    code: str | None
    param: str | None
    has_message: bool
    message: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Interrupt:
    on: str
    """`function_call`, `mcp_approval_request`, or `none`."""
    tool: str | None = None


@dataclass(frozen=True)
class StreamShape:
    events: tuple[str, ...]
    """Event types in order, consecutive repeats collapsed."""
    per_item: dict[int, tuple[str, ...]]
    """The same, for the events of each output index."""
    terminal: str | None
    done_sentinel: bool
    event_count: int


@dataclass(frozen=True)
class ChatShape:
    finish_reason: str | None
    role: str | None
    has_content: bool
    tool_calls: tuple[str, ...]
    chunks: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamReference:
    """The sequence a stream is held against, for reports that show the two side by side."""

    events: tuple[str, ...] | None
    source: str
    """Where `events` come from; when there are none, why."""


@dataclass(frozen=True)
class Contract:
    http_status: int | None
    error: ErrorShape | None = None
    status: str | None = None
    incomplete_reason: str | None = None
    has_usage: bool | None = None
    output: tuple[ItemShape, ...] = ()
    interrupt: Interrupt = Interrupt("none")
    gateway_tool_calls: int = 0
    stream: StreamShape | None = None
    chat: ChatShape | None = None
    response_fields: dict[str, Any] | None = None
    """The whole Response object's top-level fields (compared only where a scenario asks)."""

    def to_dict(self) -> dict[str, Any]:
        """The contract as JSON, without `response_fields` (never copied: it is the whole Response)."""
        data = asdict(replace(self, response_fields=None))
        data.pop("response_fields")
        if self.stream is not None:
            data["stream"]["per_item"] = {str(k): v for k, v in self.stream.per_item.items()}
        return data


def collapse(types: list[str]) -> tuple[str, ...]:
    """Event types with consecutive repeats folded into one."""
    collapsed: list[str] = []
    for event_type in types:
        if not collapsed or collapsed[-1] != event_type:
            collapsed.append(event_type)
    return tuple(collapsed)


def approved_requests(request_body: Any) -> frozenset[str]:
    """The ids of the approval requests a Responses request approves (its input's
    `mcp_approval_response` items with `approve: true`)."""
    items = request_body.get("input") if isinstance(request_body, dict) else None
    return frozenset(item["approval_request_id"] for item in items or []
                     if isinstance(item, dict) and item.get("type") == "mcp_approval_response"
                     and item.get("approve") is True and isinstance(item.get("approval_request_id"), str))


def item_shape(item: dict[str, Any], approved: frozenset[str] = frozenset()) -> ItemShape:
    """An item's contract; an `mcp_call` is approval-linked when it names a request in
    `approved` (those its request approved)."""
    error = item.get("error")
    return ItemShape(
        type=str(item.get("type")),
        status=item.get("status"),
        role=item.get("role"),
        name=item.get("name"),
        server_label=item.get("server_label"),
        error_type=(error.get("type") if isinstance(error, dict) else ("text" if error else None)),
        approval_linked=item.get("approval_request_id") in approved if item.get("type") == "mcp_call" else None,
        encrypted=item.get("encrypted_content") is not None if item.get("type") in SEALED_ITEMS else None,
    )


def interrupt_of(status: str | None, output: tuple[ItemShape, ...]) -> Interrupt:
    """What the response stops on: an approval request wins over function calls."""
    if status not in (None, "completed"):
        return Interrupt("none")
    for kind in ("mcp_approval_request", "function_call"):
        waiting = [item for item in output if item.type == kind]
        if waiting:
            return Interrupt(kind, waiting[0].name)
    return Interrupt("none")


def sequence_marks(exchange: Exchange, chat: bool) -> list[tuple[int, str]]:
    """What a stream's contract sequence is made of, before runs are collapsed: each event's
    type (for a chat completion, each of its chunk's kinds), with the index of the event in
    `exchange.events` it comes from."""
    if chat:
        return [(index, kind) for index, event in enumerate(exchange.events)
                for kind in _chunk_kind(event.payload, event.is_done_sentinel)]
    return [(index, event.type) for index, event in enumerate(exchange.events)
            if not event.is_done_sentinel and event.type is not None]


def streamed_sequence(contract: Contract) -> tuple[str, ...] | None:
    """The sequence a streamed answer is compared by (runs collapsed): its event types, or a
    chat completion's chunk kinds; None for an answer that was not streamed."""
    if contract.stream is not None:
        return contract.stream.events
    return contract.chat.chunks if contract.chat is not None and contract.chat.chunks else None


def _stream_shape(exchange: Exchange) -> StreamShape:
    types: list[str] = []
    per_item: dict[int, list[str]] = {}
    for position, event_type in sequence_marks(exchange, chat=False):
        types.append(event_type)
        index = (exchange.events[position].payload or {}).get("output_index")
        if isinstance(index, int):
            per_item.setdefault(index, []).append(event_type)
    terminal = next((t for t in reversed(types) if t in TERMINAL_EVENTS), None)
    return StreamShape(collapse(types), {i: collapse(t) for i, t in sorted(per_item.items())}, terminal,
                       any(e.is_done_sentinel for e in exchange.events), len(types))


def _error_shape(body: Any) -> ErrorShape | None:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    return ErrorShape(_as_text(error.get("type")), _as_text(error.get("code")), _as_text(error.get("param")),
                      bool(message), message if isinstance(message, str) else None)


def _as_text(value: Any) -> str | None:
    """An error field as text: a gateway may send `code: 400` where OpenAI sends a string (the
    schema check reports that); its JSON text keeps it comparable with a golden one."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _chunk_kind(payload: dict[str, Any] | None, done: bool) -> list[str]:
    if done:
        return ["[DONE]"]
    if payload is None:
        return []
    if "error" in payload:
        return ["error"]
    choices = payload.get("choices") or []
    if not choices:
        return ["usage"] if payload.get("usage") else []
    delta, kinds = choices[0].get("delta") or {}, []
    if delta.get("role"):
        kinds.append("role")
    if delta.get("content"):
        kinds.append("content")
    if delta.get("tool_calls"):
        kinds.append("tool_calls")
    if choices[0].get("finish_reason"):
        kinds.append("finish")
    return kinds


def chat_completion(exchange: Exchange) -> dict[str, Any] | None:
    """The chat completion: the JSON body, or one assembled from the stream's chunks."""
    if not exchange.streamed:
        body = exchange.body
        return body if isinstance(body, dict) and body.get("object") == "chat.completion" else None
    chunks = [e.payload for e in exchange.events if e.payload is not None and e.payload.get("object")
              == "chat.completion.chunk"]
    if not chunks:
        return None
    content, role, finish_reason, usage = "", None, None, None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            role = delta.get("role") or role
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"id": None, "type": "function",
                                                               "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            finish_reason = choice.get("finish_reason") or finish_reason
    message: dict[str, Any] = {"role": role, "content": content or None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return {"id": chunks[0].get("id"), "object": "chat.completion", "model": chunks[0].get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}], "usage": usage}


def project_chat(exchange: Exchange) -> Contract:
    chunks = collapse([kind for _, kind in sequence_marks(exchange, chat=True)])
    completion = chat_completion(exchange)
    error = None if exchange.streamed else _error_shape(exchange.body)
    if completion is None:
        return Contract(exchange.status, error=error, chat=ChatShape(None, None, False, (), chunks)
                        if exchange.streamed else None)
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    names = tuple((call.get("function") or {}).get("name", "") for call in message.get("tool_calls") or [])
    finish_reason = choice.get("finish_reason")
    return Contract(
        http_status=exchange.status,
        error=error,
        has_usage=completion.get("usage") is not None,
        interrupt=Interrupt("function_call", names[0]) if finish_reason == "tool_calls" and names
        else Interrupt("none"),
        chat=ChatShape(finish_reason, message.get("role"), bool(message.get("content")), names, chunks),
        response_fields=completion,
    )


def is_chat_answer(exchange: Exchange) -> bool:
    """Whether the answer is a chat completion (or its chunks) rather than a Response."""
    if exchange.streamed:
        return any((e.payload or {}).get("object") == "chat.completion.chunk" for e in exchange.events)
    return isinstance(exchange.body, dict) and exchange.body.get("object") == "chat.completion"


def project_answer(exchange: Exchange) -> Contract:
    """The contract of an exchange whose surface is told from the answer itself."""
    return project_chat(exchange) if is_chat_answer(exchange) else project(exchange)


def project(exchange: Exchange) -> Contract:
    stream = _stream_shape(exchange) if exchange.streamed else None
    response = exchange.response_object()
    error = None if exchange.streamed else _error_shape(exchange.body)
    if response is None:
        return Contract(exchange.status, error=error, stream=stream)
    approved = approved_requests(exchange.request_body)
    output = tuple(item_shape(item, approved) for item in response.get("output") or [] if isinstance(item, dict))
    status = response.get("status")
    return Contract(
        http_status=exchange.status,
        error=error,
        status=status,
        incomplete_reason=(response.get("incomplete_details") or {}).get("reason"),
        has_usage=response.get("usage") is not None,
        output=output,
        interrupt=interrupt_of(status, output),
        gateway_tool_calls=sum(1 for item in output if item.type in GATEWAY_TOOL_ITEMS),
        stream=stream,
        response_fields=response,
    )
