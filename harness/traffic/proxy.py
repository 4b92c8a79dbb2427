"""A recording reverse proxy: between any client (an app, the openai SDK, a framework's test
suite) and any upstream (a gateway, OpenAI), it forwards every request and answer, records
each exchange of the API surfaces the harness knows, and checks them without a reference.

- Requests and answers pass unchanged, headers too, minus hop-by-hop ones and the `Host`
  (the upstream's own). One exception: the upstream is asked for an answer without content
  coding (`Accept-Encoding: identity`), so what is recorded and checked is what the client
  got, byte for byte.
- Answers are relayed chunk by chunk as they arrive, never buffered. The request path only
  relays: reading, checking and writing happen in the checker, a process of its own
  (`checker.py`), which gets a stream's chunks as they pass, gathered every 20 ms (its events
  are checked as they complete) and the whole exchange once it ended; what it has no room for
  is dropped and said, never queued, so a slow check or a slow disk never delays a client.
- `/v1/responses` (and `/{id}`, `/input_items`, `/cancel`), `/v1/chat/completions` and
  `/v1/conversations/**` (under any prefix) are recorded and checked; other paths are
  forwarded, neither recorded nor checked. A WebSocket upgrade (OpenAI's WebSocket mode, on
  any path) is relayed frame by frame and recorded as one connection (`socket_proxy.py`).
- Each exchange is written to the capture folder (`wire/capture.py`) by the checker once it
  ended (a file appears under its name only whole), secrets removed (below).
- An upstream that cannot be reached or does not speak HTTP gives the client a 502 in
  OpenAI's error envelope, and a finding; one that breaks off an answer ends the relayed
  answer there, and is a finding. The proxy itself keeps serving.

Bounds (`ProxyLimits`), so that no client or upstream makes the proxy work or wait without
end: a request body larger than `max_request_bytes` is refused with a 413 in OpenAI's
envelope as soon as it is declared or read larger, the rest left unread; of a request body at
most `max_recorded_request_bytes` are recorded, of an answer `max_answer_bytes` (both are
forwarded whole). An upstream that sends nothing for `read_timeout_s`, before its answer's head
or between two pieces of it, is a finding: the client gets a 504 in OpenAI's envelope, or, in
a stream, an `error` event where the next event would be. A client that goes away ends its
exchange at once, however far it got: the upstream's connection is closed, what arrived is
recorded, and it is one line (`NotForwarded` when it left before its request was whole). A
stream being checked keeps no event once checked, and the checker's inbox is bounded in bytes,
so memory stays within those limits however many streams come and go.

Secrets: the credentials a request carries, in a header named in `Credentials.headers` (the
redactor's secret keys: `Authorization`, `api-key`, `x-api-key`, cookies, ... and any the user
names) or a query parameter named in `Credentials.params` (`CREDENTIAL_PARAMS` and any the
user names), are secrets of the whole run, learnt before anything of that request is written
or printed, and a credential parameter's value is hidden in the recorded path too. A request
body's values are never secrets of the run: its MCP tools' `authorization` and header values
(where OpenAI's API puts secrets) are removed by value from that exchange's capture and
findings only, and values under secret-looking keys are blanked where they sit.

The proxy reports what it sees through `on_event` (`Found`, `Recorded`, `NotForwarded`,
`Dropped`, `forwarding.py`); it prints nothing. WebSocket-mode connections are relayed frame by
frame (`socket_proxy.py`), and recorded and checked in the same checker process.

HTTP is relayed on raw connections (`http_relay.py`: httptools on both sides, one task per
exchange), not through an ASGI app and an HTTP client library, because the proxy sits in the path
of every request a client makes; the measurements are in that module. The lifespan and
WebSocket connections go through `app`, served by uvicorn (`server()`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket

from ..engine.server_thread import ServerThread
from ..engine.targets import CONNECT_DEADLINE_S
from ..judge.live_checks import LiveStream
from ..model.findings import Finding, Kind, Severity
from ..wire.capture import capture_name
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor
from .checker import Checker, RecordedRequest
from .forwarding import UPSTREAM_FAILED, Credentials, Found, NotForwarded, ProxyEvent, ProxyLimits
from .http_relay import (ClientConnection, ClientRequest, UpstreamConnection, UpstreamFailed, UpstreamPool,
                         error_answer, openai_error)
from .socket_proxy import relay_connection

RECORDED = re.compile(r"(^|/)(responses|chat/completions|conversations)(/|$)")


@dataclass
class _Recording:
    """One exchange as it is being relayed: what is kept of its answer (for the checker, at its
    end), and whether its chunks still go to the checker as they pass (streams only)."""

    name: str
    exchange: Exchange
    request: RecordedRequest
    limit: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    live: bool = False
    begun: bool = False
    """Whether the checker was sent the request already (a stream's `begin`)."""

    def keep(self, chunk: bytes, checker: Checker) -> None:
        """Keep `chunk` (up to the limit); pass it to the live checks while they keep up."""
        if self.exchange.truncated_after is not None or self.size + len(chunk) > self.limit:
            self.exchange.truncated_after = self.size
            return
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.live and not checker.chunk(self.name, chunk):
            self.live = False
            self.exchange.meta["live_checks"] = (f"stopped at byte {self.size - len(chunk):,}: the checker was "
                                                 "behind; the whole answer was checked once it ended")

    def next_sequence_number(self) -> int | None:
        """The `sequence_number` an event added to the answer kept so far would carry."""
        numbered = LiveStream(self.request.chat)
        numbered.feed(b"".join(self.chunks))
        return numbered.next_sequence_number


STOPPED = "the proxy stopped"


@dataclass(eq=False)
class _Underway:
    """An HTTP exchange under way: what is recorded of it, and how it is ended early (its task
    cancelled, saying `why`)."""

    task: asyncio.Task[Any] | None
    client: ClientConnection
    recording: _Recording | None
    why: str | None = None
    done: bool = False
    """Whether it is past ending early (its answer's end is being sent, or it ended)."""

    def end(self, why: str) -> None:
        if not self.done and self.why is None and self.task is not None:
            self.why = why
            self.task.cancel()


class RecordingProxy:
    """The proxy, forwarding to `upstream` (a base URL: a request for `/v1/responses` goes to
    `<upstream>/v1/responses`) and writing captures to `captures`; `server()` serves it."""

    def __init__(self, upstream: str, captures: Path, on_event: Callable[[ProxyEvent], None], *,
                 redactor: Redactor | None = None, limits: ProxyLimits | None = None,
                 credentials: Credentials | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.captures = captures
        self.on_event = on_event
        self.redactor = redactor or Redactor()
        self.limits = limits or ProxyLimits()
        self.credentials = credentials or Credentials()
        upstream_url = urlsplit(self.upstream)
        self.redactor.add(upstream_url.password, *self.credentials.values([], upstream_url.query))
        self._numbers = itertools.count(1)
        self._pool: UpstreamPool | None = None
        self._checker: Checker | None = None
        self._stopping: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._open: set[_Underway] = set()
        """HTTP exchanges under way."""
        self.app: ASGIApp = Starlette(routes=[WebSocketRoute("/{path:path}", self._relay_socket)],
                                      lifespan=self._lifespan)
        """The proxy's lifespan and its WebSocket connections (HTTP is relayed by `ClientConnection`)."""

    @property
    def max_request_bytes(self) -> int:
        return self.limits.max_request_bytes

    def server(self, port: int = 0) -> ServerThread:
        """The proxy served on a loopback port (`port` 0: any free one), not yet started."""
        return ServerThread(self.app, port, http=partial(ClientConnection, self))

    @asynccontextmanager
    async def _lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.captures.mkdir(parents=True, exist_ok=True)
        self._stopping, self._token = anyio.Event(), anyio.lowlevel.current_token()
        self._checker = Checker(self.captures, self.on_event, self.redactor)
        await self._checker.start()
        # One upstream connection per client request under way, never queued; no deadline on a
        # whole answer (a stream lasts as long as the client and the upstream want), one on
        # each read (`read_timeout_s`) and on connecting.
        self._pool = UpstreamPool(self.upstream, connect_timeout_s=CONNECT_DEADLINE_S,
                                  read_timeout_s=self.limits.read_timeout_s)
        try:
            yield
        finally:
            self._pool.close()
            await self._checker.close()  # what was sent is checked and written

    def stop(self) -> None:
        """End every open exchange at once, as if its client went away, and every one that
        starts from now on (from any thread; before the server stops, so none is cut off)."""
        if self._stopping is not None:
            anyio.from_thread.run_sync(self._stop_on_the_loop, token=self._token)

    def _stop_on_the_loop(self) -> None:
        assert self._stopping is not None
        self._stopping.set()
        for underway in list(self._open):
            underway.end(STOPPED)

    @property
    def stopping(self) -> anyio.Event:
        """Set when the proxy stops: every open exchange and connection ends."""
        assert self._stopping is not None
        return self._stopping

    @property
    def checker(self) -> Checker:
        """Where what is relayed goes to be checked and written (while the proxy serves)."""
        assert self._checker is not None
        return self._checker

    def next_number(self) -> int:
        """The number of the next capture file."""
        return next(self._numbers)

    def not_forwarded(self, method: str, path: str, reason: str) -> None:
        self.on_event(NotForwarded(method, path, reason))

    def refused(self, method: str, target: str, reason: str) -> None:
        """A request not forwarded (too large, or its client left before it was whole)."""
        self.not_forwarded(method, self.credentials.hidden(target), reason)

    async def _relay_socket(self, client: WebSocket) -> None:
        await relay_connection(self, client)

    async def exchange(self, client: ClientConnection, request: ClientRequest) -> None:
        """One exchange: the request forwarded as it came, its answer relayed as it arrives; it
        ends early when the client goes away or the proxy stops (the exchange is then cancelled,
        `_Underway`), and is handed to the checker however it ends."""
        shown = self.credentials.hidden(request.target)
        await self.learn(self.credentials.values(request.text_headers(), request.query))
        if self.stopping.is_set():
            client.answer(_error(503, "proxy_stopped", "parity proxy is stopping"))
            return
        recording = self._start_recording(request.method, shown, request.body)
        underway = _Underway(asyncio.current_task(), client, recording)
        self._open.add(underway)
        client.on_lost = lambda: underway.end("the client went away")
        if client.gone:
            underway.end("the client went away")
        try:
            await self._exchange(request, underway)
        except asyncio.CancelledError:
            if underway.why is None:
                raise  # the server itself is cancelling
            if recording is not None:
                recording.exchange.disconnected = True
                recording.exchange.meta["ended"] = underway.why
            if underway.why == STOPPED and not client.started:
                client.answer(_error(503, "proxy_stopped", "parity proxy stopped before the upstream answered"))
            elif underway.why == STOPPED:
                client.end_answer(complete=False)  # cut here
        finally:
            self._open.discard(underway)
            underway.done = True
            if recording is not None:
                self._end(recording)

    async def _exchange(self, request: ClientRequest, underway: _Underway) -> None:
        """Forward the request and relay the answer (or the proxy's own error in OpenAI's
        envelope when the upstream gives none)."""
        assert self._pool is not None
        try:
            upstream = await self._pool.send(request)
        except TimeoutError:
            self._upstream_failed(underway, 504, "upstream_timeout", self._silent())
            return
        except UpstreamFailed as error:
            message = f"the upstream {self.upstream} gave no answer: {error}"
            self._upstream_failed(underway, 502, "upstream_unreachable", message)
            return
        try:
            await self._relay(upstream, underway)
        finally:
            self._pool.release(upstream)  # whole: it serves another request; else closed

    async def _relay(self, upstream: UpstreamConnection, underway: _Underway) -> None:
        """The answer's head, then its bytes as they arrive, then its end; an upstream that falls
        silent or breaks off is a finding (a stream silent between events gets an `error` event)."""
        recording, client = underway.recording, underway.client
        checker = self.checker
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in upstream.headers]
        stream = any(name.lower() == "content-type" and "text/event-stream" in value for name, value in headers)
        if recording is not None:
            recording.exchange.status = upstream.status
            joined: dict[str, list[str]] = {}
            for name, value in headers:
                joined.setdefault(name.lower(), []).append(value)
            recording.exchange.headers = {name: ", ".join(values) for name, values in joined.items()}
            recording.live = recording.begun = stream and checker.begin(recording.name, recording.request)
        await self.learn(self.credentials.values(headers))  # a cookie it sets, say
        client.start_answer(upstream.status, upstream.reason, upstream.headers, body=upstream.body_expected)
        between_events, complete = True, False
        try:
            piece: bytes | None = b"".join(upstream.ready())  # with the head: one write for an answer come whole
            while piece is not None:
                if piece:
                    between_events = piece.endswith((b"\n\n", b"\r\r"))
                    if recording is not None:
                        recording.keep(piece, checker)
                client.send_piece(piece)
                await client.drain()
                piece = await upstream.piece()
            complete = True
        except TimeoutError:
            message = self._silent()
            self._failed(recording, message)
            if stream and between_events:
                chat = recording is not None and recording.request.chat
                number = None if recording is None or chat else \
                    await anyio.to_thread.run_sync(recording.next_sequence_number)  # reads what was kept
                client.send_piece(_error_event(message, chat, number))
                complete = True  # ended as OpenAI ends a stream that failed
        except UpstreamFailed as error:
            self._failed(recording, f"the upstream {self.upstream} broke off its answer: {error}")
        underway.done = True  # from here on, the client's leaving ends nothing
        client.end_answer(complete=complete)

    async def learn(self, credentials: list[str]) -> None:
        """Know these credentials as secrets of the run before anything of their request is
        written (here and in the checker); a new one is learnt off the event loop (it rebuilds
        an automaton)."""
        if not self.redactor.knows(*credentials):
            await anyio.to_thread.run_sync(lambda: self.redactor.add(*credentials))
            self.checker.learn(credentials)

    def _start_recording(self, method: str, path: str, body: bytes) -> _Recording | None:
        """A recording of this exchange when its path is one the harness knows (`path` with
        its credentials hidden)."""
        bare_path = path.partition("?")[0]
        if not RECORDED.search(bare_path):
            return None
        name = capture_name(self.next_number(), method, bare_path)
        request = RecordedRequest("chat/completions" in bare_path, body[:self.limits.max_recorded_request_bytes],
                                  len(body))
        meta: dict[str, Any] = {"path": path, "upstream": self.upstream,
                                "captured_at": datetime.now(UTC).isoformat(timespec="seconds")}
        exchange = Exchange(method=method, url=self.upstream + path, meta=meta)
        return _Recording(name, exchange, request, self.limits.max_answer_bytes)

    def _silent(self) -> str:
        return f"the upstream {self.upstream} sent nothing for {self.limits.read_timeout_s:g} s (--read-timeout)"

    def _upstream_failed(self, underway: _Underway, status: int, code: str, message: str) -> None:
        """The client's answer when the upstream gave none (`status` and `code` in OpenAI's
        envelope); the exchange is recorded as such."""
        self._failed(underway.recording, message)
        underway.done = True
        underway.client.answer(_error(status, code, message))

    def _failed(self, recording: _Recording | None, message: str) -> None:
        """The upstream failed the exchange (gave no answer, or not all of it): a finding."""
        if recording is not None:
            recording.exchange.transport_error = message
            finding = Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)
            self.report(recording.name, [finding])

    def report(self, capture: str, findings: list[Finding]) -> None:
        """Each finding on the exchange recorded as `capture`, the run's secrets removed."""
        for finding in findings:
            self.on_event(Found.redacted(capture, finding, self.redactor))

    def _end(self, recording: _Recording) -> None:
        """Hand the ended exchange to the checker, which reads, checks and writes it."""
        self.checker.end(recording.name, recording.exchange, recording.chunks,
                          None if recording.begun else recording.request)
        recording.chunks = []


def _error(status: int, code: str, message: str) -> bytes:
    """An answer of the proxy's own: an error in OpenAI's envelope."""
    return error_answer(status, openai_error(message, code))


def _error_event(message: str, chat: bool, number: int | None) -> bytes:
    """The event OpenAI ends a failed stream with: a Responses `error` event (numbered `number`
    when the stream's events are numbered), or a chat completion chunk's `error`."""
    if chat:
        return f"data: {json.dumps(openai_error(message, 'upstream_timeout'))}\n\n".encode()
    event = {"type": "error", "code": "upstream_timeout", "message": message, "param": None,
             **({"sequence_number": number} if number is not None else {})}
    return f"event: error\ndata: {json.dumps(event)}\n\n".encode()


