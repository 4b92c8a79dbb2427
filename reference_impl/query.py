"""Query parameters as OpenAI's description types them, read from a request's query string, or
OpenAI's 400 naming the parameter: `include` (the SDK's `ResponseIncludable` values, sent as
`include=a` or as the SDK's `include[]=a`), booleans (`true` or `false`) and integers."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import QueryParams

from ..openai_contract.request_schema import sdk_literal
from .errors import InvalidRequest
from .refusals import invalid_value

_SHOWN = 40
"""How much of a bad value an error message repeats."""


def _shown(raw: str) -> str:
    return raw if len(raw) <= _SHOWN else f"{raw[:_SHOWN]}..."


def included(query: QueryParams) -> frozenset[str]:
    """The `include` values, each one OpenAI describes."""
    values = [*query.getlist("include"), *query.getlist("include[]")]
    for value in values:
        if value not in (includable := sdk_literal("ResponseIncludable")):
            raise invalid_value("include", _shown(value), includable)
    return frozenset(values)


def boolean(query: Mapping[str, str], name: str) -> bool | None:
    """A boolean parameter (None when it is not given)."""
    raw = query.get(name)
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise InvalidRequest(f"Invalid type for '{name}': expected a boolean, but got '{_shown(raw)}'.", param=name,
                             code="invalid_type")
    return raw == "true"


def integer(query: Mapping[str, str], name: str) -> int | None:
    """An integer parameter (None when it is not given)."""
    raw = query.get(name)
    if raw is None:
        return None
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
        raise InvalidRequest(f"Invalid type for '{name}': expected an integer, but got '{_shown(raw)}'.", param=name,
                             code="invalid_type")
    return int(raw)
