"""Expectations of a stream: its event types in order and the event that ends it. Both are
judged on streamed answers only; stated on a step that never streams, they are an error."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...model.contract import Contract
from ...model.findings import Finding, Kind
from ...wire.exchange import TERMINAL_EVENTS
from .. import vocabulary
from .spec import NOT_STATED, Answer, Expectation, Stated, list_diff


class Terminal(Expectation):
    name = "terminal"
    annotation = str | None
    declared = Field(default=None, description="The stream's terminal event type (streams only).")
    kind = Kind.EVENT_SEQUENCE
    streams_only = True

    def lint(self, value: str, where: str, at: Stated) -> None:
        at.checks.known(where, value, TERMINAL_EVENTS, "a terminal event type")

    def compare(self, wanted: str, answer: Answer) -> list[Finding]:
        stream = answer.contract.stream
        got = stream.terminal if stream else None
        return [] if got == wanted else [self.mismatch(f"the stream ends with {got}, expected {wanted}", wanted, got)]

    def project(self, contract: Contract) -> Any:
        stream = contract.stream
        return stream.terminal if stream is not None and stream.terminal is not None else NOT_STATED


class Events(Expectation):
    name = "events"
    annotation = list[str] | None
    declared = Field(default=None, description="The stream's event types in order, runs of one type collapsed.")
    kind = Kind.EVENT_SEQUENCE
    streams_only = live_model_decides = True

    def lint(self, value: list[str], where: str, at: Stated) -> None:
        for index, event in enumerate(value):
            at.checks.known(f"{where}[{index}]", event, vocabulary.event_types(),
                            "a stream event type the openai SDK knows")

    def compare(self, wanted: list[str], answer: Answer) -> list[Finding]:
        got = list(answer.contract.stream.events) if answer.contract.stream else []
        if got == wanted:
            return []
        return [self.mismatch(f"event sequence differs: {list_diff(wanted, got)}", wanted, got)]

    def project(self, contract: Contract) -> Any:
        return NOT_STATED if contract.stream is None else list(contract.stream.events)


SPECS = (Terminal(), Events())
