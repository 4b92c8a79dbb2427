"""Replaying captured requests against another target and diffing the contracts of the two
answers (`parity replay`). A target the replay starts (the reference gateway, a profile) talks
to a scripted upstream that plays the model turns the captured answers show (`captured_model`).

The requests go in the order they were captured. A request that names an earlier answer's id
(`previous_response_id`, an approval's or a function output's id, a stored response's id in
its path) is sent with the id the target gave in its own answer at the same place
(`capture.answer_ids`). Each new answer is judged as every answer is, held against the captured
one (`judge.reference`).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ...fixtures.upstream.script import AdHocScript
from ..engine.targets import Target, send
from ..judge.judgement import Case, judge
from ..judge.reference import Reference
from ..model.findings import Finding, Severity
from ..wire.capture import Captured, answer_ids, id_at, replace_ids, replace_ids_in_path
from ..wire.exchange import Exchange
from .from_capture import model_turns


@dataclass(frozen=True)
class Replayed:
    captured: Captured
    answer: Exchange
    """The target's answer to the request sent again."""
    findings: list[Finding]
    """How it differs from the captured answer."""

    @property
    def differs(self) -> bool:
        return any(finding.severity >= Severity.WARNING for finding in self.findings)


def captured_model(captures: list[Captured]) -> AdHocScript | None:
    """The model turns the captured answers show (`from_capture.model_turns`), in order: what a
    scripted upstream plays for a target the replay starts (the reference gateway, a profile),
    so that it answers as the captured target's model did. None when they show none."""
    turns = [turn for captured in captures for turn in model_turns(captured.exchange.response_object())]
    return AdHocScript.model_validate({"turns": turns}) if turns else None


async def replay(captures: list[Captured], target: Target, client: httpx.AsyncClient) -> list[Replayed]:
    """Send each captured request to `target`, in order, and judge each answer."""
    replacements: dict[str, str] = {}
    replayed = []
    for captured in captures:
        recorded = captured.exchange
        answer = await send(client, target, recorded.method, replace_ids_in_path(captured.request_path, replacements),
                            replace_ids(recorded.request_body, replacements))
        replacements |= {old: found for old, place in answer_ids(recorded).items()
                         if (found := id_at(answer, place)) is not None}
        held_against = Reference(recorded, f"captured {captured.path.name}")
        replayed.append(Replayed(captured, answer, judge(Case(answer, reference=held_against)).findings))
    return replayed
