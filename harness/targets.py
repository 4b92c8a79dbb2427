"""Targets (what the harness talks to) and sending one request to them.

Every request has a deadline. A target that hangs, resets the connection or cuts a stream
short gives an `Exchange` with `transport_error` set and whatever arrived: a finding for the
report, never a stuck or crashed run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from .exchange import Exchange
from .rewrites import Rewrites
from .scenario import Disconnect
from .sse import TeeStream, iter_sse

DEFAULT_MODEL = "parity-model"


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    responses_path: str = "/v1/responses"
    chat_path: str = "/v1/chat/completions"
    model: str = DEFAULT_MODEL
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Sent with every request (API key, extra headers); never written to a report."""
    timeout_s: float = 60.0
    scripted: bool = True
    """Whether the target's model is the scripted upstream (False for live OpenAI)."""
    retries: int = 0
    """How often a request answered 429 or 5xx, or not at all, is sent again."""
    lacks: Mapping[str, str] = field(default_factory=dict)
    """Capabilities the gateway is known to lack -> why (from its profile)."""
    rewrites: Rewrites = field(default_factory=Rewrites)
    """How requests are rewritten for this gateway (from its profile)."""

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")


RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_WAIT_S = 30.0


Trigger = Callable[[], Awaitable[bool]]
"""Returns True when the client should go away (a condition on the fixtures came true), False
when it gave up waiting for that."""


async def send(client: httpx.AsyncClient, target: Target, method: str, path: str, body: Any, *,
               disconnect: Disconnect | None = None, disconnect_when: Trigger | None = None,
               headers: dict[str, str] | None = None) -> Exchange:
    """Send one request and read the whole answer (JSON or SSE) within the target's timeout.
    An answer of 429 or 5xx, or none at all, is retried up to `target.retries` times, after the
    `Retry-After` the target asked for (at most 30 s) or a doubling back-off; the exchange's
    `meta.attempts` says how many it took. With `disconnect` (and, for its `when`, the
    `disconnect_when` trigger), the connection is dropped early, on purpose: on a client of its
    own, closed at once, since a cancelled request may otherwise linger in a shared pool."""
    headers = dict(target.headers) | (headers or {})
    if disconnect is not None:
        async with httpx.AsyncClient() as own:
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
    backoff = min(0.5 * 2**attempt, MAX_RETRY_WAIT_S)
    try:
        return min(float((exchange.headers or {})["retry-after"]), MAX_RETRY_WAIT_S)
    except (KeyError, ValueError):
        return backoff


async def _send(client: httpx.AsyncClient, target: Target, method: str, path: str, body: Any, *,
                disconnect: Disconnect | None, disconnect_when: Trigger | None, headers: dict[str, str]) -> Exchange:
    url = target.url(path)
    exchange = Exchange(method=method, url=url, request_body=body)
    tee: TeeStream | None = None
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
            async with client.stream(method, url, json=body, headers=headers) as response:
                exchange.status = response.status_code
                exchange.headers = dict(response.headers)
                if "text/event-stream" in response.headers.get("content-type", ""):
                    tee = TeeStream(response.aiter_bytes())
                    async for event in iter_sse(tee):
                        if after_event is not None and event.type == after_event:
                            exchange.disconnected = True
                            break
                else:
                    raw = await response.aread()
                    exchange.body = _decode(raw)
    except TimeoutError:
        if after_seconds is not None:
            exchange.disconnected = True
        else:
            exchange.transport_error = f"no complete answer within {target.timeout_s:g}s"
    except httpx.HTTPError as error:
        exchange.transport_error = f"{type(error).__name__}: {error}"
    finally:
        if trigger is not None:
            trigger.cancel()
    if tee is not None:
        exchange.sse = tee.text
    exchange.elapsed_s = time.monotonic() - started
    return exchange


def _decode(raw: bytes) -> Any:
    """The body as JSON, else as text; a JSON `null` stays the text `null`, so it is not taken
    for a body that was never captured."""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")
    return raw.decode() if decoded is None else decoded
