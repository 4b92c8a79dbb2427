"""SSE parsing survives events split anywhere across reads, and keeps the raw text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from responses_parity.harness.wire.sse import TeeStream, iter_sse, parse_sse

STREAM = (
    'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n'
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"h\\u00e9"}\n\n'
    "data: [DONE]\n\n"
)


def test_parse_stored_stream() -> None:
    events = parse_sse(STREAM)
    assert [e.type for e in events] == ["response.created", "response.output_text.delta", None]
    assert events[1].payload["delta"] == "hé"
    assert events[2].is_done_sentinel and events[2].payload is None


def test_events_split_across_reads_are_reassembled() -> None:
    raw = STREAM.encode()

    async def chunks(size: int) -> AsyncIterator[bytes]:
        for start in range(0, len(raw), size):
            yield raw[start:start + size]

    async def read(size: int) -> tuple[list[str | None], bytes]:
        tee = TeeStream(chunks(size), limit=len(raw))
        return [e.type async for e in iter_sse(tee)], tee.raw

    for size in (1, 3, 7, 64, 4096):
        types, kept = asyncio.run(read(size))
        assert types == ["response.created", "response.output_text.delta", None], size
        assert kept == raw


def test_a_stream_past_the_limit_ends_there() -> None:
    raw = STREAM.encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 5):
            yield raw[start:start + 5]

    async def read(limit: int) -> tuple[bytes, bool]:
        tee = TeeStream(chunks(), limit)
        return b"".join([chunk async for chunk in tee]), tee.overflowed

    assert asyncio.run(read(12)) == (raw[:12], True)
    assert asyncio.run(read(len(raw))) == (raw, False)


def test_data_that_is_not_json_is_kept_raw() -> None:
    [event] = parse_sse("event: oops\ndata: not json\n\n")
    assert event.payload is None and event.data == "not json" and event.type == "oops"
