"""The loop's vocabulary: the next action, and how a model turn's tool calls are sorted.

Every action is a frozen value carrying its data; the driver matches on them exhaustively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import GatewayError
from ..upstream.items import ToolCall


@dataclass(frozen=True)
class GatewayCall:
    """A tool call the gateway runs: the model's call, the MCP server (None: one of the
    gateway's hosted tools), and (after approval) the approval request it answers."""

    call: ToolCall
    server_label: str | None
    approval_request_id: str | None = None


@dataclass(frozen=True)
class CallPlan:
    """What happens to each tool call of a model turn."""

    run: tuple[GatewayCall, ...] = ()
    """Gateway tools (MCP and hosted) to run now, within the `max_tool_calls` budget."""
    gated: tuple[GatewayCall, ...] = ()
    """Gateway tools that need approval first; the first one interrupts the response."""
    hand_back: tuple[ToolCall, ...] = ()
    """Client function calls: the response ends with them."""
    ignored: tuple[ToolCall, ...] = ()
    """Calls past the budget, or made when no tools were offered: not run, not shown."""
    refused: tuple[ToolCall, ...] = ()
    """Calls to a tool the request does not offer (the model made it up, or it is excluded by
    `allowed_tools`): not run, not handed back; the model is told, and asked again."""


@dataclass(frozen=True)
class Completed:
    incomplete_reason: str | None = None


@dataclass(frozen=True)
class Failed:
    error: GatewayError


@dataclass(frozen=True)
class Exhausted:
    """The loop ran out of a budget of the gateway's own (model rounds, wall-clock time) and
    ends with what it has."""

    budget: Literal["rounds", "deadline"]


Ending = Completed | Failed | Exhausted
"""How a run ends: a small closed set; each surface maps it to its own wire form
(`Surface.result`)."""


@dataclass(frozen=True)
class CallLlm:
    with_tools: bool = True


@dataclass(frozen=True)
class ExecuteTools:
    plan: CallPlan


@dataclass(frozen=True)
class InterruptForApproval:
    call: GatewayCall
    hand_back: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Finish:
    ending: Ending
    hand_back: tuple[ToolCall, ...] = ()


NextAction = CallLlm | ExecuteTools | InterruptForApproval | Finish
