"""Judging one answer: its contract, and the findings of its delivery, of the checks that need
no reference and of how it differs from a step's expectation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..model.contract import Contract, project, project_chat
from ..model.findings import Finding, Severity
from ..scenario.model import Expect
from ..wire.exchange import Exchange
from .checks import delivery_findings, no_reference_findings
from .compare import compare


def judge_answer(expect: Expect, exchange: Exchange, chat: bool,
                 with_checks: bool = True) -> tuple[Contract, list[Finding]]:
    """The exchange's contract and its findings: transport and malformed bytes, the checks that
    need no reference (unless `with_checks` is False) and how it differs from `expect`; of an
    answer that did not arrive whole or cannot be read, only why. CPU-bound on long
    streams, so the engine runs it off the event loop (the other runs' streams keep being
    read while it works)."""
    contract = project_chat(exchange) if chat else project(exchange)
    findings = delivery_findings(exchange)
    if exchange.transport_error or exchange.unreadable:
        return contract, findings
    if with_checks:
        findings += no_reference_findings(exchange, chat, current=True)
    findings += compare(expect, contract, exchange)
    return contract, findings


def model_dependent_as_notes(findings: list[Finding], fields: Sequence[str]) -> list[Finding]:
    """Findings of expectations a live model decides (`expect.output`, ...) turned into notes."""
    return [replace(f, severity=Severity.NOTE, message=f"{f.message} (model-dependent)")
            if f.rule.startswith("expect.") and f.rule.split(".")[1] in fields and f.severity > Severity.NOTE else f
            for f in findings]
