"""A target that misbehaves on purpose, below what an HTTP framework lets one send: hangs,
drips, endless and huge answers, deep and broken JSON, invalid UTF-8, resets, lying headers,
broken chunking. Each behaviour answers under its own path prefix
(`http://127.0.0.1:PORT/<behaviour>/v1/responses`), whatever was asked.

A raw asyncio server on loopback, run in a thread: it reads the request (head and
`Content-Length` body) and writes the behaviour's bytes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import struct
import threading
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

SCENARIO = """
id: hostile
title: a plain text answer
evidence: {contract: "1.3"}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hello"}
    model: [{text: "Hi there, friend."}]
    expect: {status: completed, output: [message]}
"""
"""The scenario run against each behaviour: one plain text answer."""
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
MB = 2**20
HUGE = 50 * MB


def _response(text: str = "Hello.") -> dict[str, Any]:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "m",
            "output": [message], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def _head(status: str = "200 OK", content_type: str | None = "application/json", length: int | None = None,
          *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "connection: close",
             *([f"content-type: {content_type}"] if content_type else []),
             *([f"content-length: {length}"] if length is not None else []), *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _whole(body: bytes, status: str = "200 OK", content_type: str | None = "application/json",
           *extra: str) -> Behaviour:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_head(status, content_type, len(body), *extra) + body)
    return answer


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


_SSE_HEAD = _head(content_type="text/event-stream")
_DELTA = _event({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                 "delta": "more ", "sequence_number": 2, "logprobs": []})
_CREATED = _event({"type": "response.created", "sequence_number": 0, "response": _response() | {
    "status": "in_progress", "output": []}})


async def _until_gone(reader: asyncio.StreamReader) -> None:
    """Wait until the client goes away."""
    await reader.read()


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads the request and never answers."""
    await _until_gone(reader)


async def hang_after_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Starts a stream and never sends an event."""
    writer.write(_SSE_HEAD)
    await _until_gone(reader)


async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stream whose bytes come one at a time, a few per second, without end: each read is
    quick, only the whole answer is late."""
    writer.write(_SSE_HEAD + _CREATED)
    while True:
        for byte in _DELTA:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.05)


async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A well-formed stream of deltas that never ends, as fast as the client reads."""
    writer.write(_SSE_HEAD + _CREATED)
    batch = _DELTA * 512
    while True:
        writer.write(batch)
        await writer.drain()


async def huge_json(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A 50 MB Response (one long text), with its length announced."""
    prefix, suffix = json.dumps(_response("@")).encode().split(b"@")
    writer.write(_head(length=len(prefix) + HUGE + len(suffix)) + prefix)
    for _ in range(HUGE // MB):
        writer.write(b"x" * MB)
        await writer.drain()
    writer.write(suffix)


async def huge_event(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One 50 MB event."""
    writer.write(_SSE_HEAD + _CREATED + b'data: {"type": "response.output_text.delta", "delta": "')
    for _ in range(HUGE // MB):
        writer.write(b"x" * MB)
        await writer.drain()
    writer.write(b'"}\n\n')


@functools.cache
def _gzipped_spaces() -> bytes:
    """256 MiB of spaces, gzip-compressed (about 250 kB)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = b" " * (8 * MB)
    return b"".join(compressor.compress(block) for _ in range(32)) + compressor.flush()


async def gzip_bomb(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A body of 256 MiB of spaces, sent gzip-compressed (about 250 kB on the wire)."""
    body = _gzipped_spaces()
    writer.write(_head("200 OK", "application/json", len(body), "content-encoding: gzip") + body)


def _deep(depth: int) -> bytes:
    return b'{"type": "response.output_text.delta", "deep": ' + b"[" * depth + b"]" * depth + b"}"


async def deep_event(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An event whose data nests 100,000 arrays deep."""
    writer.write(_SSE_HEAD + _CREATED + b"data: " + _deep(100_000) + b"\n\n")


async def invalid_utf8_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stream with a byte that is not UTF-8 inside an event."""
    writer.write(_SSE_HEAD + _CREATED + _DELTA.replace(b"more ", b"more \xff"))


async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half an answer, then a TCP reset."""
    body = json.dumps(_response()).encode()
    writer.write(_head(length=len(body)) + body[: len(body) // 2])
    await writer.drain()
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def close_silently(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Closes the connection without a byte."""


async def short_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Announces more bytes than it sends, then closes."""
    body = json.dumps(_response()).encode()
    writer.write(_head(length=len(body) + 1000) + body)


async def bad_chunking(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body whose chunk size is not hexadecimal."""
    writer.write(_head("200 OK", "application/json", None, "transfer-encoding: chunked")
                 + b"zz\r\n{}\r\n0\r\n\r\n")


async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers with something that is not HTTP at all."""
    writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")


async def huge_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A header of 1 MB."""
    writer.write(_head("200 OK", "application/json", 2, "x-padding: " + "a" * MB) + b"{}")


BEHAVIOURS: dict[str, Behaviour] = {
    "hang": hang,
    "hang-after-headers": hang_after_headers,
    "drip": drip,
    "endless": endless,
    "huge-json": huge_json,
    "huge-event": huge_event,
    "gzip-bomb": gzip_bomb,
    "deep-json": _whole(_deep(100_000)),
    "deep-event": deep_event,
    "invalid-utf8-json": _whole(json.dumps(_response("caf@")).encode().replace(b"@", b"\xff")),
    "invalid-utf8-stream": invalid_utf8_stream,
    "nan": _whole(json.dumps(_response() | {"temperature": float("nan")}).encode()),
    "lone-surrogate": _whole(json.dumps(_response("caf@")).encode().replace(b"@", b"\\ud800")),
    "huge-integer": _whole(json.dumps(_response()).encode().replace(b'"created_at": 1', b'"created_at": '
                                                                    + b"9" * 5000)),
    "overflowing-float": _whole(json.dumps(_response() | {"temperature": 1}).encode().replace(
        b'"temperature": 1', b'"temperature": 1e400')),
    "json-as-event-stream": _whole(json.dumps(_response()).encode(), "200 OK", "text/event-stream"),
    "event-stream-as-json": _whole(_CREATED + _DELTA, "200 OK", "application/json"),
    "json-without-content-type": _whole(json.dumps(_response()).encode(), "200 OK", None),
    "unended-event": _whole(_CREATED + _DELTA.rstrip(b"\n"), "200 OK", "text/event-stream"),
    "html-error-page": _whole(b"<html><body><h1>502 Bad Gateway</h1></body></html>", "502 Bad Gateway",
                              "text/html"),
    "redirect-loop": _whole(b"", "307 Temporary Redirect", None, "location: /redirect-loop/v1/responses"),
    "reset": reset,
    "close-silently": close_silently,
    "short-body": short_body,
    "bad-chunking": bad_chunking,
    "not-http": not_http,
    "huge-headers": huge_headers,
}


class HostileTarget:
    """The server, in a thread of its own; `url(behaviour)` is a target's base URL. Another
    `answer` serves each connection its own way (`counting_upstream` does)."""

    def __init__(self, answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] | None = None
                 ) -> None:
        self._answer = answer or _answer
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hostile-target", daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    def url(self, behaviour: str) -> str:
        assert behaviour in BEHAVIOURS, behaviour
        return f"http://127.0.0.1:{self.port}/{behaviour}"

    def start(self) -> HostileTarget:
        _gzipped_spaces()  # compressed once, before any client waits for it
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile target did not start within 10 s")
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> HostileTarget:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def listen() -> None:
            self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(listen())
        self._loop.run_forever()


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read one request and answer it as its path's behaviour does; a client that goes away
    ends the behaviour."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1].decode()
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        await BEHAVIOURS[path.strip("/").split("/")[0]](reader, writer)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()
