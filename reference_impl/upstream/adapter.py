"""What every upstream adapter does: send one model turn, stream back `ModelEvent`s.

An adapter only translates wire formats. It makes no loop decisions; a failed model call
raises `UpstreamError` (with the upstream's status, or 502 when the upstream broke the
protocol), and the loop decides what the client sees. The loop reads a turn through
`model_events`, where an answer of a shape the adapter cannot read is such a 502 too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from ..errors import UpstreamError
from .items import (
    ItemDone, ItemStarted, Message, ModelEvent, Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted,
    TextDelta, ToolCall, TurnDone, TurnRequest,
)

_USAGE_COUNTS = ("input_tokens", "output_tokens", "total_tokens")
_USAGE_DETAILS = ("input_tokens_details", "output_tokens_details")


class UpstreamAdapter(Protocol):
    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        """The request body this adapter sends for the turn."""
        ...

    def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        """Run the turn; yield its events, ending with `TurnDone`."""
        ...


async def model_events(adapter: UpstreamAdapter, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
    """The turn's events as `adapter` yields them, each holding what its fields say (text is
    text, a name a string, a usage counts). The model's answer is untrusted: one whose shape
    the adapter cannot read (a list where an object goes, a number for a name) is a 502, as one
    that is not JSON; before, it crashed the loop (a 500) or reached the client as it came."""
    try:
        async for event in adapter.stream_turn(turn):
            if (problem := _unreadable(event)) is not None:
                raise UpstreamError(502, f"The upstream model sent an answer the gateway cannot read: {problem}.")
            yield event
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:  # read where it has no such shape
        raise UpstreamError(502, "The upstream model sent an answer the gateway cannot read "
                                 f"({type(error).__name__}: {error}).") from error


def _unreadable(event: ModelEvent) -> str | None:
    """What of `event` does not hold what its field says, or None."""
    match event:
        case ItemStarted(kind=kind) if kind not in ("message", "reasoning", "function_call"):
            return f"an item of kind {kind!r}"
        case TextDelta(delta=text) | SummaryDelta(delta=text) | SummaryPartDone(text=text) if not isinstance(text, str):
            return "text that is not a string"
        case SummaryPartStarted(index=index) | SummaryDelta(index=index) | SummaryPartDone(index=index) \
                if not _count(index):
            return "a summary index that is not a count"
        case ItemDone(item=ToolCall() as call) if not all(isinstance(value, str) for value in
                                                              (call.call_id, call.name, call.arguments)):
            return "a function call whose call_id, name or arguments is not a string"
        case ItemDone(item=Message(content=content)) if not isinstance(content, str):
            return "a message whose text is not a string"
        case ItemDone(item=Reasoning() as reasoning) if not (isinstance(reasoning.id, str) and all(
                isinstance(text, str) for text in reasoning.summary)):
            return "a reasoning item whose id or summary is not text"
        case TurnDone(usage=usage) if usage is not None and not _usage(usage):
            return "a usage that is not an object of token counts"
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage(usage: Any) -> bool:
    """Whether `usage` holds its counts and details as the loop sums them."""
    if not isinstance(usage, dict):
        return False
    counts = [usage.get(key) for key in _USAGE_COUNTS]
    details = [usage.get(key) for key in _USAGE_DETAILS]
    return all(count is None or _count(count) for count in counts) and all(
        detail is None or (isinstance(detail, dict) and all(n is None or _count(n) for n in detail.values()))
        for detail in details)


def responses_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Token counts as a Responses `usage` block, every detail OpenAI sends included."""
    return {"input_tokens": input_tokens, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def closing_events(text: str | None, calls: list[ToolCall], incomplete: bool, usage: dict[str, Any] | None,
                   started: bool) -> list[ModelEvent]:
    """The end of a turn whose wire format sends its items only at the end: the message (its
    start and text too, unless already `started`), the tool calls, then `TurnDone`."""
    events: list[ModelEvent] = []
    if text is not None:
        if not started:
            events += [ItemStarted("message"), TextDelta(text)]
        events.append(ItemDone(Message("assistant", text), incomplete))
    for call in calls:
        events += [ItemStarted("function_call"), ItemDone(call)]
    reason = "max_output_tokens" if incomplete else None
    events.append(TurnDone("incomplete" if incomplete else "completed", reason, usage))
    return events
