"""Waiting until a server answers: polled with a deadline, never a fixed sleep. Used for a
gateway the harness starts itself (`gateway_process`) and for any URL (`parity wait`, the
step of a CI job that waits for the servers it started in the background)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx2

from ..wire.redaction import redact_text

POLL_INTERVAL_S = 0.25
"""Pause between two attempts, so a server that is starting is not flooded."""
ATTEMPT_TIMEOUT_S = 10.0
"""How long one attempt may take; less when the deadline is nearer."""


def below_500(status: int) -> bool:
    """A server that answers with anything but a server error is up: a 404 or 405 from a
    gateway without a health route still comes from its application."""
    return status < 500


def poll_until_ready(method: str, url: str, *, timeout_s: float, ready: Callable[[int], bool] = below_500,
                     body: Any = None, headers: dict[str, str] | None = None,
                     check: Callable[[], None] = lambda: None) -> str | None:
    """Send `method url` until an answer's status is `ready`, for at most `timeout_s` (at least
    once): None once one is, else what the last attempt got (`HTTP 503: <start of the body>`,
    or the connection error). `check` runs before each attempt and may raise to stop waiting
    early (the process that was to answer has exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        check()
        try:
            answer = httpx2.request(method, url, json=body, headers=headers,
                                    timeout=min(ATTEMPT_TIMEOUT_S, max(deadline - time.monotonic(), POLL_INTERVAL_S)))
        except httpx2.HTTPError as error:
            last = f"{type(error).__name__}" + (f" ({error})" if str(error) else "")
        else:
            if ready(answer.status_code):
                return None
            last = f"HTTP {answer.status_code}: {redact_text(answer.text[:200])}"
        if (left := deadline - time.monotonic()) <= 0:
            return last
        time.sleep(min(POLL_INTERVAL_S, left))
