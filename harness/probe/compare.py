"""Two targets' outcomes of the same probes compared, and the divergences grouped by cause.

Compared per probe: the status class (2xx/4xx/5xx, or no answer), what the body is (OpenAI's
error envelope, another error, JSON, not JSON), and, when both answered an error, its `type`,
`code` and `param`. The second side is the expectation; each probe's expectation says where it
came from (recorded answers, OpenAI's description, the target compared with).

A group is one cause: the same answer of the target (its status, error type and code, and its
message with what varies from probe to probe taken out: numbers, quoted values) where the same
was expected. Groups are ranked by what they cost a client, then by size: a 5xx or no answer;
accepting what OpenAI refuses; another status class; an error not in OpenAI's envelope;
another error code; another param.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .generate import Probe
from .send import Outcome

ERROR_BODIES = ("envelope", "error")
COSTS = ("a 5xx or no answer", "accepts what OpenAI refuses", "another status class",
         "an error not in OpenAI's envelope", "another error code", "another param")
"""What a divergence costs a client, most first: how groups are ranked."""
_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")


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

    @property
    def cost(self) -> int:
        """Its rank in `COSTS`."""
        got, expected = self.got.status_class, self.expected.status_class
        if got in ("5xx", "no answer"):
            return 0
        if got == "2xx" and expected == "4xx":
            return 1
        if got != expected:
            return 2
        if "body" in self.differs:
            return 3
        return 4 if {"type", "code"} & set(self.differs) else 5

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe.to_dict(), "differs": list(self.differs), "got": self.got.to_dict(),
                "expected": self.expected.to_dict(), "expected_from": self.source, "cost": COSTS[self.cost]}


def differing(got: Outcome, expected: Outcome) -> tuple[str, ...]:
    """The parts in which two outcomes differ (none: they agree); an expectation that leaves
    its code and param unsaid (OpenAI's description says only that it refuses) is met by any."""
    parts = [name for name, a, b in (("status class", got.status_class, expected.status_class),
                                     ("body", got.body, expected.body)) if a != b]
    if got.body in ERROR_BODIES and expected.body in ERROR_BODIES:
        parts += [name for name in ("type", "code", "param")
                  if name not in expected.unsaid and getattr(got, name) != getattr(expected, name)]
    return tuple(parts)


def answer_summary(outcome: Outcome) -> str:
    """What an outcome is, coarsely (`500 (not JSON)`, `400 invalid_request_error (invalid_type)`)."""
    if outcome.body == "no answer":
        return "nothing (no answer)"
    text = str(outcome.status) if outcome.status is not None else outcome.status_class
    if outcome.body == "envelope":
        code = "" if "code" in outcome.unsaid else f" ({outcome.code})" if outcome.code else ""
        return f"{text} {outcome.type}{code}"
    return text + {"error": " with an error not shaped as OpenAI's", "not json": " (not JSON)",
                   "stream": " (an event stream)",
                   "json": "" if outcome.status_class == "2xx" else " without an error envelope"}[outcome.body]


def cause_of(outcome: Outcome) -> str:
    """The target's answer as one cause: its summary and its message, numbers and quoted values
    taken out (`at line 1 column 103` and `at line 1 column 98` are one cause)."""
    message = _VARYING.sub("…", outcome.detail)[:200] if outcome.body != "no answer" else ""
    return answer_summary(outcome) + (f": “{message}”" if message else "")


@dataclass(frozen=True)
class Group:
    """Divergences with one cause: the same answer where the same was expected."""

    cost: int
    got: str
    expected: str
    source: str
    divergences: tuple[Divergence, ...]

    @cached_property
    def families(self) -> list[str]:
        """The field families it spans, the most probes first."""
        return [family for family, _ in Counter(d.probe.group for d in self.divergences).most_common()]

    def examples(self, count: int) -> list[Divergence]:
        """One probe from each of the first `count` families, the simplest field first: what a
        gateway developer reads to see the cause, not `count` variants of one exotic field."""
        firsts = {}
        for divergence in sorted(self.divergences, key=lambda d: (len(d.probe.field), d.probe.id)):
            firsts.setdefault(divergence.probe.group, divergence)
        return [firsts[family] for family in self.families[:count]]

    def sentence(self, target: str) -> str:
        count, spans = len(self.divergences), len(self.families)
        where = self.families[0] if spans == 1 else f"{spans} field families ({', '.join(self.families[:3])}" + \
            (", ..." if spans > 3 else "") + ")"
        return (f"{count} probe{'s' if count != 1 else ''} on {where}: {target} answers {self.got} where "
                f"{self.source} answers {self.expected}")

    def to_dict(self, target: str) -> dict[str, Any]:
        return {"cost": COSTS[self.cost], "cause": self.got, "expected": self.expected,
                "summary": self.sentence(target), "expected_from": self.source, "fields": self.families,
                "probes": [d.probe.id for d in self.divergences]}


@dataclass
class Comparison:
    """The probes sent, each side's outcomes and where each expectation came from, and the
    probes not sent because the target lacks what they need."""

    target: str
    against: str
    probes: list[Probe]
    got: dict[str, Outcome]
    expected: dict[str, Outcome]
    sources: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Probe id -> why it was not sent (the capability the target's profile says it lacks)."""

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
        """The divergences grouped by cause, the costliest first, then the largest."""
        keyed: dict[tuple[Any, ...], list[Divergence]] = {}
        for divergence in self.divergences:
            key = (divergence.cost, cause_of(divergence.got), answer_summary(divergence.expected), divergence.source)
            keyed.setdefault(key, []).append(divergence)
        groups = [Group(*key, tuple(members)) for key, members in keyed.items()]
        return sorted(groups, key=lambda group: (group.cost, -len(group.divergences), group.got))

    def per_field(self) -> list[tuple[str, int, int]]:
        """(field family, probes, diverging) for every family probed, in name order."""
        probes = Counter(probe.group for probe in self.probes)
        diverging = Counter(divergence.probe.group for divergence in self.divergences)
        return [(family, probes[family], diverging[family]) for family in sorted(probes)]

    def source_counts(self) -> dict[str, int]:
        return dict(Counter(self.sources[probe.id] for probe in self.probes))
