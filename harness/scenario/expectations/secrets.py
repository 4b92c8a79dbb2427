"""The expectation that an answer never shows what it must not (a secret the request gave)."""

from __future__ import annotations

import json

from pydantic import Field

from ...model.findings import Finding, Kind, Severity
from .spec import Answer, Expectation


class AbsentText(Expectation):
    name = "absent_text"
    annotation = list[str]
    declared = Field(default_factory=list, description="Strings the raw answer (body or stream) must not contain.")
    kind = Kind.SECRET

    def stated(self, value: list[str], written: bool) -> bool:
        return bool(value)

    def compare(self, wanted: list[str], answer: Answer) -> list[Finding]:
        """One finding per string shown, none of which repeats it."""
        exchange = answer.exchange
        raw = (exchange.sse if answer.streamed else json.dumps(exchange.body)) or ""
        return [Finding(self.kind, Severity.ERROR, self.rule(), "the answer contains a value it must never show "
                        "(a secret given in the request)") for text in wanted if text in raw]


SPECS = (AbsentText(),)
