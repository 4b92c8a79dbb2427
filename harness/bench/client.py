"""The benchmark's HTTP client: HTTP/1.1 keep-alive connections over asyncio, answers parsed by
httptools (llhttp, the parser uvicorn uses), and the two moments a benchmark needs: the first
server-sent event and the answer's last byte. WebSocket mode goes over `websockets` (a socket
is opened once per batch; a create's moments are its first frame and its terminal one).

Why not httpx or aiohttp: the client runs on the same two cores as what it measures, and httpx
spends about a millisecond of CPU per request (aiohttp a third of that), as much as the gateway
overhead being measured. Writing a request line and headers is a few lines; parsing the answer
(chunked bodies, keep-alive) is left to httptools.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httptools
import websockets
import websockets.asyncio.client

from ..defaults import DEFAULT_MAX_ANSWER_BYTES

READ_SIZE = 2**16
SOCKET_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
"""The frames that end a create's answer on a socket."""
REUSE_IDLE_S = 2.0
"""A connection idle longer is closed, not reused: servers close idle connections after a few
seconds (uvicorn by default after 5), and a request sent as one closes fails for no fault of theirs."""


@dataclass(frozen=True)
class Answer:
    """One answer: its status, body, and seconds from sending to its first event (None when no
    `\\n\\n`-terminated event arrived) and to its last byte."""

    status: int
    body: bytes
    first_event_s: float | None
    total_s: float

    def json(self) -> Any:
        return json.loads(self.body)


class ClientError(Exception):
    """The request got no complete answer (refused, reset, timed out, malformed)."""


class _Parse:
    """httptools' callbacks, collecting one answer of at most `limit` bytes."""

    def __init__(self, started: float, limit: int) -> None:
        self.started = started
        self.limit = limit
        self.parser = httptools.HttpResponseParser(self)
        self.body = bytearray()
        self.first_event_s: float | None = None
        self.done = False
        self.keep_alive = False
        self.too_large = False

    def on_body(self, chunk: bytes) -> None:
        if len(self.body) + len(chunk) > self.limit:
            self.too_large = True
            return
        self.body += chunk
        tail = self.body[-len(chunk) - 3:]  # an event's end may straddle two chunks
        if self.first_event_s is None and (b"\n\n" in tail or b"\r\n\r\n" in tail):
            self.first_event_s = time.perf_counter() - self.started

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # read here: the parser resets once it returns
        self.done = True


class StaleConnection(ClientError):
    """A reused connection ended before any byte of the answer: the server had closed it while it
    was idle. The request is sent again on a new connection."""


class Connection:
    """One keep-alive connection to `host:port`, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.usable = True
        self.exchanges = 0
        self.idle_since = time.monotonic()

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)  # asyncio sets TCP_NODELAY
        return cls(reader, writer)

    async def exchange(self, head: bytes, body: bytes, limit: int) -> Answer:
        """One request and its answer; `StaleConnection` when a reused connection ends at once."""
        started = time.perf_counter()
        parse = _Parse(started, limit)
        reused = self.exchanges > 0
        self.exchanges += 1
        received = 0
        try:
            self._writer.write(head + body)
            while not parse.done:
                try:
                    data = await self._reader.read(READ_SIZE)
                except ConnectionError:
                    if reused and not received:
                        raise StaleConnection("the server had closed the idle connection") from None
                    raise
                if not data:
                    if reused and not received:
                        raise StaleConnection("the server had closed the idle connection")
                    raise ClientError("the server closed the connection before the answer ended")
                received += len(data)
                parse.parser.feed_data(data)
                if parse.too_large:
                    raise ClientError(f"the answer is larger than {parse.limit} bytes")
        except httptools.HttpParserError as error:
            self.usable = False
            raise ClientError(f"malformed answer: {error}") from error
        except BaseException:
            self.usable = False
            raise
        self.usable = parse.keep_alive
        self.idle_since = time.monotonic()
        return Answer(parse.parser.get_status_code(), bytes(parse.body), parse.first_event_s,
                      time.perf_counter() - started)

    def close(self) -> None:
        self._writer.close()


class Client:
    """Requests to one base URL over a pool of keep-alive connections (at most one request on
    each at a time; a connection is opened when none is idle). An answer must end within
    `timeout_s` and stay within `max_answer_bytes`, or it is a `ClientError`."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 60.0,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"the benchmark client speaks plain HTTP: {base_url!r}")
        self.base_url = base_url
        self._host = parts.hostname
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in
                              ({"Host": f"{self._host}:{self._port}", "Content-Type": "application/json"}
                               | dict(headers or {})).items())
        self._timeout_s = timeout_s
        self._limit = max_answer_bytes
        self._idle: list[Connection] = []
        self.headers = dict(headers or {})

    def _head(self, method: str, path: str, length: int) -> bytes:
        return f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._fixed}Content-Length: {length}\r\n\r\n".encode()

    async def request(self, method: str, path: str, body: Any = None) -> Answer:
        """Send `body` as JSON (none when None); raises `ClientError` when no answer came."""
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = self._head(method, path, len(payload))
        try:
            async with asyncio.timeout(self._timeout_s):
                try:
                    return await self._exchange(self._idle_connection(), head, payload)
                except StaleConnection:
                    return await self._exchange(None, head, payload)
        except TimeoutError as error:
            raise ClientError(f"no answer within {self._timeout_s:g}s") from error
        except OSError as error:
            raise ClientError(f"{type(error).__name__}: {error}") from error

    def _idle_connection(self) -> Connection | None:
        """The most recently used idle connection, closing those idle longer than `REUSE_IDLE_S`."""
        while self._idle:
            connection = self._idle.pop()
            if time.monotonic() - connection.idle_since <= REUSE_IDLE_S:
                return connection
            connection.close()
        return None

    async def _exchange(self, connection: Connection | None, head: bytes, payload: bytes) -> Answer:
        """The exchange on `connection` (a new one when None), which goes back to the pool if the
        server keeps it open."""
        try:
            if connection is None:
                connection = await Connection.open(self._host, self._port)
            return await connection.exchange(head, payload, self._limit)
        finally:
            if connection is not None:
                if connection.usable:
                    self._idle.append(connection)
                else:
                    connection.close()

    async def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def socket(self, path: str) -> websockets.asyncio.client.connect:
        """A WebSocket-mode connection to `path` (an async context), with the client's headers."""
        return websockets.asyncio.client.connect(
            f"ws://{self._host}:{self._port}{self._prefix}{path}", additional_headers=self.headers,
            open_timeout=self._timeout_s, max_size=self._limit, compression=None)

    async def create(self, socket: websockets.asyncio.client.ClientConnection, body: dict[str, Any]) -> Answer:
        """One `response.create` on an open socket: the answer's frames up to its terminal event
        (or error frame), timed to the first frame and the last; the body is the last frame."""
        frame = json.dumps({"type": "response.create", **{k: v for k, v in body.items() if k != "stream"}})
        started = time.perf_counter()
        first: float | None = None
        try:
            async with asyncio.timeout(self._timeout_s):
                await socket.send(frame)
                while True:
                    received = await socket.recv()
                    first = first if first is not None else time.perf_counter() - started
                    text = received if isinstance(received, str) else received.decode(errors="replace")
                    kind = json.loads(text).get("type")
                    if kind in SOCKET_ENDS:
                        status = 200 if kind != "error" else int(json.loads(text).get("status") or 500)
                        return Answer(status, text.encode(), first, time.perf_counter() - started)
        except TimeoutError as error:
            raise ClientError(f"no terminal frame within {self._timeout_s:g}s") from error
        except (websockets.ConnectionClosed, ValueError, AttributeError, RecursionError) as error:
            raise ClientError(f"{type(error).__name__}: {error}") from error
