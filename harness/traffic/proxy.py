"""A recording reverse proxy: between any client (an app, the openai SDK, a framework's test
suite) and any upstream (a gateway, OpenAI), it forwards every request and answer, records
each exchange of the API surfaces the harness knows, and checks them without a reference.

- Requests and answers pass unchanged, headers too, minus hop-by-hop ones and the `Host`
  (the upstream's own). One exception: the upstream is asked for an answer without content
  coding (`Accept-Encoding: identity`), so what is recorded and checked is what the client
  got, byte for byte.
- Answers are relayed chunk by chunk as they arrive, never buffered. The request path only
  relays: reading, checking and writing happen in the checker, a process of its own
  (`checker.py`), which gets a stream's chunks as they pass (its events are checked as they
  complete) and the whole exchange once it ended; what it has no room for is dropped and said,
  never queued, so a slow check or a slow disk never delays a client.
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
`Dropped`, `forwarding.py`); it prints nothing. WebSocket connections are still read, checked
and written in worker threads of the proxy's process (`FINISHING` at once, `socket_proxy.py`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import anyio.from_thread
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from yarl import URL

from ...openai_contract.request_body import RequestTooLarge, read_bytes
from ..engine.targets import CONNECT_DEADLINE_S, failure_reason
from ..judge.live_checks import LiveStream
from ..model.findings import Finding, Kind, Severity
from ..wire.capture import capture_name
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor
from .checker import Checker
from .forwarding import (HOP_BY_HOP, UPSTREAM_FAILED, Credentials, Dropped, Found, NotForwarded, ProxyEvent,
                         ProxyLimits, Recorded)
from .socket_proxy import relay_connection

_NOT_ADDED = ("User-Agent", "Accept", "Content-Type")
"""Headers the upstream client would add to a request that lacks them: it sends the client's own."""
RECORDED = re.compile(r"(^|/)(responses|chat/completions|conversations)(/|$)")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
FINISHING = 2
"""Ended WebSocket connections read, checked and written at once (in worker threads); the
others wait."""


@dataclass
class _Recording:
    """One exchange as it is being relayed: what is kept of its answer (for the checker, at its
    end), and whether its chunks still go to the checker as they pass (streams only)."""

    name: str
    exchange: Exchange
    chat: bool
    limit: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    live: bool = False

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
        numbered = LiveStream(self.chat)
        numbered.feed(b"".join(self.chunks))
        return numbered.next_sequence_number


class _Relayed(StreamingResponse):
    """An answer relayed as it arrives, until it ends, the client goes away or the proxy
    stops; its relay is closed however it ends, so the upstream's connection is closed at once."""

    def __init__(self, relay: AsyncIterator[bytes], status_code: int, stopping: anyio.Event) -> None:
        super().__init__(relay, status_code=status_code)
        self._stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = ended = False

        async def sending(message: Message) -> None:
            nonlocal started, ended
            await send(message)
            started, ended = True, message["type"] == "http.response.body" and not message.get("more_body")

        try:
            async with anyio.create_task_group() as relaying:
                relaying.start_soon(_cancel_when, self._stopping, relaying.cancel_scope)
                await super().__call__(scope, receive, sending)
                relaying.cancel_scope.cancel()
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
        if started and not ended and not any(name.lower() == b"content-length" for name, _ in self.raw_headers):
            await send({"type": "http.response.body", "body": b"", "more_body": False})  # the proxy stopped it here


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


class RecordingProxy:
    """The proxy as an ASGI app (`app`), forwarding to `upstream` (a base URL: a request for
    `/v1/responses` goes to `<upstream>/v1/responses`) and writing captures to `captures`."""

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
        self._client: aiohttp.ClientSession | None = None
        self._finishing: anyio.CapacityLimiter | None = None
        self._checker: Checker | None = None
        self._stopping: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self.app = Starlette(routes=[Route("/{path:path}", self._forward, methods=METHODS),
                                     WebSocketRoute("/{path:path}", self._relay_socket)], lifespan=self._lifespan)

    @asynccontextmanager
    async def _lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.captures.mkdir(parents=True, exist_ok=True)
        self._finishing = anyio.CapacityLimiter(FINISHING)
        self._stopping, self._token = anyio.Event(), anyio.lowlevel.current_token()
        # No deadline on a whole answer (a stream lasts as long as the client and the upstream
        # want), one on each read (`_send_while_client_waits` bounds the wait for the head); one
        # upstream connection per client request, never queued; the answer's bytes as sent.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_DEADLINE_S,
                                        sock_read=self.limits.read_timeout_s)
        self._checker = Checker(self.captures, self.on_event, self.redactor)
        self._checker.start()
        try:
            async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0),
                                             auto_decompress=False, skip_auto_headers=_NOT_ADDED) as client:
                self._client = client
                yield
        finally:
            await anyio.to_thread.run_sync(self._checker.close)  # what was sent is checked and written

    def stop(self) -> None:
        """End every open exchange at once, as if its client went away, and every one that
        starts from now on (from any thread; before the server stops, so none is cut off)."""
        if self._stopping is not None:
            anyio.from_thread.run_sync(self._stopping.set, token=self._token)

    @property
    def stopping(self) -> anyio.Event:
        """Set when the proxy stops: every open exchange and connection ends."""
        assert self._stopping is not None
        return self._stopping

    def next_number(self) -> int:
        """The number of the next capture file."""
        return next(self._numbers)

    def not_forwarded(self, method: str, path: str, reason: str) -> None:
        self.on_event(NotForwarded(method, path, reason))

    def recorded(self, name: str, exchange: Exchange) -> None:
        self.on_event(Recorded(name, exchange))

    async def _relay_socket(self, client: WebSocket) -> None:
        await relay_connection(self, client)

    async def _forward(self, request: Request) -> Response:
        assert self._client is not None
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        shown = self.credentials.hidden(path)
        await self.learn(self.credentials.values(request.headers.items(), request.url.query))
        try:
            body = await read_bytes(request, self.limits.max_request_bytes)
        except RequestTooLarge as refused:
            self.not_forwarded(request.method, shown, refused.message)
            return JSONResponse(refused.body(), refused.status, headers={"connection": "close"})  # the rest unread
        except ClientDisconnect:
            self.not_forwarded(request.method, shown, "the client went away before its request body ended")
            return Response()  # sent to no one
        headers = [(name, value) for name, value in request.headers.items() if name not in HOP_BY_HOP]
        recording = self._start_recording(request.method, shown, body)
        upstream = await self._send_while_client_waits(request, path, body,
                                                       [*headers, ("accept-encoding", "identity")])
        del body
        if upstream is None:
            if recording is not None:
                self._abandoned(recording)
                self._end(recording)
            return _error(503, "proxy_stopped", "parity proxy stopped before the upstream answered")
        if isinstance(upstream, TimeoutError):
            return await self._upstream_failed(recording, 504, "upstream_timeout", self._silent())
        if isinstance(upstream, aiohttp.ClientError):
            message = f"the upstream {self.upstream} gave no answer: {failure_reason(upstream)}"
            return await self._upstream_failed(recording, 502, "upstream_unreachable", message)
        if recording is not None:
            recording.exchange.status = upstream.status
            recording.exchange.headers = {name.lower(): ", ".join(upstream.headers.getall(name))
                                          for name in upstream.headers}
            recording.live = _is_stream(upstream)
        assert self._stopping is not None
        answer = _Relayed(self._relay(upstream, recording), upstream.status, self._stopping)
        answer.raw_headers = [(name, value) for name, value in upstream.raw_headers
                              if name.decode("latin-1").lower() not in HOP_BY_HOP]
        return answer

    async def learn(self, credentials: list[str]) -> None:
        """Know these credentials as secrets of the run before anything of their request is
        written (here and in the checker); a new one is learnt off the event loop (it rebuilds
        an automaton)."""
        if not self.redactor.knows(*credentials):
            await anyio.to_thread.run_sync(lambda: self.redactor.add(*credentials))
            assert self._checker is not None
            self._checker.learn(credentials)

    def _start_recording(self, method: str, path: str, body: bytes) -> _Recording | None:
        """A recording of this exchange when its path is one the harness knows (`path` with
        its credentials hidden) and the checker has room for it."""
        bare_path = path.partition("?")[0]
        if not RECORDED.search(bare_path):
            return None
        assert self._checker is not None
        name = capture_name(self.next_number(), method, bare_path)
        chat = "chat/completions" in bare_path
        if not self._checker.begin(name, chat, body[:self.limits.max_recorded_request_bytes], len(body)):
            self.on_event(Dropped(name, "the checker was behind when the request came; it was forwarded"))
            return None
        meta: dict[str, Any] = {"path": path, "upstream": self.upstream,
                                "captured_at": datetime.now(UTC).isoformat(timespec="seconds")}
        exchange = Exchange(method=method, url=self.upstream + path, meta=meta)
        return _Recording(name, exchange, chat, self.limits.max_answer_bytes)

    async def _send_while_client_waits(self, request: Request, path: str, body: bytes, headers: list[tuple[str, str]]
                                       ) -> aiohttp.ClientResponse | aiohttp.ClientError | TimeoutError | None:
        """The upstream's answer (its head: the body follows as it is read) or why there is
        none (silent for the read deadline before its head: `TimeoutError`); None when the
        client went away first, or the proxy stops (the request is then abandoned, and its
        connection to the upstream closed)."""
        assert self._client is not None and self._stopping is not None
        client = self._client
        outcome: aiohttp.ClientResponse | aiohttp.ClientError | TimeoutError | None = None

        async def send() -> None:
            nonlocal outcome
            try:
                with anyio.fail_after(self.limits.read_timeout_s):
                    url = URL(self.upstream + path, encoded=True)  # as the client wrote it, not normalised
                    outcome = await client.request(request.method, url, data=body,
                                                   headers=headers, allow_redirects=False)
            except (aiohttp.ClientError, TimeoutError) as error:
                outcome = error
            waiting.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            waiting.cancel_scope.cancel()

        async with anyio.create_task_group() as waiting:
            waiting.start_soon(send)
            waiting.start_soon(watch)
            waiting.start_soon(_cancel_when, self._stopping, waiting.cancel_scope)
        return outcome

    def _abandoned(self, recording: _Recording) -> None:
        """The exchange ends before its answer did: its client went away, or the proxy stops."""
        assert self._stopping is not None
        recording.exchange.disconnected = True
        recording.exchange.meta["ended"] = "the proxy stopped" if self._stopping.is_set() else "the client went away"

    def _silent(self) -> str:
        return f"the upstream {self.upstream} sent nothing for {self.limits.read_timeout_s:g} s (--read-timeout)"

    async def _upstream_failed(self, recording: _Recording | None, status: int, code: str, message: str) -> Response:
        """The client's answer when the upstream gave none (`status` and `code` in OpenAI's
        envelope); the exchange is recorded as such."""
        self._failed(recording, message)
        if recording is not None:
            self._end(recording)
        return _error(status, code, message)

    def _failed(self, recording: _Recording | None, message: str) -> None:
        """The upstream failed the exchange (gave no answer, or not all of it): a finding."""
        if recording is not None:
            recording.exchange.transport_error = message
            finding = Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)
            self.report(recording.name, self.redactor, [finding])

    async def _relay(self, upstream: aiohttp.ClientResponse, recording: _Recording | None) -> AsyncIterator[bytes]:
        """The answer's bytes as they arrive; the recording ends however the relay does (the
        upstream's connection is kept for another request only when the answer came whole)."""
        between_events = True
        checker = self._checker
        assert checker is not None
        try:
            await self.learn(self.credentials.values(upstream.headers.items()))  # a cookie it sets, say
            async for chunk in upstream.content.iter_any():
                if recording is not None:
                    recording.keep(chunk, checker)
                between_events = chunk.endswith((b"\n\n", b"\r\r"))
                yield chunk
        except TimeoutError:
            message = self._silent()
            self._failed(recording, message)
            if _is_stream(upstream) and between_events:
                yield _error_event(message, recording)
        except aiohttp.ClientError as error:
            self._failed(recording, f"the upstream {self.upstream} broke off its answer: {failure_reason(error)}")
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            if recording is not None:
                self._abandoned(recording)
            raise
        finally:
            if upstream.content.at_eof():
                upstream.release()
            else:
                upstream.close()
            if recording is not None:
                self._end(recording)

    def report(self, capture: str, redactor: Redactor, findings: list[Finding]) -> None:
        """Each finding on the exchange recorded as `capture`, its secrets removed by `redactor`."""
        for finding in findings:
            self.on_event(Found(capture, replace(finding, message=redactor.redact_text(finding.message))))

    async def off_the_loop(self, work: Callable[[], None]) -> None:
        """`work` (reading, checking and writing what was recorded: a long stream takes a while)
        in a worker thread, `FINISHING` at once; it runs to its end even when the caller is
        cancelled."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(work, limiter=self._finishing)

    def _end(self, recording: _Recording) -> None:
        """Hand the ended exchange to the checker, which reads, checks and writes it."""
        assert self._checker is not None
        self._checker.end(recording.name, recording.exchange, recording.chunks)
        recording.chunks = []


def _error(status: int, code: str, message: str) -> Response:
    """An error of the proxy's own, in OpenAI's envelope."""
    return JSONResponse({"error": {"message": message, "type": "server_error", "param": None, "code": code}}, status)


def _is_stream(answer: aiohttp.ClientResponse) -> bool:
    return "text/event-stream" in answer.headers.get("content-type", "")


def _error_event(message: str, recording: _Recording | None) -> bytes:
    """The event OpenAI ends a failed stream with: a Responses `error` event (numbered on
    from the stream's events when they are numbered), or a chat completion chunk's `error`."""
    error = {"message": message, "type": "server_error", "param": None, "code": "upstream_timeout"}
    if recording is not None and recording.chat:
        return f"data: {json.dumps({'error': error})}\n\n".encode()
    number = recording.next_sequence_number() if recording is not None and recording.live else None
    event = {"type": "error", "code": "upstream_timeout", "message": message, "param": None,
             **({"sequence_number": number} if number is not None else {})}
    return f"event: error\ndata: {json.dumps(event)}\n\n".encode()


