"""An upstream for the proxy's tests and benchmark that counts its open connections and shows
back what it was sent: a raw asyncio HTTP/1.1 server on loopback, in a thread of its own.

Each behaviour answers under its own path prefix (`http://127.0.0.1:PORT/<behaviour>/v1/...`):
- `echo`: a Response-shaped JSON object (`status: completed`) whose `echo` field holds the
  method, the path and query as sent, every header and the body;
- `hang`: reads the request and never answers;
- `silent-stream`: starts a stream with one event and then sends nothing;
- `endless`: a well-formed stream of deltas that never ends, as fast as the client reads.

A connection counts as open from its accept until the client (the proxy) closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hostile_target import HostileTarget

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]], Awaitable[None]]
DEADLINE_S = 60.0


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


_SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_CREATED = _event({"type": "response.created", "sequence_number": 0, "response": {
    "id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "m", "output": [],
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}})


def _delta(number: int) -> bytes:
    return _event({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                   "content_index": 0, "delta": "more ", "sequence_number": number, "logprobs": []})


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _until_gone(reader: asyncio.StreamReader) -> None:
    await reader.read()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
    body = json.dumps({"id": "resp_echo", "object": "response", "status": "completed", "echo": request}).encode()
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                 + f"content-length: {len(body)}\r\n\r\n".encode() + body)


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
    await _until_gone(reader)


async def silent_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
    writer.write(_SSE_HEAD + _chunk(_CREATED))
    await writer.drain()
    await _until_gone(reader)


async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
    writer.write(_SSE_HEAD + _chunk(_CREATED))
    number = 1
    while True:
        batch = b"".join(_delta(number + offset) for offset in range(256))
        number += 256
        writer.write(_chunk(batch))
        await writer.drain()


BEHAVIOURS: dict[str, Behaviour] = {"echo": echo, "hang": hang, "silent-stream": silent_stream, "endless": endless}


class CountingUpstream:
    """The server, in a thread of its own (a `HostileTarget` serving these behaviours);
    `url(behaviour)` is an upstream's base URL."""

    def __init__(self) -> None:
        self._server = HostileTarget(self._answer)
        self._lock = threading.Condition()
        self.open = 0
        """Connections open now."""
        self.accepted = 0
        self.requests: list[dict[str, Any]] = []
        """Every request received (method, path, headers, body), in order."""

    @property
    def base_url(self) -> str:
        """Where every behaviour answers, under its own prefix."""
        return f"http://127.0.0.1:{self._server.port}"

    def url(self, behaviour: str) -> str:
        assert behaviour in BEHAVIOURS, behaviour
        return f"{self.base_url}/{behaviour}"

    def wait_for(self, condition: Callable[[CountingUpstream], bool], what: str) -> None:
        """Return once `condition(self)` holds; fail after `DEADLINE_S`."""
        deadline = time.monotonic() + DEADLINE_S
        with self._lock:
            while not condition(self):
                left = deadline - time.monotonic()
                assert left > 0, f"{what}: still not so after {DEADLINE_S} s ({self.open} open, {self.accepted} " \
                                 "accepted)"
                self._lock.wait(left)

    def __enter__(self) -> CountingUpstream:
        self._server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.stop()

    def _count(self, change: int) -> None:
        with self._lock:
            self.open += change
            self.accepted += max(change, 0)
            self._lock.notify_all()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count(+1)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.rstrip("\r\n").split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            headers = {name.strip().lower(): value.strip() for name, _, value in
                       (line.partition(":") for line in lines)}
            body = (await reader.readexactly(int(headers.get("content-length", "0")))).decode(errors="replace")
            with contextlib.suppress(ValueError, RecursionError):
                body = json.loads(body) if body else None
            path, _, query = target.partition("?")
            request = {"method": method, "path": path, "query": query, "headers": headers, "body": body}
            with self._lock:
                self.requests.append(request)
            await BEHAVIOURS[path.strip("/").split("/")[0]](reader, writer, request)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            self._count(-1)
