"""What failed in a run, as the reports lead with it: each scenario run that failed or could not
run, once, led by its root cause, with what that cause brought about folded under it.

A unit's findings (warnings and errors) and the steps the harness could not run become roots,
each with what it caused: a step's findings marked `consequence` belong to the error answer
`judge/cause.py` put first in that step (the gateway's own message); a difference found again in
a later step (the same kind, rule and key: one cause answered twice) belongs to where it was
found first. A step that could not run after an earlier step failed is not a root: it is
skipped, for it needs what that failed answer should have held (`ScenarioResult.outcome`
reads it so too). The lead is the first root that fails the unit. Read from a results
document's entries (`documents.result_entry`) alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.findings import Severity, group_of

FAILED = ("fail", "could_not_run")
"""The outcomes of the units a report leads with."""


@dataclass
class Root:
    """A finding of its own (`finding`), or a step that could not run (`error`), and the
    findings it caused or that repeat it, as (step, finding), in the order the steps ran."""

    step: str
    finding: dict[str, Any] | None = None
    error: str | None = None
    caused: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        return self.error is not None or (self.finding is not None and _fails(self.finding))


@dataclass(frozen=True)
class Failure:
    """A failing unit as the reports lead with it."""

    lead: Root
    others: list[Root]
    """The unit's other roots: failing ones first, then warnings."""
    skipped: list[tuple[str, str]]
    """(step, why) of each step skipped after an earlier one failed."""

    @property
    def folded(self) -> int:
        """How many findings the lead's fold holds besides it: what it caused and the others'."""
        return len(self.lead.caused) + sum((root.finding is not None) + len(root.caused) for root in self.others)


def _fails(finding: dict[str, Any]) -> bool:
    return finding["severity"] == "error" and not finding["known"]


def skipped_steps(entry: dict[str, Any]) -> dict[str, str]:
    """Step -> why it could not run, of each step that could not run after an earlier step of
    the unit failed (or diverged as the baseline knows)."""
    skipped: dict[str, str] = {}
    failed = False
    for step in entry["steps"]:
        if step["error"] is not None and failed:
            skipped[step["step"]] = step["error"]
        failed = failed or step["outcome"] in ("fail", "known")
    return skipped


def roots_of(entry: dict[str, Any]) -> list[Root]:
    """The unit's roots (see the module's docstring), failing ones first, each group in step order."""
    skipped = skipped_steps(entry)
    roots: list[Root] = []
    first_of: dict[tuple[str, str, str], Root] = {}
    for step in entry["steps"]:
        name = step["step"]
        if step["error"] is not None and name not in skipped:
            roots.append(Root(name, error=step["error"]))
        cause: Root | None = None
        for finding in step["findings"]:
            if Severity.named(finding["severity"]) < Severity.WARNING:
                continue
            if finding.get("consequence") and cause is not None:
                cause.caused.append((name, finding))
            elif (same := first_of.get(group_of(finding))) is not None:
                same.caused.append((name, finding))
                cause = same
            else:
                cause = first_of[group_of(finding)] = Root(name, finding)
                roots.append(cause)
    return sorted(roots, key=lambda root: not root.fails)


def failure_of(entry: dict[str, Any]) -> Failure | None:
    """How a unit that failed or could not run is led (None for any other, or for one with no
    failing root, which its outcome rules out)."""
    if entry["outcome"] not in FAILED:
        return None
    roots = roots_of(entry)
    if not roots or not roots[0].fails:
        return None
    skipped = skipped_steps(entry)
    return Failure(roots[0], roots[1:], list(skipped.items()))
