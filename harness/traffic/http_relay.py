"""The proxy's HTTP/1.1 wire on both sides, on raw connections: `ClientConnection` is the
protocol uvicorn serves a client's connection with (its `http=`), `UpstreamPool` the proxy's
connections to the upstream. Both parse with httptools (llhttp, what uvicorn parses with) and
hold nothing but what one exchange needs; what an exchange does with a request and its answer
is `RecordingProxy.exchange` (`proxy.py`).

- A client's requests are read bounded (a head of at most `HEAD_LIMIT` bytes, a body of at most
  the proxy's `max_request_bytes`: a larger one is refused as soon as it is declared or read
  larger) and answered one at a time, in order; a client that pipelines is read no further
  until its answers catch up. A request that is not HTTP gets a 400 in OpenAI's envelope and
  the connection closes. A WebSocket upgrade is handed, with the connection, to uvicorn's
  WebSocket protocol, which serves it through the proxy's ASGI app (`socket_proxy.py`).
- An answer is written as the proxy relays it: the head with the first piece of the body that
  has already arrived (one write for an answer that arrived whole), then each piece. Its framing
  is the upstream's where the client can take it (a `content-length` is kept); any other body
  is sent chunked (or, to an HTTP/1.0 client, until the connection closes). A body that could
  not be sent whole (the upstream broke it off, the proxy stopped) closes the connection, so
  the client sees it cut.
- Writing to a slow client pauses reading from the upstream (at most `BUFFERED_LIMIT` bytes
  wait), so memory stays bounded whatever either side does.
- An upstream connection answers one request at a time, and is reused only when its answer
  ended whole and it was idle for less than `IDLE_REUSE_S`.

Why not uvicorn's own protocol, an ASGI app and aiohttp's client (what the proxy ran on): each
request went through an ASGI cycle, a task, a watch task and aiohttp's request machinery. Side
by side at 16 requests in flight in front of the reference gateway, the relay spent 0.245 ms of
CPU per text answer, a plain ASGI relay on the same parts 0.135 ms, and a bare TCP splice
0.030 ms; the proxy kept 0.63 to 0.69 of the gateway's throughput. This relay spends 0.158 ms
and keeps 0.73 (the checker's messages batched too, `checker.py`: 0.13 ms and 0.77).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import unquote, urlsplit

import httptools

from ...openai_contract.request_body import RequestTooLarge
from ..engine.targets import failure_reason
from .forwarding import HOP_BY_HOP

if TYPE_CHECKING:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

HEAD_LIMIT = 64 * 2**10
"""The most bytes of a request's or an answer's line and headers that are read."""
BUFFERED_LIMIT = 2**20
"""The most bytes of an answer read from the upstream and not yet written to the client."""
IDLE_REUSE_S = 4.0
"""An upstream connection idle longer is closed rather than reused: below the 5 s after which
uvicorn (and many servers) close an idle connection, so a request is not sent on a connection
the upstream is closing."""
IDLE_KEPT = 64
"""The most idle upstream connections kept for reuse."""
NO_BODY = frozenset({204, 304})
_REUSABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
"""Requests sent again on a fresh connection when a reused one closed before answering (as
HTTP allows for idempotent ones; a `POST` could have been acted on)."""

_logger = logging.getLogger("uvicorn.error")


@dataclass
class ClientRequest:
    """One request as the client sent it: `target` is its path and query as written."""

    method: str
    target: str
    query: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    http11: bool
    keep_alive: bool

    def text_headers(self) -> list[tuple[str, str]]:
        return [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in self.headers]


def error_answer(status: int, body: dict[str, Any], *, close: bool = False) -> bytes:
    """A whole answer of the proxy's own: `body` as JSON (and the connection closed after it
    when `close`)."""
    data = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} {_phrase(status).decode()}", "content-type: application/json",
            f"content-length: {len(data)}", *(["connection: close"] if close else [])]
    return "\r\n".join([*head, "", ""]).encode() + data


def _phrase(status: int) -> bytes:
    """The reason phrase HTTP gives `status`."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Unknown"


def openai_error(message: str, code: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class Relay(Protocol):
    """What a `ClientConnection` hands its requests to (the proxy)."""

    max_request_bytes: int

    async def exchange(self, client: ClientConnection, request: ClientRequest) -> None:
        """Answer `request` on `client` (its task is cancelled when the client goes away)."""

    def refused(self, method: str, target: str, reason: str) -> None:
        """Told of each request not forwarded: its method, target (as sent) and why."""


class _Refused(Exception):
    """Stops parsing a request that was answered already (refused)."""


class ClientConnection(asyncio.Protocol):
    """A client's connection to the proxy, as uvicorn's HTTP protocol (`config`, `server_state`
    and `app_state` are uvicorn's): each whole request goes to `relay.exchange`, one at a time,
    which writes the answer with `start_answer`, `send_piece` and `end_answer`."""

    def __init__(self, relay: Relay, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._relay, self._limit = relay, relay.max_request_bytes
        self.config, self.server_state, self.app_state = config, server_state, app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._queued: deque[ClientRequest] = deque()
        self.answering: asyncio.Task[None] | None = None
        self.on_lost: Callable[[], None] | None = None
        """Called when the client goes away while an exchange is under way (set by the exchange)."""
        self._keep_alive = True
        self._broken: str | None = None
        """Why the client's next bytes could not be read, said once the answer under way ends."""
        self._paused_reading = False
        self._drained: asyncio.Future[None] | None = None
        self._heard_at = self.loop.time()
        self._idle: asyncio.TimerHandle | None = None
        self._framing = ""
        self._head = b""
        # the request being read
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body = bytearray()
        self._head_size = 0
        self._method = ""
        self._request_http11 = self._request_keep_alive = True
        self._answer_http11 = True
        """Whether the request being answered (not the one being read) was HTTP/1.1."""
        self._reading = self._body_begun = False

    # -- the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is none of asyncio's classes
        self.server_state.connections.add(self)
        self._idle = self.loop.call_later(self.config.timeout_keep_alive, self._idle_check)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        self._stop_idle_check()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._reading and self._body_begun:
            self._relay.refused(self._method, self._target_and_query()[0],
                                "the client went away before its request body ended")
        if self.answering is not None and self.on_lost is not None:
            self.on_lost()

    def eof_received(self) -> bool | None:
        return None  # the client is done: the connection closes (an exchange under way ends)

    def data_received(self, data: bytes) -> None:
        self._heard_at = self.loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._upgrade()
        except httptools.HttpParserError as error:
            if not isinstance(error.__context__, _Refused):  # refused: answered already
                self._bad_request(f"The request is not HTTP/1.1 the proxy can read: {error}")

    def pause_writing(self) -> None:
        self._drained = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    def shutdown(self) -> None:
        """uvicorn stops: an idle connection closes now, one answering once its answer ended."""
        self._keep_alive = False
        if self.answering is None and self.transport is not None:
            self.transport.close()

    # -- reading a request (httptools' callbacks)

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._head_size = b"", [], bytearray(), 0
        self._reading, self._body_begun = True, False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._grow_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._grow_head(len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        self._method = self._parser.get_method().decode("latin-1")
        if self._parser.should_upgrade():
            return
        self._body_begun = True
        self._request_http11 = self._parser.get_http_version() == "1.1"
        self._request_keep_alive = self._parser.should_keep_alive()
        fields = {name.lower(): value.strip().lower() for name, value in self._headers}
        if (declared := fields.get(b"content-length", b"")).isdigit() and int(declared) > self._limit:
            self._refuse_size(RequestTooLarge(int(declared), self._limit))
        if fields.get(b"expect") == b"100-continue":
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limit:
            self._refuse_size(RequestTooLarge(len(self._body), self._limit, at_least=True))

    def on_message_complete(self) -> None:
        if self._parser.should_upgrade():
            return
        self._reading = False
        target, query = self._target_and_query()
        request = ClientRequest(self._method, target, query, self._headers, bytes(self._body), self._request_http11,
                                self._request_keep_alive)
        self._body = bytearray()
        self.server_state.total_requests += 1
        self._queued.append(request)
        if self.answering is None:
            self._answer_next()
        elif not self._paused_reading and self.transport is not None:
            self.transport.pause_reading()  # pipelined: read on once the answers catch up
            self._paused_reading = True

    def _grow_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > HEAD_LIMIT:
            message = f"The request's line and headers are larger than {HEAD_LIMIT:,} bytes."
            self._refuse(431, openai_error(message, "request_header_fields_too_large", "invalid_request_error"))

    def _target_and_query(self) -> tuple[str, str]:
        """The request's path and query as written, and its query alone."""
        url = httptools.parse_url(self._url)
        path, query = url.path.decode("latin-1"), (url.query or b"").decode("latin-1")
        return path + (f"?{query}" if query else ""), query

    def _refuse_size(self, refused: RequestTooLarge) -> None:
        self._relay.refused(self._method, self._target_and_query()[0], refused.message)
        self._refuse(refused.status, refused.body())

    def _refuse(self, status: int, body: dict[str, Any]) -> None:
        """Answer the request being read with `status` (when no answer is being written) and
        close the connection, the rest unread."""
        self._reading = False
        self._keep_alive = False
        self._queued.clear()
        if self.answering is None and self.transport is not None:
            self.write(error_answer(status, body, close=True))
            self.transport.close()
        raise _Refused

    def _bad_request(self, message: str) -> None:
        """A 400 saying `message`, once no answer is being written; then the connection closes."""
        self._keep_alive = False
        self._queued.clear()
        if self.answering is not None:
            self._broken = message
        elif self.transport is not None:
            self.write(error_answer(400, openai_error(message, "invalid_request", "invalid_request_error"), close=True))
            self.transport.close()

    def _upgrade(self) -> None:
        """Hand the connection to uvicorn's WebSocket protocol, with the request as it came (an
        upgrade to anything else is refused)."""
        ws_protocol = self.config.ws_protocol_class
        upgrade = next((value.lower() for name, value in self._headers if name.lower() == b"upgrade"), b"")
        if ws_protocol is None or upgrade != b"websocket" or self.answering is not None or self.transport is None:
            self._bad_request("The proxy relays WebSocket upgrades only.")
            return
        self._stop_idle_check()
        self.server_state.connections.discard(self)
        head = [self._method.encode("latin-1"), b" ", self._url, b" HTTP/1.1\r\n"]
        for name, value in self._headers:  # in lower case, as uvicorn's own protocol hands them over
            head += [name.lower(), b": ", value, b"\r\n"]
        head.append(b"\r\n")
        protocol = ws_protocol(config=self.config, server_state=self.server_state,  # type: ignore[call-arg]
                               app_state=self.app_state)
        protocol.connection_made(self.transport)
        protocol.data_received(b"".join(head))
        self.transport.set_protocol(protocol)

    # -- answering

    def _answer_next(self) -> None:
        request = self._queued.popleft()
        self._keep_alive = self._keep_alive and request.keep_alive
        self._answer_http11 = request.http11
        self.answering = task = self.loop.create_task(self._relay.exchange(self, request))
        self.server_state.tasks.add(task)
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self.server_state.tasks.discard(task)
        self.answering, self.on_lost = None, None
        if not task.cancelled() and (error := task.exception()) is not None:
            _logger.error("parity proxy: an exchange failed", exc_info=error)
            if not self.started:
                self.write(error_answer(500, openai_error(f"parity proxy failed: {error}", "proxy_error"), close=True))
            self._keep_alive = False
        self._framing, self._head = "", b""
        self._heard_at = self.loop.time()
        if self.transport is None or self.transport.is_closing():
            return
        if self._broken is not None:
            self._bad_request(self._broken)
        elif not self._keep_alive:
            self.transport.close()
        elif self._queued:
            self._answer_next()
        elif self._paused_reading:
            self._paused_reading = False
            self.transport.resume_reading()

    @property
    def gone(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def drain(self) -> None:
        """Once the client has taken what was written (at once unless its buffer is full)."""
        if self._drained is not None:
            await self._drained

    def answer(self, data: bytes) -> None:
        """A whole answer of the proxy's own (`error_answer`)."""
        self._framing = "whole"
        self.write(data)

    def start_answer(self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], *, body: bool) -> None:
        """The head of an answer (written with the first piece of its body, or its end): `headers` are
        the upstream's, hop-by-hop ones left out; `body` says whether a body follows."""
        relayed = [(name, value) for name, value in headers if name.lower().decode("latin-1") not in HOP_BY_HOP]
        length = any(name.lower() == b"content-length" for name, _ in relayed)
        if not body:
            self._framing = "none"
        elif length:
            self._framing = "length"
        elif self._answer_http11:
            self._framing = "chunked"
            relayed.append((b"transfer-encoding", b"chunked"))
        else:
            self._framing = "close"
            self._keep_alive = False
        if not self._keep_alive:
            relayed.append((b"connection", b"close"))
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, reason or _phrase(status))]
        lines += [name + b": " + value + b"\r\n" for name, value in relayed]
        self._head = b"".join(lines) + b"\r\n"

    @property
    def started(self) -> bool:
        return self._framing != ""

    def send_piece(self, data: bytes) -> None:
        """A piece of the body (the head first, with it, if not written yet)."""
        if self._framing == "chunked":
            data = b"%x\r\n%b\r\n" % (len(data), data) if data else b""
        self.write(self._head + data)
        self._head = b""

    def end_answer(self, *, complete: bool) -> None:
        """The end of the body: a `complete` one ends as its framing says; any other closes the
        connection (a chunked body without its last chunk), so the client sees it cut."""
        self.write(self._head + (b"0\r\n\r\n" if complete and self._framing == "chunked" else b""))
        self._head = b""
        if not complete or self._framing == "close":
            self._keep_alive = False

    # -- idle connections

    def _idle_check(self) -> None:
        """Close the connection once it has been idle (no answer under way, nothing heard) for
        uvicorn's `timeout_keep_alive`; else look again when it could have been."""
        now, timeout = self.loop.time(), self.config.timeout_keep_alive
        due = self._heard_at + timeout
        if self.answering is None and now >= due and self.transport is not None:
            self.transport.close()
        else:
            self._idle = self.loop.call_at(due if self.answering is None else now + timeout, self._idle_check)

    def _stop_idle_check(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


class UpstreamFailed(Exception):
    """The upstream gave no answer, or broke one off (`str()` says how)."""


class UpstreamConnection(asyncio.Protocol):
    """One connection to the upstream, answering one request at a time (`send`): its answer's
    head (`head()`), then its body's pieces as they arrive (`piece()`, None at the end). An
    upstream silent for `read_timeout_s` from the request, or between two pieces, raises
    `TimeoutError`; one that sends what is not HTTP, or closes before the answer ended,
    `UpstreamFailed`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout_s: float) -> None:
        self.loop, self.read_timeout_s = loop, read_timeout_s
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset(no_body=False)

    def _reset(self, *, no_body: bool) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self.status, self.reason = 0, b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.has_head = self.complete = False
        self.heard_anything = False
        self.failure: BaseException | None = None
        self._no_body = no_body
        self._framed = self._keep_alive = False
        self._pieces: deque[bytes] = deque()
        self._buffered = self._head_size = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._heard_at = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def send(self, data: bytes, *, no_body: bool) -> None:
        """Send a request (its answer has no body when `no_body`, as for `HEAD`)."""
        self._reset(no_body=no_body)
        self._heard_at = self.loop.time()
        self._timer = self.loop.call_at(self._heard_at + self.read_timeout_s, self._check_silence)
        assert self.transport is not None
        self.transport.write(data)

    @property
    def reusable(self) -> bool:
        """Whether its answer ended whole and it may carry another (not paused for a client
        that left before taking all of it)."""
        return self.complete and not self.closed and not self._no_body and self._keep_alive and not self._paused

    @property
    def body_expected(self) -> bool:
        return not self._no_body and self.status not in NO_BODY

    async def head(self) -> None:
        while not self.has_head:
            await self._wait()

    def ready(self) -> list[bytes]:
        """The pieces that arrived and were not taken yet, without waiting."""
        pieces = list(self._pieces)
        self._pieces.clear()
        self._taken(sum(map(len, pieces)))
        return pieces

    async def piece(self) -> bytes | None:
        while not self._pieces:
            if self.complete:
                return None
            await self._wait()
        piece = self._pieces.popleft()
        self._taken(len(piece))
        return piece

    async def _wait(self) -> None:
        """Until something arrives or the answer fails (then raises its failure)."""
        if self.failure is not None:
            raise self.failure
        self._waiter = self.loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _taken(self, size: int) -> None:
        self._buffered -= size
        if self._paused and self._buffered < BUFFERED_LIMIT // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        self.closed = True
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()

    # -- the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is none of asyncio's classes

    def data_received(self, data: bytes) -> None:
        self._heard_at = self.loop.time()
        self.heard_anything = True
        if self.complete or self.failure is not None:
            self._keep_alive = False  # bytes after its answer: it carries no other
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            if not self.complete:
                self._fail(UpstreamFailed(f"its answer is not HTTP/1.1: {error}"))
        if self._buffered > BUFFERED_LIMIT and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.complete or self.failure is not None:
            return
        if self.has_head and not self._framed and self.body_expected:
            self._ended()  # a body that ends as its connection does
        else:
            why = f": {exc}" if exc else ""
            self._fail(UpstreamFailed(f"the connection closed before the answer {'ended' if self.has_head else 'began'}"
                                      + why))
        self._wake()

    def _fail(self, failure: BaseException) -> None:
        self.failure = failure
        self._stop_timer()
        self._wake()
        if self.transport is not None:
            self.transport.close()

    def _ended(self) -> None:
        self.complete = True
        self._stop_timer()
        self.idle_since = self.loop.time()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check_silence(self) -> None:
        """Fail the answer when nothing came for `read_timeout_s`, else look again then."""
        due = self._heard_at + self.read_timeout_s
        if self.loop.time() >= due:
            self._timer = None
            self._fail(TimeoutError())
        else:
            self._timer = self.loop.call_at(due, self._check_silence)

    # -- reading the answer (httptools' callbacks)

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: read no further, carry no other
            self._keep_alive = False
            raise _Refused

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self._head_size += len(name) + len(value) + 4
        if self._head_size > HEAD_LIMIT:
            self._fail(UpstreamFailed(f"its answer's headers are larger than {HEAD_LIMIT:,} bytes"))
            raise _Refused

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim answer: the final one follows
            self.reason, self.headers, self._head_size = b"", [], 0
            return
        self.status, self.has_head = status, True
        self._keep_alive = self._parser.should_keep_alive()
        self._framed = any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self.headers)
        if not self.body_expected:
            self._ended()

    def on_body(self, body: bytes) -> None:
        if not self.complete:
            self._pieces.append(body)
            self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self.has_head and not self.complete:
            self._ended()


class UpstreamPool:
    """Connections to the upstream at `base_url` (`http://` or `https://`, a path prefix and
    `user:password@` allowed), reused while they last."""

    def __init__(self, base_url: str, *, connect_timeout_s: float, read_timeout_s: float) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        netloc = parts.netloc.rpartition("@")[2]
        self.host_header = netloc.encode("idna") if not netloc.isascii() else netloc.encode()
        self.authorization = (b"Basic " + base64.b64encode(
            f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode())) if parts.username else None
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self._idle: list[UpstreamConnection] = []

    def request_bytes(self, request: ClientRequest) -> bytes:
        """The request as the upstream gets it: the client's, to the upstream's host and path
        prefix, hop-by-hop headers and the client's framing replaced, its answer asked for
        without content coding."""
        lines = [f"{request.method} {self.prefix}{request.target} HTTP/1.1\r\n".encode("latin-1"),
                 b"host: " + self.host_header + b"\r\n"]
        has_authorization = False
        for name, value in request.headers:
            lowered = name.lower()
            if lowered.decode("latin-1") in HOP_BY_HOP or lowered in (b"content-length", b"expect"):
                continue
            has_authorization = has_authorization or lowered == b"authorization"
            lines.append(name + b": " + value + b"\r\n")
        if self.authorization is not None and not has_authorization:
            lines.append(b"authorization: " + self.authorization + b"\r\n")
        lines.append(b"accept-encoding: identity\r\n")
        if request.body or request.method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            lines.append(b"content-length: %d\r\n" % len(request.body))
        lines.append(b"\r\n")
        return b"".join(lines) + request.body

    async def send(self, request: ClientRequest) -> UpstreamConnection:
        """A connection that sent `request`, its answer's head read; raises `TimeoutError` (the
        upstream fell silent) or `UpstreamFailed` (no connection, or no answer)."""
        data = self.request_bytes(request)
        no_body = request.method == "HEAD"
        if (connection := self._reused()) is not None:
            try:
                return await _sent(connection, data, no_body=no_body)
            except UpstreamFailed:
                if connection.heard_anything or request.method not in _REUSABLE_METHODS:
                    raise
        return await _sent(await self._connect(), data, no_body=no_body)

    def release(self, connection: UpstreamConnection) -> None:
        """Keep `connection` for reuse if its answer ended whole, else close it."""
        if connection.reusable and len(self._idle) < IDLE_KEPT:
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def _reused(self) -> UpstreamConnection | None:
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < IDLE_REUSE_S:
                return connection
            connection.close()
        return None

    async def _connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, connection = await loop.create_connection(lambda: UpstreamConnection(loop, self.read_timeout_s),
                                                             self.host, self.port, ssl=self.ssl)
        except TimeoutError as late:
            raise UpstreamFailed(f"no connection to {self.host}:{self.port} within {self.connect_timeout_s:g} s") \
                from late
        except OSError as refused:
            raise UpstreamFailed(f"cannot connect to {self.host}:{self.port}: {failure_reason(refused)}") from refused
        return connection


async def _sent(connection: UpstreamConnection, data: bytes, *, no_body: bool) -> UpstreamConnection:
    """`connection`, once it sent `data` and read its answer's head (closed if it did not)."""
    connection.send(data, no_body=no_body)
    try:
        await connection.head()
    except BaseException:
        connection.close()
        raise
    return connection
