"""A target's answers judged against OpenAI's description alone, with no other target to compare
with: no answer missing, no 5xx, every 4xx in OpenAI's error envelope, and nothing accepted that
the description refuses (`Probe.refused`). What the reference gateway must hold to for every
probe (`tests/harness/test_probe_full_set.py`, run in CI)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .generate import Probe
from .send import Outcome

KINDS = ("no answer", "5xx", "4xx without OpenAI's envelope", "accepted though OpenAI's description refuses it")


def judged(outcome: Outcome, refused: bool) -> str | None:
    """Which of `KINDS` an answer is, or None when OpenAI's description allows it (`refused`:
    whether the description refuses the request)."""
    if outcome.status is None:
        return KINDS[0]
    if outcome.status >= 500:
        return KINDS[1]
    if outcome.status >= 400 and outcome.body != "envelope":
        return KINDS[2]
    if outcome.status < 300 and refused:
        return KINDS[3]
    return None


@dataclass(frozen=True)
class Problem:
    probe: Probe
    outcome: Outcome
    kind: str

    def line(self) -> str:
        detail = f": {self.outcome.detail[:200]}" if self.outcome.detail else ""
        return f"{self.probe.id}: {self.kind} ({self.outcome.status} {self.outcome.body}{detail})"


def problems(probes: Iterable[Probe], outcomes: Mapping[str, Outcome]) -> list[Problem]:
    """Every probe whose answer the description does not allow. A probe's refusal is asked only
    of those accepted (asking it of a body takes a while)."""
    found = []
    for probe in probes:
        outcome = outcomes[probe.id]
        accepted = outcome.status is not None and outcome.status < 300
        if (kind := judged(outcome, accepted and probe.refused)) is not None:
            found.append(Problem(probe, outcome, kind))
    return found


def family_lines(probes: Iterable[Probe], outcomes: Mapping[str, Outcome], found: Iterable[Problem]) -> list[str]:
    """One line per endpoint family: its probes, how they were answered, and its problems."""
    probes = list(probes)
    sent = Counter(probe.surface for probe in probes)
    classes = Counter((probe.surface, outcomes[probe.id].status_class) for probe in probes)
    wrong = Counter(problem.probe.surface for problem in found)
    return [f"{family}: {count} probes, " + ", ".join(f"{classes[family, kind]} {kind}" for kind in ("2xx", "4xx"))
            + f", {wrong[family]} not as OpenAI's description allows" for family, count in sorted(sent.items())]
