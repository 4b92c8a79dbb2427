"""Findings: what differs, how much it matters, and where.

A finding is about the target (its answer differs from the expectation, its stream breaks a
rule). When the harness itself cannot do its job (a broken scenario, a placeholder that
points nowhere), that is a `HarnessError`, never a finding.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import IntEnum, StrEnum
from typing import Any


class Severity(IntEnum):
    NOTE = 0
    """Drift or a model-dependent difference: worth knowing, never a failure."""
    WARNING = 1
    """Differs from OpenAI in a way most clients survive."""
    ERROR = 2
    """Breaks a client or contradicts OpenAI."""

    def __str__(self) -> str:
        return self.name.lower()


class Kind(StrEnum):
    """What differs."""

    TRANSPORT = "transport"
    STATUS = "status"
    ERROR_ENVELOPE = "error_envelope"
    RESPONSE_FIELD = "response_field"
    ITEMS = "items"
    INTERRUPT = "interrupt"
    EVENT_SEQUENCE = "event_sequence"
    STREAM_GRAMMAR = "stream_grammar"
    SCHEMA = "schema"
    UPSTREAM_REQUEST = "upstream_request"
    SECRET = "secret"
    VARIANT = "variant"


@dataclass(frozen=True)
class Finding:
    kind: Kind
    severity: Severity
    rule: str
    """The check that produced it, e.g. `expect.output` or `grammar.sequence_numbers`."""
    message: str
    expected: Any = None
    actual: Any = None
    known: bool = False
    """The target's baseline lists this divergence: reported, but it fails nothing."""

    @property
    def fails(self) -> bool:
        return self.severity >= Severity.ERROR and not self.known

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"], data["severity"] = str(self.kind), str(self.severity)
        return data


_POSITIONS = re.compile(r"\b(event|chunk) \d+|\[\d+\]")


def fold_positions(message: str) -> str:
    """`message` with event and chunk numbers and list indexes generalised (`event N`, `[i]`),
    so findings that differ only in where they occurred group together."""
    return _POSITIONS.sub(lambda m: f"{m[1]} N" if m[1] else "[i]", message)


class HarnessError(Exception):
    """The harness could not run something as written (not a fault of the target)."""
