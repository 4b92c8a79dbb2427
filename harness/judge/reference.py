"""Holding an answer against an earlier one (a golden set's record of the step, or the captured
answer `parity replay` sends again): the earlier answer is projected to a contract, which states
every field it holds (`expectation_of`), and the expectations compare the answer with it, each
finding named `golden.<field>`. Where two answers differ in a way most clients survive (an HTTP
status of the same class, `error.param`, whether `usage` is present) it is a warning; parts a
live model decides differ as notes when the earlier answer came from a live model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..model.contract import Contract, StreamReference, project_answer, streamed_sequence
from ..model.findings import Finding, Kind, Rule, Severity
from ..scenario.expectations import compare, expectation_of
from ..wire.exchange import Exchange
from .compare import model_dependent_as_notes


@dataclass(frozen=True)
class Reference:
    """An earlier answer to hold one against."""

    exchange: Exchange | None
    """None: the reference holds no record of this step (a note)."""
    label: str
    """How findings name it: `golden openai`, `captured 0003.json`."""
    recorded: str | None = None
    """For a golden set, when it was recorded (`2026-03-01T10:00:00`, or `at an unknown date`): a
    field its Response has and the answer lacks is then a warning, since a client may rely on what
    the golden's target sent. None for a captured answer, held against by its contract only."""
    model_dependent: Sequence[str] = ()
    """The expectations a live model decided when the reference was recorded: differences are notes."""


def compared_with_reference(reference: Reference, actual: Contract,
                            exchange: Exchange) -> tuple[list[Finding], StreamReference | None]:
    """How the answer differs from `reference`, and, for a streamed answer, the reference's
    sequence of events to show beside it (None when it has none)."""
    earlier = reference.exchange
    if earlier is None:
        return [Finding(Kind.VARIANT, Severity.NOTE, "golden.missing",
                        f"{reference.label} has no record of this step")], None
    if earlier.transport_error or earlier.disconnected:
        return [Finding(Kind.VARIANT, Severity.NOTE, "golden.incomplete",
                        f"{reference.label} did not arrive whole; nothing to compare with")], None
    findings = compare_with(earlier, actual, exchange, reference.label, reference.model_dependent)
    if reference.recorded is not None:
        findings += _fields_it_lacks(earlier, exchange, reference.label, reference.recorded)
    sequence = streamed_sequence(project_answer(earlier)) if exchange.streamed else None
    return findings, StreamReference(sequence, reference.label) if sequence is not None else None


_SAME_CLASS_IS_A_WARNING = "golden.http_status"
_WARNINGS = frozenset({"golden.error.param", "golden.usage"})
"""Differences most clients survive."""


def compare_with(golden: Exchange, actual: Contract, exchange: Exchange, label: str,
                 model_dependent: Sequence[str] = ()) -> list[Finding]:
    """How an answer differs from a golden one, each finding named `golden.<field>`."""
    wanted = project_answer(golden)
    findings = model_dependent_as_notes(compare(expectation_of(wanted), actual, exchange), model_dependent)
    if (wanted.stream is None) != (actual.stream is None):
        findings.append(Finding(Kind.EVENT_SEQUENCE, Severity.ERROR, Rule("expect", ("events",)), "the answer "
                                + ("streams" if actual.stream is not None else "does not stream"),
                                expected=wanted.stream is not None, actual=actual.stream is not None))
    judged = []
    for finding in findings:
        rule = finding.rule.under("golden")
        severity = finding.severity
        if severity > Severity.WARNING and (rule in _WARNINGS or (
                rule == _SAME_CLASS_IS_A_WARNING and _status_class(wanted.http_status) ==
                _status_class(actual.http_status))):
            severity = Severity.WARNING
        judged.append(replace(finding, rule=rule, severity=severity, message=f"{finding.message} ({label})"))
    return judged


def _status_class(status: int | None) -> str:
    return f"{status // 100}xx" if isinstance(status, int) else "none"


def _fields_it_lacks(golden: Exchange, actual: Exchange, label: str, recorded: str) -> list[Finding]:
    """A warning naming the fields the golden Response has and the answer's lacks."""
    wanted, got = golden.response_object(), actual.response_object()
    if wanted is None or got is None or not (missing := missing_fields(wanted, got)):
        return []
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    return [Finding(Kind.RESPONSE_FIELD, Severity.WARNING, "golden.fields",
                    f"the Response lacks {shown}, which {label} (recorded {recorded}) has",
                    expected=missing, actual=None, key=f"the Response lacks fields {label} has")]


def missing_fields(golden: Any, actual: Any, path: str = "") -> list[str]:
    """The fields (dotted paths) `golden` has and `actual` lacks: the keys of objects, in depth;
    in lists, items paired by place where both are objects of the same `type`."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        return [found for key, value in golden.items()
                for found in ([f"{path}.{key}" if path else key] if key not in actual
                              else missing_fields(value, actual[key], f"{path}.{key}" if path else key))]
    if isinstance(golden, list) and isinstance(actual, list):
        return [found for index, (want, got) in enumerate(zip(golden, actual, strict=False))
                if isinstance(want, dict) and isinstance(got, dict) and want.get("type") == got.get("type")
                for found in missing_fields(want, got, f"{path}[{index}]")]
    return []
