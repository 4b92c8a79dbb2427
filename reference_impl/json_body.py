"""Reading a request's JSON body, bounded, refused the way OpenAI refuses a body it cannot parse.

Bounds: at most `MAX_BODY_BYTES` are read (`openai_contract.request_body`: a larger body is a
413 before the rest is read), and the value is strict JSON as `openai_contract.strict_json`, the
harness's reader of answers too, has it: at most `MAX_DEPTH` (100) levels deep (the checks after
it recurse), no `NaN`, `Infinity` or number too large for a double (it could not be sent on as
JSON), no lone UTF-16 surrogate in a string (nor as UTF-8). Each is answered in OpenAI's error
envelope, a 400 naming the problem, never with a 500.

What the event loop spends on a body is bounded: a body is parsed by the standard library's C
scanner, on the loop up to `PARSE_ON_THE_LOOP_BYTES` and in a worker thread beyond, there a
member of the top-level value's containers at a time, each member in one call into C, so that
the interpreter can hand the loop its turn between them (a single call for the whole body would
hold the loop for as long as it takes). A route that bounds how many members a top-level array
or object may have (`max_members`) has that container parsed a member at a time, and refused
once it holds one too many, before the rest of it is parsed. The walks that follow in Python
(the depth, the surrogates; the request schema's check through `JsonBody.checked`) run on the
loop only for a small body and in a worker thread for a larger one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any, TypeVar

from starlette.requests import Request

from ..openai_contract.request_body import read_bytes
from ..openai_contract.strict_json import DECODER, NotStrictJson, check, suspicions, too_deep
from .errors import InvalidRequest
from .refusals import invalid_type

T = TypeVar("T")
CHECK_ON_THE_LOOP_BYTES = 1024
"""Checking a body against the request schema costs up to about 1.3 µs a byte; up to this size
that is less than handing it to a worker thread costs the loop (about 0.1 ms), and at most about
a millisecond, so it is checked on the loop."""
PARSE_ON_THE_LOOP_BYTES = 256 * 1024
"""The C scanner parses this much in about a millisecond: a larger body is parsed off the loop."""
_UNPARSABLE = "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload."
_WHITESPACE = re.compile(r"[ \t\n\r]*")


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


class TooManyMembers(InvalidRequest):
    """A bounded top-level array or object with more members than its bound, found by counting
    before the rest of it is parsed (so how many it has in all is not known)."""

    def __init__(self, param: str, bound: int, is_array: bool) -> None:
        if is_array:
            super().__init__(f"Invalid '{param}': array too long. Expected an array with maximum length {bound}, "
                             f"but got an array with more than {bound} items instead.", param=param,
                             code="array_above_max_length")
        else:
            super().__init__(f"Invalid '{param}': too many properties. Expected an object with at most {bound} "
                             f"properties, but got an object with more than {bound} properties instead.",
                             param=param, code="object_above_max_properties")


async def read_json(request: Request, max_members: Mapping[str, int] | None = None) -> JsonBody:
    """The body, parsed; a 413 or 400 saying what is wrong. `max_members`: the most members the
    top-level object's arrays and objects of those keys may have (a `TooManyMembers` beyond)."""
    return await parse_json(await read_bytes(request), max_members)


async def parse_json(raw: bytes, max_members: Mapping[str, int] | None = None) -> JsonBody:
    """`raw` (a body, or a WebSocket frame) parsed as `read_json` parses a body; a 400 saying
    what is wrong."""
    if len(raw) > PARSE_ON_THE_LOOP_BYTES:
        return JsonBody(await asyncio.to_thread(_readable, raw, max_members or {}), len(raw))
    text, value = _parsed(raw, max_members or {}, stepwise=False)
    body = JsonBody(value, len(raw))
    deep, surrogates = suspicions(text)
    if deep or surrogates:
        await body.checked(lambda _: _checked(value, deep, surrogates))
    return body


async def read_json_object(request: Request, max_members: Mapping[str, int] | None = None) -> JsonBody:
    """The body as a JSON object (an empty body is `{}`); a 400 naming `body` for any other value
    (`max_members`: see `read_json`)."""
    body = await read_json(request, max_members)
    if body.value is None:
        return JsonBody({}, body.size)
    if not isinstance(body.value, dict):
        raise invalid_type("body", "an object", body.value)
    return body


def _readable(raw: bytes, max_members: Mapping[str, int]) -> Any:
    """The value of a large body, parsed a member at a time and checked, or a 400 (in a worker
    thread: see the module's docstring)."""
    text, value = _parsed(raw, max_members, stepwise=True)
    if any(suspected := suspicions(text)):
        _checked(value, *suspected)
    return value


def _parsed(raw: bytes, max_members: Mapping[str, int], stepwise: bool) -> tuple[str, Any]:
    """The text of `raw` and its value, or a 400; `stepwise`: the top-level value's containers
    a member at a time (see `_counted`)."""
    try:
        text = raw.decode("utf-8")
        value = _counted(text, max_members, stepwise) if max_members or stepwise else DECODER.decode(text or "null")
    except RecursionError:
        raise _refused(too_deep()) from None
    except NotStrictJson as problem:
        raise _refused(problem) from None
    except ValueError as error:
        raise InvalidRequest(_UNPARSABLE) from error
    return text, value


def _checked(value: Any, deep: bool, surrogates: bool) -> None:
    """`strict_json.check`, its refusal a 400."""
    try:
        check(value, deep, surrogates)
    except NotStrictJson as problem:
        raise _refused(problem) from None


def _refused(problem: NotStrictJson) -> InvalidRequest:
    """The 400 for a body that is not strict JSON, naming the problem ("It nests deeper than 100 levels.")."""
    return InvalidRequest(f"{_UNPARSABLE} It {problem.message}.")


def _counted(text: str, max_members: Mapping[str, int], stepwise: bool = False) -> Any:
    """`text` parsed as `json.loads` would (a `ValueError` where it would raise one), its
    top-level object's containers under `max_members` a member at a time, up to their bound;
    `stepwise`: the top-level value and every container in it a member at a time."""
    at = _skip(text, 0)
    if not text.startswith("{", at) and not (stepwise and text.startswith("[", at)):
        return DECODER.decode(text or "null")
    value, end = _container(text, at, None, max_members, stepwise=stepwise)
    if _skip(text, end) != len(text):
        raise ValueError("Extra data")
    return value


def _container(text: str, at: int, bound: int | None, max_members: Mapping[str, int], param: str = "", *,
               stepwise: bool = False) -> tuple[Any, int]:
    """The object or array at `at` and where it ends: a member at a time, each by the C scanner,
    refused once it has `bound + 1` members (None: no bound; a key named again is one member, as
    `json.loads` keeps the last). Its own containers named in `max_members` are read so, with
    `stepwise` all of them (their members each in one call into C)."""
    is_object = text.startswith("{", at)
    close = "}" if is_object else "]"
    members: Any = {} if is_object else []
    at = _skip(text, at + 1)
    if text.startswith(close, at):
        return members, at + 1
    while True:
        if bound is not None and len(members) == bound and not is_object:  # an object's next key may be one it has
            raise TooManyMembers(param, bound, True)
        if is_object:
            if not text.startswith('"', at):
                raise ValueError("Expecting property name enclosed in double quotes")
            key, at = scanstring(text, at + 1)
            at = _skip(text, at)
            if not text.startswith(":", at):
                raise ValueError("Expecting ':' delimiter")
            at = _skip(text, at + 1)
        limit = max_members.get(key) if is_object else None
        if (limit is not None or stepwise) and text.startswith(("{", "["), at):
            member, at = _container(text, at, limit, {}, key if is_object else param)
        else:
            try:
                member, at = DECODER.scan_once(text, at)
            except StopIteration:
                raise ValueError("Expecting value") from None
        if is_object:
            members[key] = member
            if bound is not None and len(members) > bound:
                raise TooManyMembers(param, bound, False)
        else:
            members.append(member)
        at = _skip(text, at)
        if text.startswith(close, at):
            return members, at + 1
        if not text.startswith(",", at):
            raise ValueError("Expecting ',' delimiter")
        at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    assert match is not None  # it matches the empty string
    return match.end()
