"""What the driver tells a surface as the loop runs: one frozen value per thing that happened.

`LoopEvent` is a closed union; a sink matches on it and closes its match with `assert_never`.
Events say what happened, never what to do about it: which items a client sees, and how a run
ends, are decided before an event is emitted. One message and one reasoning item are open at
a time (their events name no item); a gateway call is named by the model's `call_id`, a tool
listing by its server's label. The model's text and reasoning summaries pass on as the model
streams them (`upstream.items`' `TextDelta` and summary events).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..hosted_items import HostedKind
from ..hosted_tools import HostedOutcome
from ..upstream.items import Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted, TextDelta


@dataclass(frozen=True)
class RunStarted:
    """The run began; nothing else has happened yet."""


@dataclass(frozen=True)
class ListingStarted:
    """A visible MCP server's tools are being listed."""

    server_label: str


@dataclass(frozen=True)
class ListingDone:
    """The listing ended: the tools the request may use, or why there are none."""

    server_label: str
    tools: tuple[dict[str, Any], ...]
    error: str | None


@dataclass(frozen=True)
class MessageStarted:
    """The model starts a message (any message still open is abandoned)."""


@dataclass(frozen=True)
class MessageDone:
    """The open message ended; `text` is its whole text (its deltas, if any came, add up to it)."""

    text: str
    incomplete: bool


@dataclass(frozen=True)
class ReasoningStarted:
    """The model starts a reasoning item."""


@dataclass(frozen=True)
class ReasoningDone:
    reasoning: Reasoning
    """The model's item: its summary and its own token, if it gave one."""


@dataclass(frozen=True)
class McpCallStarted:
    """A call to a visible MCP server starts (`approval_request_id`: the approval it answers)."""

    call_id: str
    server_label: str
    name: str
    arguments: str
    approval_request_id: str | None


@dataclass(frozen=True)
class McpCallDone:
    call_id: str
    output: str | None
    error: dict[str, Any] | None


@dataclass(frozen=True)
class HostedCallStarted:
    """A hosted search (web_search, file_search) starts."""

    call_id: str
    kind: HostedKind


@dataclass(frozen=True)
class HostedCallDone:
    """It ended; what it found is citable in the messages that follow."""

    call_id: str
    kind: HostedKind
    outcome: HostedOutcome


@dataclass(frozen=True)
class FunctionCallHandedBack:
    """A call of the client's own function: the response ends with it, for the client to run."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ApprovalRequested:
    """A call that needs the client's approval; the response ends with the request."""

    request_id: str
    server_label: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Compacted:
    """The context reached the request's threshold and was compacted: the response ends with
    this compaction item."""

    item: dict[str, Any]


LoopEvent = (
    RunStarted
    | ListingStarted
    | ListingDone
    | MessageStarted
    | TextDelta
    | MessageDone
    | ReasoningStarted
    | SummaryPartStarted
    | SummaryDelta
    | SummaryPartDone
    | ReasoningDone
    | McpCallStarted
    | McpCallDone
    | HostedCallStarted
    | HostedCallDone
    | FunctionCallHandedBack
    | ApprovalRequested
    | Compacted
)
