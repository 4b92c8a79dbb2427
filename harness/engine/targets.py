"""Targets (what the harness talks to) and sending one request to them.

Every answer is bounded: the target's timeout runs from sending to the last byte, and at most
`max_answer_bytes` (decoded) are kept. A target that hangs, resets the connection, cuts a
stream short or sends without end gives an `Exchange` with `transport_error` set and whatever
arrived; bytes that are not what they claim to be (not UTF-8, not JSON, mislabelled, an event
never ended) are its `defects`. Either is a finding for the report, never a stuck, swollen or
crashed run.

Why httpx2: the openai and mcp SDKs use it (and the reference gateway for its MCP and web search
clients), and it reads a stream's events itself (`EventSource`), so the harness's clients share
their stack rather than adding one. They are not in anyone's request path; aiohttp's speed is what
the recording proxy and the reference gateway's model client need.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import cache
from typing import Any

import anyio
import httpx2

from ..defaults import (DEFAULT_CHAT_PATH, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MODEL, DEFAULT_RESPONSES_PATH,
                        DEFAULT_TIMEOUT_S)
from ..errors import HarnessError
from ..scenario.model import Disconnect
from ..wire.decode import read_body, read_stream
from ..wire.exchange import Exchange
from ..wire.sse import TeeStream, iter_sse
from .rewrites import Rewrites


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    responses_path: str = DEFAULT_RESPONSES_PATH
    chat_path: str = DEFAULT_CHAT_PATH
    model: str = DEFAULT_MODEL
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Sent with every request (API key, extra headers); never written to a report."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """From sending a request to the last byte of its answer."""
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    """How much of one answer is kept; a larger one is cut there (a finding)."""
    scripted: bool = True
    """Whether the target's model is the scripted upstream (False for live OpenAI)."""
    retries: int = 0
    """How often a request answered 429 or 5xx, or not at all, is sent again."""
    lacks: Mapping[str, str] = field(default_factory=dict)
    """Capabilities the gateway is known to lack -> why (from its profile)."""
    rewrites: Rewrites = field(default_factory=Rewrites)
    """How requests are rewritten for this gateway (from its profile)."""
    gateway: Mapping[str, Any] | None = None
    """Which gateway a profile started: `Profile.identity()` (profile, title, version,
    packages); None for a target the harness did not start from a profile."""

    @property
    def conversations_path(self) -> str:
        """Where the Conversations API is: beside the Responses endpoint, as on OpenAI
        (`/v1/responses` -> `/v1/conversations`, `/responses` -> `/conversations`)."""
        return self._beside_responses("conversations")

    @property
    def files_path(self) -> str:
        """Where the Files API is, beside the Responses endpoint as the Conversations API is."""
        return self._beside_responses("files")

    @property
    def vector_stores_path(self) -> str:
        """Where the Vector Stores API is, beside the Responses endpoint."""
        return self._beside_responses("vector_stores")

    def _beside_responses(self, name: str) -> str:
        return self.responses_path.rsplit("/", 1)[0] + "/" + name

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")


@dataclass(frozen=True)
class Form:
    """A `multipart/form-data` body: text fields and file parts (form name -> filename, bytes)."""

    fields: dict[str, str]
    files: dict[str, tuple[str, bytes]]

    def described(self) -> dict[str, Any]:
        """The form as JSON, for the exchange's record: the fields, and each file's name and size."""
        return self.fields | {name: {"filename": filename, "bytes": len(content)}
                              for name, (filename, content) in self.files.items()}


@dataclass(frozen=True)
class RawBody:
    """A body sent byte for byte with its content type (a malformed multipart form, say)."""

    content_type: str
    content: bytes

    def described(self) -> dict[str, Any]:
        """The body for the exchange's record: its content type, size and start as text."""
        return {"content_type": self.content_type, "bytes": len(self.content),
                "start": self.content[:300].decode("utf-8", errors="replace")}


@cache
def tls_context() -> ssl.SSLContext:
    """What the harness's HTTP clients trust: httpx's default (the system's trust store, or what
    `SSL_CERT_FILE` or `SSL_CERT_DIR` names), loaded once per process rather than by each client
    made (30 to 80 ms each here). The reference gateway keeps its own
    (`reference_impl.outbound.tls_context`): the harness does not import the gateway it judges."""
    return httpx2.create_ssl_context()


def http_client(timeout: httpx2.Timeout | float) -> httpx2.AsyncClient:
    """An HTTP client of the harness's (to a target, the fixtures, a gateway's API), with `timeout`."""
    return httpx2.AsyncClient(timeout=timeout, verify=tls_context())


CONNECT_DEADLINE_S = 10.0


async def unreachable(target: Target) -> str | None:
    """Why no connection to the target opens at all (no such host, nothing listening, no route
    within the connect deadline), or None when one does. Asked once per run, so a target that
    is not there is one clear error, not a finding in every unit."""
    url = httpx2.URL(target.base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    deadline_s = min(target.timeout_s, CONNECT_DEADLINE_S)
    try:
        with anyio.fail_after(deadline_s):
            connection = await anyio.connect_tcp(url.host, port)
    except TimeoutError:
        return f"no connection to {url.host}:{port} opened within {deadline_s:g}s"
    except OSError as error:
        cause = error.__cause__ if isinstance(error.__cause__, OSError) else error  # anyio wraps the attempts' error
        reason = os.strerror(cause.errno) if (cause.errno or 0) > 0 else cause.strerror or cause
        return f"cannot connect to {url.host}:{port} ({reason})"
    await connection.aclose()
    return None


class TargetRefuses(HarnessError):
    """The target would refuse every request of the run alike (see `refused_at_once`)."""


_NO_ENDPOINT = {404: "has no endpoint there", 405: "takes no POST there"}
_REFUSED = {401: "refuses the run's credentials", 403: "forbids the run's requests"}


async def refused_at_once(target: Target, http: httpx2.AsyncClient, chat: bool) -> str | None:
    """Why every request of the run would be refused alike, or None: asked once, before any
    scenario, with an empty body POSTed to each endpoint the run creates responses at (OpenAI
    answers it 400, naming what is missing). An answer 404 or 405 says the endpoint is at
    another path; 401 or 403, that the target wants other credentials. A gateway that takes
    the body further says nothing here: its scenarios say it."""
    paths = [("Responses", target.responses_path, "responses-path")]
    if chat:
        paths.append(("Chat Completions", target.chat_path, "chat-path"))
    for api, path, option in paths:
        url = target.url(path)
        try:
            answer = await http.post(url, json={}, headers=dict(target.headers))
        except httpx2.HTTPError:
            return None  # a transport failure is each scenario's finding, with what arrived
        said = f"POST {url} with an empty body answered HTTP {answer.status_code} ({answer.text[:200]!r})"
        if answer.status_code in _NO_ENDPOINT:
            return (f"{said}: the target {_NO_ENDPOINT[answer.status_code]}, so every scenario would fail alike; "
                    f"give the path of its {api} API with --{option} (pytest: --parity-{option}; now {path})")
        if answer.status_code in _REFUSED:
            return (f"{said}: the target {_REFUSED[answer.status_code]}, so every scenario would fail alike; give "
                    "its key with --api-key, or its headers with --header (pytest: --parity-api-key, "
                    "--parity-header)")
    return None


RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_WAIT_S = 30.0


Trigger = Callable[[], Awaitable[bool]]
"""Returns True when the client should go away (a condition on the fixtures came true), False
when it gave up waiting for that."""


async def send(client: httpx2.AsyncClient, target: Target, method: str, path: str, body: Any, *,
               disconnect: Disconnect | None = None, disconnect_when: Trigger | None = None,
               headers: dict[str, str] | None = None) -> Exchange:
    """Send one request (a JSON body, a `Form` as multipart, or a `RawBody`) and read the whole
    answer (JSON or SSE) within the target's timeout.
    An answer of 429 or 5xx, or none at all, is retried up to `target.retries` times, after the
    `Retry-After` the target asked for (`retry_after_s`; at most 30 s) or a doubling back-off;
    the exchange's `meta.attempts` says how many it took. With `disconnect` (and, for its `when`,
    the `disconnect_when` trigger), the connection is dropped early, on purpose: on a client of
    its own (with the shared client's timeouts), closed at once, since a cancelled request may
    otherwise linger in a shared pool."""
    headers = dict(target.headers) | (headers or {})
    if disconnect is not None:
        async with http_client(client.timeout) as own:
            return await _send(own, target, method, path, body, disconnect=disconnect,
                               disconnect_when=disconnect_when, headers=headers)
    attempt = 0
    while True:
        exchange = await _send(client, target, method, path, body, disconnect=None, disconnect_when=None,
                               headers=headers)
        if attempt >= target.retries or not _retryable(exchange):
            break
        await anyio.sleep(_retry_wait(exchange, attempt))
        attempt += 1
    if attempt:
        exchange.meta["attempts"] = attempt + 1
    return exchange


def _retryable(exchange: Exchange) -> bool:
    if exchange.transport_error is not None:
        return not exchange.sse
    return exchange.status in RETRYABLE_STATUSES


def _retry_wait(exchange: Exchange, attempt: int) -> float:
    asked = retry_after_s((exchange.headers or {}).get("retry-after", ""), datetime.now(UTC))
    return min(0.5 * 2**attempt if asked is None else asked, MAX_RETRY_WAIT_S)


def retry_after_s(value: str, now: datetime) -> float | None:
    """The wait in seconds a `Retry-After` value asks for (RFC 9110 §10.2.3): its delay-seconds,
    or the time from `now` until its HTTP-date (0 once that has passed); None for anything else."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        date = parsedate_to_datetime(value)
    except ValueError:
        return None
    return max((date.replace(tzinfo=date.tzinfo or UTC) - now).total_seconds(), 0.0)  # an HTTP-date is in GMT


async def _send(client: httpx2.AsyncClient, target: Target, method: str, path: str, body: Any, *,
                disconnect: Disconnect | None, disconnect_when: Trigger | None, headers: dict[str, str]) -> Exchange:
    url = target.url(path)
    exchange = Exchange(method=method, url=url,
                        request_body=body.described() if isinstance(body, Form | RawBody) else body)
    payload: dict[str, Any] = {"data": body.fields, "files": body.files} if isinstance(body, Form) else \
        {"content": body.content, "headers": headers | {"content-type": body.content_type}} \
        if isinstance(body, RawBody) else {"json": body}
    capture: TeeStream | None = None
    content_type: str | None = None
    started = time.monotonic()
    after_seconds = disconnect.after_seconds if disconnect else None
    after_event = disconnect.after_event if disconnect else None
    reading = anyio.CancelScope()

    async def go_away_when_triggered() -> None:
        assert disconnect_when is not None
        if await disconnect_when():
            exchange.disconnected = True
            reading.cancel()

    trigger = asyncio.create_task(go_away_when_triggered()) if disconnect_when is not None else None
    try:
        with reading, anyio.fail_after(after_seconds or target.timeout_s):
            async with client.stream(method, url, **({"headers": headers} | payload)) as response:
                exchange.status = response.status_code
                exchange.headers = dict(response.headers)
                content_type = response.headers.get("content-type")
                capture = TeeStream(response.aiter_bytes(), target.max_answer_bytes)
                if "text/event-stream" in (content_type or ""):
                    async for event in iter_sse(capture):
                        exchange.event_times_s.append(time.monotonic() - started)
                        if after_event is not None and event.type == after_event:
                            exchange.disconnected = True
                            break
                else:
                    async for _ in capture:
                        pass
    except TimeoutError:
        if after_seconds is not None:
            exchange.disconnected = True
        else:
            exchange.transport_error = f"no complete answer within {target.timeout_s:g}s"
    except httpx2.HTTPError as error:
        exchange.transport_error = f"{type(error).__name__}: {failure_reason(error)}"
    finally:
        if trigger is not None:
            trigger.cancel()
    if capture is not None:
        _keep(exchange, capture, content_type)
    exchange.elapsed_s = time.monotonic() - started
    return exchange


def failure_reason(error: BaseException) -> str:
    """The first cause in the chain that says something (a reset connection says nothing at
    the top)."""
    cause: BaseException | None = error
    while cause is not None:
        if text := str(cause) or (os.strerror(cause.errno) if isinstance(cause, OSError) and cause.errno else ""):
            return text
        cause = cause.__cause__ or cause.__context__
    return "the connection broke"


def _keep(exchange: Exchange, capture: TeeStream, content_type: str | None) -> None:
    """Put what arrived into the exchange: the stream (by its content type) or the body, and
    their defects."""
    if capture.overflowed:
        exchange.truncated_after = capture.size
        exchange.transport_error = (f"the answer is larger than the capture limit of {capture.limit / 2**20:g} MiB: "
                                    "the harness stopped reading it there (--max-answer-mb reads more)")
    cut_short = exchange.transport_error is not None or exchange.disconnected
    if "text/event-stream" in (content_type or ""):
        exchange.sse, exchange.defects = read_stream(capture.raw, cut_short)
    else:
        exchange.body, exchange.defects = read_body(capture.raw, content_type, cut_short)
