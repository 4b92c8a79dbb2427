"""Reading a request's JSON body, bounded, refused the way OpenAI refuses a body it cannot parse.

Bounds: at most `MAX_BODY_BYTES` are read (`openai_contract.request_body`: a larger body is a
413 before the rest is read), the value nests at most `MAX_DEPTH` levels (the checks after it
recurse), and it is JSON as RFC 8259 has it: no `NaN` or `Infinity`, no lone UTF-16 surrogate in
a string (it could not be sent on as UTF-8). Each is answered in OpenAI's error envelope, never with a 500.

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
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any, TypeVar

from starlette.requests import Request

from ..openai_contract.documents import nesting_depth
from ..openai_contract.request_body import read_bytes
from .errors import InvalidRequest
from .refusals import invalid_type

T = TypeVar("T")
CHECK_ON_THE_LOOP_BYTES = 1024
"""Checking a body against the request schema costs up to about 1.3 µs a byte; up to this size
that is less than handing it to a worker thread costs the loop (about 0.1 ms), and at most about
a millisecond, so it is checked on the loop."""
PARSE_ON_THE_LOOP_BYTES = 256 * 1024
"""The C scanner parses this much in about a millisecond: a larger body is parsed off the loop."""
MAX_DEPTH = 100
"""A Response request nests about 10 levels, a strict JSON Schema in it at most about 30."""
_UNPARSABLE = "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload."
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""Where a lone surrogate could come from: only a `\\uD800`..`\\uDFFF` escape makes one."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


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
    deep, surrogates = _suspicions(text)
    if deep or surrogates:
        await body.checked(lambda _: _check_readable(value, deep, surrogates))
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
    if any(suspicions := _suspicions(text)):
        _check_readable(value, *suspicions)
    return value


def _parsed(raw: bytes, max_members: Mapping[str, int], stepwise: bool) -> tuple[str, Any]:
    """The text of `raw` and its value, or a 400; `stepwise`: the top-level value's containers
    a member at a time (see `_counted`)."""
    try:
        text = raw.decode("utf-8")
        value = _counted(text, max_members, stepwise) if max_members or stepwise else _DECODER.decode(text or "null")
    except RecursionError:
        raise _too_deep() from None
    except ValueError as error:
        raise InvalidRequest(_UNPARSABLE) from error
    return text, value


def _suspicions(text: str) -> tuple[bool, bool]:
    """Whether `text` could nest deeper than `MAX_DEPTH`, and could hold a lone surrogate: counts
    at the speed of C that spare the walks unless the text could hold what they look for."""
    return text.count("[") + text.count("{") > MAX_DEPTH, _MAYBE_SURROGATE.search(text) is not None


def _check_readable(value: Any, deep: bool, surrogates: bool) -> None:
    """A 400 for a value nested deeper than `MAX_DEPTH` (if it could be `deep`) or holding a lone
    surrogate (if its text has `surrogates` escapes)."""
    if deep and nesting_depth(value) > MAX_DEPTH:
        raise _too_deep()
    if surrogates and _has_lone_surrogate(value):
        raise InvalidRequest(f"{_UNPARSABLE} A string holds a lone UTF-16 surrogate, which is not text.")


def _counted(text: str, max_members: Mapping[str, int], stepwise: bool = False) -> Any:
    """`text` parsed as `json.loads` would (a `ValueError` where it would raise one), its
    top-level object's containers under `max_members` a member at a time, up to their bound;
    `stepwise`: the top-level value and every container in it a member at a time."""
    at = _skip(text, 0)
    if not text.startswith("{", at) and not (stepwise and text.startswith("[", at)):
        return _DECODER.decode(text or "null")
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
                member, at = _DECODER.scan_once(text, at)
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


def _too_deep() -> InvalidRequest:
    return InvalidRequest(f"{_UNPARSABLE} It nests deeper than {MAX_DEPTH} levels.")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string of `value` (a key or a value) holds a UTF-16 surrogate: the JSON decoder
    joins the escapes of a pair into one character, so what is left of one is lone."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            pending.extend(node)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
