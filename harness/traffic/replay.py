"""Replaying captured requests against another target and diffing the contracts of the two
answers (`parity replay`). The target's scripted upstream plays the model turns the captured
answers show (`captured_turns`), for the replay's own run: the replayed requests carry no run
marker, and the run claims such requests while it lasts, so a script someone loaded into that
upstream for them is left as it was.

The requests go in the order they were captured. A request that names an earlier answer's id
(`previous_response_id`, an approval's or a function output's id, a stored response's id in
its path) is sent with the id the target gave in its own answer at the same place
(`capture.answer_ids`). Each new answer is judged as every answer is, held against the captured
one (`judge.reference`). A WebSocket connection's creates are sent as streamed HTTP requests
(their events are the same), so a store:false continuation that relied on the socket's cache is
not found there.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from ...fixtures.upstream.script import ModelTurn, RunScript, new_run_token
from ..engine.fixture_client import FixtureClient
from ..engine.targets import Target, send
from ..judge.cause import gateway_error
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

    @property
    def errors(self) -> dict[str, str]:
        """When the answers differ, the error each side answered, if any (`captured`, `replayed`):
        what it was, with the gateway's own message, as `cause.gateway_error` says it."""
        if not self.differs:
            return {}
        sides = {"captured": self.captured.exchange, "replayed": self.answer}
        return {side: error[0] for side, exchange in sides.items() if (error := gateway_error(exchange)) is not None}


def captured_turns(captures: list[Captured]) -> list[ModelTurn]:
    """The model turns the captured answers show (`from_capture.model_turns`), in order: what
    the scripted upstream plays, so that the target answers as the captured target's model did."""
    return [turn for captured in captures for turn in model_turns(captured.exchange.response_object())]


async def replay(captures: list[Captured], target: Target, client: httpx2.AsyncClient,
                 fixtures: FixtureClient | None) -> list[Replayed]:
    """Send each captured request to `target`, in order, and judge each answer; `fixtures`
    reaches the target's scripted upstream (None: its model is not scripted)."""
    run = new_run_token()
    if fixtures is not None:
        await fixtures.register(run, RunScript(steps=[captured_turns(captures)], unmarked=True))
    try:
        return await _sent_again(captures, target, client)
    finally:
        if fixtures is not None:
            await fixtures.forget(run)


async def _sent_again(captures: list[Captured], target: Target, client: httpx2.AsyncClient) -> list[Replayed]:
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
