"""The event log behind every response: it numbers events, and readers follow it.

`append` is the only place a `sequence_number` is assigned. The SSE sink follows the log and
frames each event; the JSON sink waits for the log to close and reads the terminal result.
A log can be rebuilt from stored events, so a resumed stream continues the same numbering.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any


class EventLog:
    def __init__(self, on_append: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.closed = False
        self._changed = asyncio.Event()
        self._on_append = on_append

    def append(self, event_type: str, fields: dict[str, Any]) -> None:
        event = {"type": event_type, "sequence_number": len(self.events), **fields}
        self.events.append(event)
        if self._on_append is not None:
            self._on_append(event)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        """Every event with a sequence number above `after`, as they come, until closed."""
        position = after + 1
        while True:
            changed = self._changed
            while position < len(self.events):
                yield self.events[position]
                position += 1
            if self.closed:
                return
            await changed.wait()


def sse_frame(event: dict[str, Any]) -> bytes:
    """One server-sent event in OpenAI's framing: `event:` then `data:`, blank-line ended."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
