"""Reading a request's JSON body, bounded, refused the way OpenAI refuses a body it cannot parse.

Bounds: at most `MAX_BODY_BYTES` are read (a larger body is a 413 before the rest is read), the
value nests at most `MAX_DEPTH` levels (the checks after it recurse), and it is JSON as RFC 8259
has it: no `NaN` or `Infinity`, no lone UTF-16 surrogate in a string (it could not be sent on
as UTF-8). Each is answered in OpenAI's error envelope, never with a 500.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import Request

from .documents import nesting_depth
from .errors import InvalidRequest, RequestTooLarge

T = TypeVar("T")
MAX_BODY_BYTES = 16 * 2**20
CHECK_ON_THE_LOOP_BYTES = 1024
"""Checking a body against the request schema costs up to about 1.3 µs a byte; up to this size
that is less than handing it to a worker thread costs the loop (about 0.1 ms), and at most about
a millisecond, so it is checked on the loop."""
MAX_DEPTH = 100
"""A Response request nests about 10 levels, a strict JSON Schema in it at most about 30."""
_UNPARSABLE = "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload."
_LONE_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def read_bytes(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, or a 413 as soon as it is declared or read larger than `limit` (a chunked body
    is counted as it arrives)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(int(declared), limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise RequestTooLarge(len(raw), limit, at_least=True)
    return bytes(raw)


@dataclass(frozen=True)
class JsonBody:
    """A request's JSON value (None for an empty body) and its size in bytes."""

    value: Any
    size: int

    async def checked(self, check: Callable[[Any], T]) -> T:
        """`check(value)`: on the loop for a small body, in a worker thread for a larger one (a long
        input takes a while to check)."""
        if self.size <= CHECK_ON_THE_LOOP_BYTES:
            return check(self.value)
        return await asyncio.to_thread(check, self.value)


async def read_json(request: Request) -> JsonBody:
    """The body, parsed; a 413 or 400 saying what is wrong."""
    raw = await read_bytes(request)
    try:
        text = raw.decode("utf-8")
        value = json.loads(text or "null", parse_constant=_not_json)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as error:
        raise InvalidRequest(_UNPARSABLE) from error
    if _LONE_SURROGATE.search(text):
        raise InvalidRequest(f"{_UNPARSABLE} A string holds a lone UTF-16 surrogate, which is not text.")
    if nesting_depth(value) > MAX_DEPTH:
        raise _too_deep()
    return JsonBody(value, len(raw))


def _too_deep() -> InvalidRequest:
    return InvalidRequest(f"{_UNPARSABLE} It nests deeper than {MAX_DEPTH} levels.")
