"""Server-sent events, parsed with httpx2's `EventSource` whether they come live or from a file.

Live streams are read through `TeeStream`, which keeps the raw bytes as they arrive while
`EventSource` assembles events, so an event split across reads is put back together and the
raw stream can still be saved as a golden. An event's size is not bounded here: a live
answer's bytes are (`TeeStream`'s limit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2

from .decode import Defect, Unreadable, read_json

DONE = "[DONE]"


@dataclass(frozen=True)
class SseEvent:
    event: str | None
    """The `event:` field, when the stream sent one."""
    data: str
    payload: dict[str, Any] | None
    """The data parsed as a JSON object; None for `[DONE]` or data that is not an object."""
    defect: Defect | None = None
    """Why the data could not be read as JSON (`wire.decode.read_json`), when it could not."""

    @property
    def is_done_sentinel(self) -> bool:
        return self.data.strip() == DONE

    @property
    def type(self) -> str | None:
        """The event type: the payload's `type`, else the `event:` field."""
        if self.payload is not None and isinstance(self.payload.get("type"), str):
            return self.payload["type"]
        return self.event


def _event(event: str, data: str) -> SseEvent:
    if data.strip() == DONE:
        return SseEvent(event or None, data, None)
    try:
        payload = read_json(data)
    except Unreadable as unreadable:
        return SseEvent(event or None, data, None, unreadable.defect)
    return SseEvent(event or None, data, payload if isinstance(payload, dict) else None)


_STORED = httpx2.Request("GET", "http://stream.invalid/")
"""The request `EventSource` names in its errors (it needs one); the bytes it parses were read
elsewhere (a stored stream, a live one through `TeeStream`), so this request is never sent."""


def parse_sse(text: str) -> list[SseEvent]:
    """Every event in a stored stream."""
    response = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode(),
                               request=_STORED)
    return [_event(sse.event if sse.event != "message" else "", sse.data)
            for sse in httpx2.EventSource(response, max_event_size=None)]


class TeeStream(httpx2.AsyncByteStream):
    """A response byte stream that keeps a copy of everything read through it, up to `limit`
    bytes: there the stream ends early and `overflowed` is set."""

    def __init__(self, source: AsyncIterator[bytes], limit: int) -> None:
        self._source = source
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._source:
            if self.size + len(chunk) > self.limit:
                chunk, self.overflowed = chunk[:self.limit - self.size], True
            self.chunks.append(chunk)
            self.size += len(chunk)
            yield chunk
            if self.overflowed:
                return

    @property
    def raw(self) -> bytes:
        return b"".join(self.chunks)


async def iter_sse(tee: TeeStream) -> AsyncIterator[SseEvent]:
    """Events of a live stream read through `tee` (which keeps the raw bytes)."""
    mirrored = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=tee, request=_STORED)
    async for sse in httpx2.EventSource(mirrored, max_event_size=None):
        yield _event(sse.event if sse.event != "message" else "", sse.data)
