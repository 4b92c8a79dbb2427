"""A recording reverse proxy: between any client (an app, the openai SDK, a framework's test
suite) and any upstream (a gateway, OpenAI), it forwards every request and answer, records
each exchange of the API surfaces the harness knows, and checks them without a reference.

- Requests and answers pass unchanged, headers too, minus hop-by-hop ones and the `Host`
  (the upstream's own). One exception: the upstream is asked for an answer without content
  coding (`Accept-Encoding: identity`), so what is recorded and checked is what the client
  got, byte for byte.
- Answers are relayed chunk by chunk as they arrive, never buffered; a stream's events are
  checked as they complete (`live_checks`), and the whole exchange once it ended.
- `/v1/responses` (and `/{id}`, `/input_items`, `/cancel`), `/v1/chat/completions` and
  `/v1/conversations/**` (under any prefix) are recorded and checked; other paths are
  forwarded, neither recorded nor checked.
- Each exchange is written to the capture folder (`capture.py`) once it ended (a file appears
  under its name only whole), secrets removed by the proxy's `Redactor`, which learns every
  secret a request carries (its credential headers, its body's secret fields) before anything
  of that request is written.
- An upstream that cannot be reached or does not speak HTTP gives the client a 502 in
  OpenAI's error envelope, and a finding; one that breaks off an answer ends the relayed
  answer there, and is a finding. The proxy itself keeps serving.

The proxy reports what it sees through `on_event` (`Found`, `Recorded`); it prints nothing.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .capture import capture_name
from .checks import delivery_findings, no_reference_findings
from .defaults import DEFAULT_MAX_ANSWER_BYTES
from .exchange import Exchange
from .findings import Finding, Kind, Severity
from .live_checks import LiveStream
from .redaction import SECRET_KEYS, Redactor
from .targets import CONNECT_DEADLINE_S, failure_reason
from .wire import read_body, read_stream

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "accept-encoding"})
"""Request and answer headers not forwarded as they are (`Host` and `Accept-Encoding`
are the proxy's own on the way up)."""
RECORDED = re.compile(r"(^|/)(responses|chat/completions|conversations)(/|$)")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
UPSTREAM_FAILED = "proxy.upstream"


@dataclass(frozen=True)
class Found:
    """A finding on the exchange recorded as `capture` (the file name; written once it ends)."""

    capture: str
    finding: Finding


@dataclass(frozen=True)
class Recorded:
    """An exchange ended and was written as `capture`."""

    capture: str
    exchange: Exchange


ProxyEvent = Found | Recorded


@dataclass
class _Recording:
    """One exchange as it is being relayed."""

    name: str
    exchange: Exchange
    chat: bool
    limit: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    live: LiveStream | None = None

    def keep(self, chunk: bytes) -> list[Finding]:
        """Keep `chunk` (up to the limit); the findings the events it completes add."""
        if self.exchange.truncated_after is not None or self.size + len(chunk) > self.limit:
            self.exchange.truncated_after = self.size
            return []
        self.chunks.append(chunk)
        self.size += len(chunk)
        return self.live.feed(chunk) if self.live is not None else []


class RecordingProxy:
    """The proxy as an ASGI app (`app`), forwarding to `upstream` (a base URL: a request for
    `/v1/responses` goes to `<upstream>/v1/responses`) and writing captures to `captures`."""

    def __init__(self, upstream: str, captures: Path, on_event: Callable[[ProxyEvent], None],
                 redactor: Redactor | None = None, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.upstream = upstream.rstrip("/")
        self.captures = captures
        self.on_event = on_event
        self.redactor = redactor or Redactor()
        self.max_answer_bytes = max_answer_bytes
        self._numbers = itertools.count(1)
        self._client: httpx.AsyncClient | None = None
        self.app = Starlette(routes=[Route("/{path:path}", self._forward, methods=METHODS)], lifespan=self._lifespan)

    @asynccontextmanager
    async def _lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.captures.mkdir(parents=True, exist_ok=True)
        # No read deadline: a client's stream lasts as long as the client and the upstream want.
        async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=CONNECT_DEADLINE_S)) as client:
            self._client = client
            yield

    async def _forward(self, request: Request) -> Response:
        assert self._client is not None
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        body = await request.body()
        headers = [(name, value) for name, value in request.headers.items() if name not in HOP_BY_HOP]
        recording = self._start_recording(request.method, path, body, headers)
        upstream_request = self._client.build_request(request.method, self.upstream + path, content=body,
                                                      headers=[*headers, ("accept-encoding", "identity")])
        try:
            upstream = await self._client.send(upstream_request, stream=True)
        except httpx.HTTPError as error:
            return self._upstream_failed(recording, failure_reason(error))
        if recording is not None:
            recording.exchange.status = upstream.status_code
            recording.exchange.headers = dict(upstream.headers)
            if "text/event-stream" in upstream.headers.get("content-type", ""):
                recording.live = LiveStream(recording.chat)
        answer = StreamingResponse(self._relay(upstream, recording), status_code=upstream.status_code)
        answer.raw_headers = [(name, value) for name, value in upstream.headers.raw
                              if name.decode("latin-1").lower() not in HOP_BY_HOP]
        return answer

    def _start_recording(self, method: str, path: str, body: bytes,
                         headers: list[tuple[str, str]]) -> _Recording | None:
        """A recording of this exchange when its path is one the harness knows, after the
        redactor learnt the secrets the request carries."""
        self.redactor.add(*(value for name, value in headers if name in SECRET_KEYS))
        request_body: Any = _json_or_text(body)
        self.redactor.learn(request_body)
        bare_path = path.partition("?")[0]
        if not RECORDED.search(bare_path):
            return None
        name = capture_name(next(self._numbers), method, bare_path)
        exchange = Exchange(method=method, url=self.upstream + path, request_body=request_body,
                            meta={"path": path, "upstream": self.upstream,
                                  "captured_at": datetime.now(UTC).isoformat(timespec="seconds")})
        return _Recording(name, exchange, "chat/completions" in bare_path, self.max_answer_bytes)

    def _upstream_failed(self, recording: _Recording | None, reason: str) -> Response:
        message = f"the upstream {self.upstream} gave no answer: {reason}"
        if recording is not None:
            recording.exchange.transport_error = message
            self._report(recording, [Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)])
            self._finish(recording)
        return JSONResponse({"error": {"message": message, "type": "server_error", "param": None,
                                       "code": "upstream_unreachable"}}, status_code=502)

    async def _relay(self, upstream: httpx.Response, recording: _Recording | None) -> AsyncIterator[bytes]:
        """The answer's bytes as they arrive; the recording ends however the relay does."""
        try:
            async for chunk in upstream.aiter_raw():
                if recording is not None:
                    self._report(recording, recording.keep(chunk))
                yield chunk
        except httpx.HTTPError as error:
            if recording is not None:
                message = f"the upstream {self.upstream} broke off its answer: {failure_reason(error)}"
                recording.exchange.transport_error = message
                self._report(recording, [Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)])
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            if recording is not None:
                recording.exchange.disconnected = True  # the client went away
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
                if recording is not None:  # checking a long stream takes a while: off the event loop
                    await anyio.to_thread.run_sync(self._finish, recording)

    def _report(self, recording: _Recording, findings: list[Finding]) -> None:
        for finding in findings:
            self.on_event(Found(recording.name, finding))

    def _finish(self, recording: _Recording) -> None:
        """Read what arrived, check the whole exchange (what the live checks did not already
        say), write it."""
        exchange = recording.exchange
        raw = b"".join(recording.chunks)
        cut_short = exchange.transport_error is not None or exchange.disconnected or \
            exchange.truncated_after is not None
        if recording.live is not None:
            exchange.sse, exchange.defects = read_stream(raw, cut_short)
        elif exchange.status is not None:
            exchange.body, exchange.defects = read_body(raw, (exchange.headers or {}).get("content-type"), cut_short)
        if exchange.truncated_after is not None:
            exchange.meta["note"] = (f"the answer was forwarded whole; only its first {exchange.truncated_after} "
                                     "bytes were recorded (--max-answer-mb)")
        elif exchange.transport_error is None and not exchange.disconnected:
            findings = delivery_findings(exchange)
            if not exchange.unreadable:
                findings += no_reference_findings(exchange, recording.chat, current=True)
            self._report(recording, recording.live.unseen(findings) if recording.live else findings)
        partial = self.captures / f"{recording.name}.partial"  # a reader of the folder never sees half a file
        self.redactor.write_json(partial, exchange.to_file())
        partial.replace(self.captures / recording.name)
        self.on_event(Recorded(recording.name, exchange))


def _json_or_text(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace")
