"""Expectations of how the answer is framed: its HTTP status and its error envelope."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...model.contract import Contract
from ...model.findings import Finding, Kind
from ..strict import Strict
from .spec import NOT_STATED, Answer, Expectation


class HttpStatus(Expectation):
    name = "http_status"
    annotation = int | None
    kind = Kind.STATUS

    def compare(self, wanted: int, answer: Answer) -> list[Finding]:
        got = answer.contract.http_status
        return [] if got == wanted else [self.mismatch(f"HTTP status {got}, expected {wanted}", wanted, got)]

    def project(self, contract: Contract) -> Any:
        return NOT_STATED if contract.http_status is None else contract.http_status


class ErrorExpect(Strict):
    """The error envelope's fields; a field left out is not compared, `null` means null."""

    type: str | None = None
    code: str | None = None
    param: str | None = None
    message_contains: str | None = Field(default=None, description="Text the error's message contains.")


class Error(Expectation):
    name = "error"
    annotation = ErrorExpect | None
    kind = Kind.ERROR_ENVELOPE

    def compare(self, wanted: ErrorExpect, answer: Answer) -> list[Finding]:
        error = answer.contract.error
        if error is None:
            return [self.mismatch('no error envelope ({"error": {message, type, param, code}}) in the answer',
                                  wanted.model_dump(), None)]
        findings = [self.mismatch(f"error.{name} is {got!r}, expected {want!r}", want, got, name)
                    for name in sorted(wanted.model_fields_set - {"message_contains"})
                    if (want := getattr(wanted, name)) != (got := getattr(error, name))]
        if not error.has_message:
            findings.append(self.mismatch("error.message is empty", "non-empty", "", "message"))
        text = wanted.message_contains
        if text is not None and text not in (error.message or ""):
            findings.append(self.mismatch(f"error.message {error.message!r} does not contain {text!r}", text,
                                          error.message, "message_contains"))
        return findings

    def project(self, contract: Contract) -> Any:
        error = contract.error
        return NOT_STATED if error is None else {"type": error.type, "code": error.code, "param": error.param}


SPECS = (HttpStatus(), Error())
