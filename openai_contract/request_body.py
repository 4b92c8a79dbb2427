"""Reading an HTTP request's body, bounded: at most `MAX_BODY_BYTES` (or the reader's own limit)
are read, and a larger body is refused with a `RequestTooLarge` as soon as it is declared or
read larger, before the rest of it is read. The reference gateway reads every body so, and the
harness's recording proxy reads what it forwards so."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

MAX_BODY_BYTES = 16 * 2**20
"""The largest request body the reference gateway reads (the proxy's default limit too)."""


class RequestTooLarge(Exception):
    """A body larger than `limit`: the 413 that answers it, in OpenAI's error envelope (`body()`)."""

    status = 413
    code = "request_too_large"

    def __init__(self, size: int, limit: int, *, at_least: bool = False) -> None:
        self.message = (f"The request body is {'more than ' if at_least else ''}{size:,} bytes; this gateway "
                        f"accepts at most {limit:,}.")
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": "invalid_request_error", "param": None, "code": self.code}}


def check_declared_size(request: Request, limit: int) -> None:
    """A `RequestTooLarge` when the request declares a body larger than `limit` (`content-length`)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(int(declared), limit)


async def read_bytes(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, or a `RequestTooLarge` as soon as it is declared or read larger than `limit` (a
    chunked body is counted as it arrives)."""
    check_declared_size(request, limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise RequestTooLarge(len(raw), limit, at_least=True)
    return bytes(raw)
