"""OpenAI's 400 for a request that breaks its description, as a value: `Violation` holds the
fields OpenAI's error envelope gives it (message, param, code; its type is always
`invalid_request_error`), worded as OpenAI words it (contract notes §4.2). The gateway raises
one as its `InvalidRequest`; the harness's probe asks only whether there is one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One 400 of OpenAI's: its `message`, the `param` path it names (`input[0].content`), its `code`."""

    message: str
    param: str | None = None
    code: str | None = None


def json_type(value: Any) -> str:
    """How OpenAI names a JSON value's type in its messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def missing(param: str) -> Violation:
    return Violation(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_type(param: str, expected: str, value: Any) -> Violation:
    return Violation(f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
                     param=param, code="invalid_type")


def invalid_value(param: str, value: Any, supported: Iterable[Any], *, reported_at: str | None = None) -> Violation:
    quoted = [f"'{s}'" for s in supported]
    listing = " and ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
    return Violation(f"Invalid value: '{value}'. Supported values are: {listing}.", param=reported_at or param,
                     code="invalid_value")


def unknown(param: str, key: str, known: Iterable[str]) -> Violation:
    message = f"Unknown parameter: '{param}'."
    if close := difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75):
        message += f" Did you mean '{close[0]}'?"
    return Violation(message, param=param, code="unknown_parameter")
