"""What running a scenario produces: a result per step and per (scenario, mode) unit, and the
event the engine reports each finished unit with. Built once by the engine; reports, goldens
and baselines read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..model.contract import Contract, StreamReference
from ..model.findings import Finding, Severity
from ..model.observed import Observed
from ..scenario.expectations import Expect
from ..scenario.model import Mode, Scenario
from ..wire.exchange import Exchange


Outcome = Literal["pass", "known", "fail", "could_not_run", "unsupported"]
"""`known`: it failed only in ways the target's baseline knows (a known divergence: no failure,
never a pass). `could_not_run`: the harness could not run a step as written (a scenario mistake,
a fixture that failed); never counted as a pass or a failure of the target."""


@dataclass
class StepResult:
    step_id: str
    exchange: Exchange | None = None
    contract: Contract | None = None
    findings: list[Finding] = field(default_factory=list)
    observed: Observed | None = None
    error: str | None = None
    """Why the harness could not run the step (not a fault of the target)."""
    reference: StreamReference | None = None
    """For a streamed answer, the sequence it is held against (the scenario's expectation, or
    a golden set's), or why there is none, for side-by-side views."""
    expect: Expect | None = None
    """The expectation the answer was judged by, placeholders resolved."""
    chat: bool = False
    """Whether the answer was judged as a chat completion."""

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "could_not_run"
        if any(finding.fails for finding in self.findings):
            return "fail"
        return "known" if any(f.known and f.severity >= Severity.ERROR for f in self.findings) else "pass"


@dataclass
class ScenarioResult:
    scenario: Scenario
    path: str
    mode: Mode
    target: str
    steps: list[StepResult] = field(default_factory=list)
    duration_s: float = 0.0
    unsupported: str | None = None
    """Why the target cannot run this scenario at all (not a failure)."""
    attempt: int = 1
    """Which try this result is (live models are retried when a run fails)."""

    @property
    def outcome(self) -> Outcome:
        """The first step that did not pass decides: a step that cannot run after a failed one
        lacks what that answer should have held, so the scenario failed rather than errored (or,
        after a known divergence, is part of it), unless a later step fails anew."""
        if self.unsupported is not None:
            return "unsupported"
        outcomes = [step.outcome for step in self.steps]
        first = next((outcome for outcome in outcomes if outcome != "pass"), "pass")
        return "fail" if first == "known" and "fail" in outcomes else first

    @property
    def findings(self) -> list[tuple[str, Finding]]:
        return [(step.step_id, finding) for step in self.steps for finding in step.findings]


@dataclass(frozen=True)
class UnitFinished:
    result: ScenarioResult
    done: int
    total: int


