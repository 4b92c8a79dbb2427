"""Expectations of the answer's body as a whole and its headers, whatever the endpoint."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...model.findings import Finding, Kind
from .spec import Answer, Expectation, subset_mismatches


class Body(Expectation):
    name = "body"
    annotation = dict[str, Any] | None
    declared = Field(default=None, description="A part of the JSON body of any endpoint (in a stream, the terminal "
                                               "event's Response): every key given must be there with a matching "
                                               "value; lists match item by item.")
    kind = Kind.RESPONSE_FIELD

    def compare(self, wanted: dict[str, Any], answer: Answer) -> list[Finding]:
        body = answer.exchange.response_object() if answer.streamed else answer.exchange.body
        return [self.mismatch(f"the body differs at {where}", wanted, body)
                for where in subset_mismatches(wanted, body)]


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """`type/subtype` in lower case, and the parameters (names and charset values lower case)."""
    kind, *parameters = value.split(";")
    parsed = {}
    for parameter in parameters:
        name, _, argument = parameter.strip().partition("=")
        argument = argument.strip().strip('"')
        parsed[name.strip().lower()] = argument.lower() if name.strip().lower() == "charset" else argument
    return kind.strip().lower(), parsed


def header_matches(name: str, wanted: str, actual: str | None) -> bool:
    """Whether a header value is the one wanted: `content-type` as a media type (the
    parameters the expectation gives must be there too), any other exactly."""
    if actual is None:
        return False
    if name.lower() != "content-type":
        return actual == wanted
    (want_type, want_parameters), (got_type, got_parameters) = _media_type(wanted), _media_type(actual)
    return want_type == got_type and all(got_parameters.get(k) == v for k, v in want_parameters.items())


class Headers(Expectation):
    name = "headers"
    annotation = dict[str, str] | None
    declared = Field(default=None, description="Response headers that must have these values; names in any case, "
                                               "and `content-type` compared as a media type (parameters only where "
                                               "given).")
    kind = Kind.RESPONSE_FIELD

    def compare(self, wanted: dict[str, str], answer: Answer) -> list[Finding]:
        received = {name.lower(): value for name, value in (answer.exchange.headers or {}).items()}
        return [self.mismatch(f"header {name} is {got!r}, expected {value!r}", value, got)
                for name, value in wanted.items()
                if not header_matches(name, value, got := received.get(name.lower()))]


SPECS = (Body(), Headers())
