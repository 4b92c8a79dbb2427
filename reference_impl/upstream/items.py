"""The upstream model's side: the transcript the model reads, and what it streams back.

Transcript items are the only things that ever reach the model. There is deliberately no
item for `mcp_list_tools`, `mcp_approval_request` or `mcp_approval_response`: those are
client-side control items and cannot be sent upstream by construction. An executed MCP call
reaches the model as a `ToolCall` followed by its `ToolOutput`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Message:
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[dict[str, Any]]
    id: str | None = None


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class ToolOutput:
    call_id: str
    output: str | list[dict[str, Any]]


@dataclass(frozen=True)
class Reasoning:
    id: str
    summary: tuple[str, ...] = ()
    encrypted_content: str | None = None


TranscriptItem = Message | ToolCall | ToolOutput | Reasoning


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is offered it (always a function to the model)."""

    name: str
    description: str | None
    parameters: dict[str, Any] | None
    strict: bool | None = None


@dataclass(frozen=True)
class TurnRequest:
    """Everything one model call needs, independent of the wire format.

    `transcript` is the whole conversation so far. With `previous_response_id` set (the
    Responses adapter's chaining mode), only `transcript[new_from:]` is sent.
    """

    model: str
    instructions: str | None
    transcript: tuple[TranscriptItem, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: Any
    parallel_tool_calls: bool
    stream: bool
    sampling: dict[str, Any] = field(default_factory=dict)
    previous_response_id: str | None = None
    new_from: int = 0


# What a model turn streams back, whatever the wire format.

@dataclass(frozen=True)
class ItemStarted:
    kind: Literal["message", "reasoning", "function_call"]


@dataclass(frozen=True)
class TextDelta:
    delta: str


@dataclass(frozen=True)
class SummaryPartStarted:
    index: int


@dataclass(frozen=True)
class SummaryDelta:
    index: int
    delta: str


@dataclass(frozen=True)
class SummaryPartDone:
    index: int
    text: str


@dataclass(frozen=True)
class ItemDone:
    item: Message | ToolCall | Reasoning
    incomplete: bool = False


@dataclass(frozen=True)
class TurnDone:
    status: Literal["completed", "incomplete"]
    incomplete_reason: str | None = None
    usage: dict[str, Any] | None = None
    response_id: str | None = None


ModelEvent = ItemStarted | TextDelta | SummaryPartStarted | SummaryDelta | SummaryPartDone | ItemDone | TurnDone
