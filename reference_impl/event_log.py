"""The event log behind every response: it numbers events, and readers follow it.

`append` is the only place a `sequence_number` is assigned. The SSE sink follows the log and
frames each event. A log can go on from stored events (`stored`), continuing their numbering.

Readers see only published events ("save, then publish"). A response's ending (`ENDINGS`:
the in-stream `error` and the terminal events) and anything after it is published only by
`close`, which the run calls once it has stored its end, so no reader sees an end that a crash
could lose. Before the ending, a log made with `publish_at_once` publishes each event as it is
appended; otherwise whoever stores the events publishes them (`publishable`, then `publish`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

ENDINGS = frozenset({"error", "response.completed", "response.incomplete", "response.failed"})


class EventLog:
    def __init__(self, publish_at_once: bool = True) -> None:
        self.appended: list[dict[str, Any]] = []
        """Every event, published or not: what the run stores."""
        self.published = 0
        """How many of `appended` readers may see."""
        self.closed = False
        self._publish_at_once = publish_at_once
        self._ending: int | None = None
        self._changed = asyncio.Event()

    @classmethod
    def stored(cls, events: list[dict[str, Any]]) -> EventLog:
        """A log that goes on from `events` (a stored prefix of a log, so numbered 0, 1, ...)."""
        log = cls()
        log.appended = list(events)
        log.published = len(events)
        return log

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events readers may see."""
        return self.appended[:self.published]

    def append(self, event_type: str, fields: dict[str, Any]) -> None:
        event = {"type": event_type, "sequence_number": len(self.appended), **fields}
        if event_type in ENDINGS and self._ending is None:
            self._ending = len(self.appended)
        self.appended.append(event)
        if self._publish_at_once:
            self.publish(len(self.appended))
        else:
            self._wake()

    def _before_ending(self) -> int:
        return len(self.appended) if self._ending is None else self._ending

    def publish(self, count: int) -> None:
        """Let readers see the first `count` events, short of the ending (that waits for `close`)."""
        count = min(count, self._before_ending())
        if count > self.published and not self.closed:
            self.published = count
            self._wake()

    async def publishable(self, after: int) -> list[dict[str, Any]]:
        """The events past the first `after` that may be published before the log closes, once
        there are any; empty when there will be none."""
        while True:
            changed = self._changed
            if self.closed or (self._ending is not None and after >= self._ending):
                return []
            if after < self._before_ending():
                return self.appended[after:self._before_ending()]
            await changed.wait()

    def close(self, publish: bool = True) -> None:
        """No more events. With `publish` (the run has stored its end) readers get every event
        still unpublished; without, they never see those."""
        if self.closed:
            return
        if publish:
            self.published = len(self.appended)
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after: int = -1) -> AsyncIterator[dict[str, Any]]:
        """Every published event with a sequence number above `after`, as they come, until closed."""
        position = after + 1
        while True:
            changed = self._changed
            while position < self.published:
                yield self.appended[position]
                position += 1
            if self.closed:
                return
            await changed.wait()


def sse_frame(event: dict[str, Any]) -> bytes:
    """One server-sent event in OpenAI's framing: `event:` then `data:`, blank-line ended."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
