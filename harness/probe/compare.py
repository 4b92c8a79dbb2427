"""Two targets' outcomes of the same probes compared, and the divergences grouped.

Compared per probe: the status class (2xx/4xx/5xx, or no answer), what the body is (OpenAI's
error envelope, another error, JSON, not JSON), and, when both answered an error, its `type`,
`code` and `param`. The second side is the expectation; each probe's expectation says where it
came from (recorded answers, else the target compared with). Divergences are grouped by field
family (`tools[i].*`) and by what each side answered, so fourteen probes that get a 500 where
the expectation is a 400 are one line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .generate import Probe
from .send import Outcome

ERROR_BODIES = ("envelope", "error")


@dataclass(frozen=True)
class Divergence:
    probe: Probe
    got: Outcome
    expected: Outcome
    differs: tuple[str, ...]
    """The parts of the outcome that differ: `status class`, `body`, `type`, `code`, `param`
    (each part of the HTTP status or the error envelope, `Kind.STATUS` and `Kind.ERROR_ENVELOPE`)."""
    source: str
    """Where the expectation came from."""

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe.to_dict(), "differs": list(self.differs), "got": self.got.to_dict(),
                "expected": self.expected.to_dict(), "expected_from": self.source}


def differing(got: Outcome, expected: Outcome) -> tuple[str, ...]:
    """The parts in which two outcomes differ (none: they agree)."""
    parts = [name for name, a, b in (("status class", got.status_class, expected.status_class),
                                     ("body", got.body, expected.body)) if a != b]
    if got.body in ERROR_BODIES and expected.body in ERROR_BODIES:
        parts += [name for name in ("type", "code", "param") if getattr(got, name) != getattr(expected, name)]
    return tuple(parts)


def answer_summary(outcome: Outcome) -> str:
    """What an outcome is, coarsely (`500 (not JSON)`, `400 invalid_request_error (invalid_type)`)."""
    if outcome.body == "no answer":
        return "nothing (no answer)"
    text = str(outcome.status)
    if outcome.body == "envelope":
        return f"{text} {outcome.type}" + (f" ({outcome.code})" if outcome.code else "")
    return text + {"error": " with an error not shaped as OpenAI's", "not json": " (not JSON)",
                   "stream": " (an event stream)",
                   "json": "" if outcome.status_class == "2xx" else " without an error envelope"}[outcome.body]


def _param_note(divergence: Divergence) -> str:
    if "param" not in divergence.differs:
        return ""
    return "naming another param" if divergence.got.param else "with no param"


@dataclass(frozen=True)
class Group:
    """Divergences on one field family in which each side answered alike."""

    family: str
    got: str
    expected: str
    param_note: str
    source: str
    divergences: tuple[Divergence, ...]

    def sentence(self, target: str) -> str:
        count = len(self.divergences)
        note = f" {self.param_note}" if self.param_note else ""
        return (f"{count} probe{'s' if count != 1 else ''} on {self.family}: {target} answers {self.got}{note} "
                f"where {self.source} answers {self.expected}")

    def to_dict(self, target: str) -> dict[str, Any]:
        return {"field": self.family, "summary": self.sentence(target), "expected_from": self.source,
                "probes": [d.probe.id for d in self.divergences]}


@dataclass
class Comparison:
    """The probes sent, each side's outcomes and where each expectation came from."""

    target: str
    against: str
    probes: list[Probe]
    got: dict[str, Outcome]
    expected: dict[str, Outcome]
    sources: dict[str, str] = field(default_factory=dict)

    @cached_property
    def divergences(self) -> list[Divergence]:
        found = []
        for probe in self.probes:
            got, expected = self.got[probe.id], self.expected[probe.id]
            if differs := differing(got, expected):
                found.append(Divergence(probe, got, expected, differs, self.sources[probe.id]))
        return found

    @cached_property
    def groups(self) -> list[Group]:
        """The divergences grouped, the largest group first."""
        keyed: dict[tuple[str, ...], list[Divergence]] = {}
        for divergence in self.divergences:
            key = (divergence.probe.group, answer_summary(divergence.got), answer_summary(divergence.expected),
                   _param_note(divergence), divergence.source)
            keyed.setdefault(key, []).append(divergence)
        groups = [Group(*key, tuple(members)) for key, members in keyed.items()]
        return sorted(groups, key=lambda group: (-len(group.divergences), group.family, group.got))

    def per_field(self) -> list[tuple[str, int, int]]:
        """(field family, probes, diverging) for every family probed, in name order."""
        probes = Counter(probe.group for probe in self.probes)
        diverging = Counter(divergence.probe.group for divergence in self.divergences)
        return [(family, probes[family], diverging[family]) for family in sorted(probes)]

    def source_counts(self) -> dict[str, int]:
        return dict(Counter(self.sources[probe.id] for probe in self.probes))
