"""What every upstream adapter does: send one model turn, stream back `ModelEvent`s.

An adapter only translates wire formats. It makes no loop decisions; a failed model call
raises `UpstreamError` (with the upstream's status, or 502 when the upstream broke the
protocol), and the loop decides what the client sees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from .items import ItemDone, ItemStarted, Message, ModelEvent, TextDelta, ToolCall, TurnDone, TurnRequest


class UpstreamAdapter(Protocol):
    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        """The request body this adapter sends for the turn."""
        ...

    def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        """Run the turn; yield its events, ending with `TurnDone`."""
        ...


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
