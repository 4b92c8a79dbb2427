"""A contract-level changelog between two golden sets: what a gateway's upgrade (or OpenAI's
drift) changes for the clients of one target, recorded before and after.

Every change names where it is (scenario, stream mode, step), what it touches (the aspect of
the contract its finding is of, `Kind.aspect`, as every report names aspects; or which units
and steps run at all) and its verdict against OpenAI's
contract as the scenarios state it, read from what each set kept of its scenario checks
(`GoldenUnit.diverges`):

- `fixed`: the old answer broke a scenario rule about that aspect and the new one keeps it;
  a unit that was unsupported and now runs and passes;
- `broke`: the old answer kept the rule and the new one breaks it; a unit that ran and is
  now unsupported;
- `changed`: neither (the scenarios state nothing there, both answers break the rule, or a
  set was recorded without its checks).

A field compared is judged by the scenario rules named after it (`golden.error.code` by
`expect.error.code` and `expect.error`), stream events also by the stream grammar (`grammar.*`).
A scenario check that passes or fails now where no compared field changed (what the gateway
sent the model, the JSON schema, headers, list pages) is a change of its own, fixed or broke.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from ..judge.goldens import GoldenSet, GoldenUnit
from ..judge.reference import compare_with
from ..model.contract import project_answer
from ..model.findings import Finding, Kind, Rule
from ..scenario.expectations import STREAMS_ONLY, kind_of


class Verdict(StrEnum):
    FIXED = "fixed"
    BROKE = "broke"
    CHANGED = "changed"


MEANING = {Verdict.FIXED: "now matches OpenAI's contract", Verdict.BROKE: "now diverges from OpenAI's contract",
           Verdict.CHANGED: "neither closer to nor further from OpenAI's contract"}

COVERAGE = "units run"
"""The aspect of a change to which units and steps run at all (every other change is of a kind
of finding, and named by its `Kind.aspect`)."""
_FAMILY_KINDS = {"grammar": Kind.STREAM_GRAMMAR, "schema": Kind.SCHEMA, "exchange": Kind.SCHEMA, "wire": Kind.WIRE,
                 "transport": Kind.TRANSPORT, "upstream": Kind.UPSTREAM_REQUEST, "mcp": Kind.UPSTREAM_REQUEST,
                 "wait": Kind.UPSTREAM_REQUEST, "disconnect": Kind.UPSTREAM_REQUEST, "approval_link": Kind.ITEMS,
                 "page": Kind.RESPONSE_FIELD}
"""The kind of finding each family of checks outside `expect` makes, for a golden set's rule
read back without its finding."""
_UNIT = Rule("golden", ("unit",))


@dataclass(frozen=True)
class Change:
    scenario: str
    mode: str
    step: str | None
    """None: the change is to the whole unit (it runs, or not)."""
    aspect: str
    verdict: Verdict
    message: str
    rule: Rule
    """`golden.<field>` for a contract field; `golden.unit` / `golden.step` for what runs; the
    scenario's rule for a check whose verdict changed on its own."""


@dataclass(frozen=True)
class Changelog:
    old: GoldenSet
    new: GoldenSet
    changes: list[Change]

    def counts(self) -> dict[Verdict, int]:
        tally = Counter(change.verdict for change in self.changes)
        return {verdict: tally[verdict] for verdict in Verdict}

    def aspects(self) -> dict[str, dict[Verdict, int]]:
        """Aspect -> verdict -> how many changes, aspects in order of first appearance."""
        found: dict[str, dict[Verdict, int]] = {}
        for change in self.changes:
            row = found.setdefault(change.aspect, dict.fromkeys(Verdict, 0))
            row[change.verdict] += 1
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"old": heading(self.old), "new": heading(self.new),
                "summary": {str(verdict): count for verdict, count in self.counts().items()},
                "changes": [asdict(change) | {"verdict": str(change.verdict)} for change in self.changes]}


def heading(golden: GoldenSet) -> dict[str, Any]:
    """What a changelog says of one set: its name, target, gateway and version, date, model."""
    gateway = golden.manifest.get("gateway") or {}
    return {"name": golden.name, "target": golden.manifest.get("target"), "gateway": gateway.get("title"),
            "version": gateway.get("version"), "packages": gateway.get("packages", []),
            "recorded_at": golden.manifest.get("recorded_at"), "model": golden.manifest.get("model"),
            "units": len(golden.units), "unsupported": len(golden.unsupported)}


def changelog(old: GoldenSet, new: GoldenSet) -> Changelog:
    """Every contract-level difference of `new` from `old`, unit by unit, in scenario order."""
    changes: list[Change] = []
    for key in sorted(set(old.units) | set(new.units) | set(old.unsupported) | set(new.unsupported)):
        before, after = old.units.get(key), new.units.get(key)
        if before is None or after is None:
            changes += _coverage(old, new, key)
            continue
        changes += _steps(before, after, old.name)
    return Changelog(old, new, changes)


def _coverage(old: GoldenSet, new: GoldenSet, key: tuple[str, str]) -> list[Change]:
    """A unit one set ran and the other did not."""
    before, after = old.units.get(key), new.units.get(key)
    if before is not None and key in new.unsupported:
        return [Change(*key, None, COVERAGE, Verdict.BROKE, f"ran, now unsupported: {new.unsupported[key]}",
                       _UNIT)]
    if after is not None and key in old.unsupported:
        passes = len(after.diverges) == len(after.steps) and not any(after.diverges.values())
        return [Change(*key, None, COVERAGE, Verdict.FIXED if passes else Verdict.CHANGED,
                       f"was unsupported ({old.unsupported[key]}), now runs"
                       + ("" if passes else " but diverges from its scenario"), _UNIT)]
    if before is None and after is None:
        return []  # unsupported in both
    only = new if before is None else old
    return [Change(*key, None, COVERAGE, Verdict.CHANGED, f"only {only.name} has this run (not selected or "
                   "not run in the other)", _UNIT)]


def _steps(before: GoldenUnit, after: GoldenUnit, old_name: str) -> list[Change]:
    changes = []
    for step in [*before.steps, *(s for s in after.steps if s not in before.steps)]:
        if step not in before.steps or step not in after.steps:
            which = "now answers" if step in after.steps else "no longer answers"
            changes.append(Change(before.scenario, before.mode, step, COVERAGE, Verdict.CHANGED,
                                  f"the step {which} (a step before it ended the run differently)",
                                  Rule("golden", ("step",))))
            continue
        old_broke, new_broke = before.diverges.get(step), after.diverges.get(step)
        exchange, fields = after.steps[step], []
        for finding in compare_with(before.steps[step], project_answer(exchange), exchange, f"golden {old_name}"):
            fields.append(finding.rule.path)
            changes.append(Change(before.scenario, before.mode, step, finding.kind.aspect,
                                  _verdict(finding.rule.path, old_broke, new_broke),
                                  _describe(finding, ".".join(finding.rule.path)), finding.rule))
        if old_broke is not None and new_broke is not None:
            changes += [Change(before.scenario, before.mode, step, _kind_of(rule).aspect,
                               Verdict.FIXED if rule in old_broke else Verdict.BROKE,
                               f"the scenario's check {rule} {'passes' if rule in old_broke else 'fails'} now", rule)
                        for rule in sorted(old_broke ^ new_broke)
                        if not any(_about(rule, field) for field in fields)]
    return changes


def _about(rule: Rule, field: tuple[str, ...]) -> bool:
    """Whether a scenario rule speaks of the contract field (`output`, `error.code`): it is
    `expect.<field>`, a rule under it, the whole part the field is in (`expect.error`), or for
    stream events the stream grammar."""
    if rule.family == "grammar":
        return field[0] in STREAMS_ONLY
    return rule.family == "expect" and (rule.path[:len(field)] == field or rule.path == field[:1])


def _verdict(field: tuple[str, ...], old_broke: frozenset[Rule] | None, new_broke: frozenset[Rule] | None) -> Verdict:
    """How the change of `field` stands against the scenario rules about it (`_about`)."""
    if old_broke is None or new_broke is None:
        return Verdict.CHANGED
    was, now = (any(_about(rule, field) for rule in rules) for rules in (old_broke, new_broke))
    return Verdict.FIXED if was and not now else Verdict.BROKE if now and not was else Verdict.CHANGED


def _kind_of(rule: Rule) -> Kind:
    """The kind of finding a scenario check whose verdict changed on its own makes."""
    if rule.family == "expect":
        return kind_of(rule.field) or Kind.RESPONSE_FIELD
    return _FAMILY_KINDS.get(rule.family, Kind.RESPONSE_FIELD)


def _describe(finding: Finding, field: str) -> str:
    """What changed, as the new answer against the old: for sequences (events, items), what is
    added and what went away, with the comparer's account; for a value, old → new."""
    old, new = finding.expected, finding.actual
    if not (isinstance(old, list) and isinstance(new, list)):
        return f"{field}: {_shown(old)} → {_shown(new)}"
    message = finding.message.rsplit(" (golden ", 1)[0]
    added, removed = Counter(map(str, new)) - Counter(map(str, old)), Counter(map(str, old)) - Counter(map(str, new))
    parts = [f"{label}: {', '.join(_counted(counter))}" for label, counter in (("added", added), ("removed", removed))
             if counter]
    return "; ".join(parts) + f" ({message})" if parts else f"reordered ({message})"


def _shown(value: Any) -> str:
    """A value as a changelog shows it: presence flags as present/absent."""
    if isinstance(value, bool):
        return "present" if value else "absent"
    return "none" if value is None else json.dumps(value) if isinstance(value, (dict, list)) else repr(value)


def _counted(counter: Counter[str]) -> list[str]:
    return [name if count == 1 else f"{name} ×{count}" for name, count in counter.items()]


def markdown(log: Changelog, command: str | None = None) -> str:
    """The changelog as Markdown: the commands that make it again (each set's recording, as its
    manifest keeps it, and `command`), both sets' headings, a summary line per verdict and a
    table per aspect, then the changes grouped by scenario, stream mode and step."""
    old, new = heading(log.old), heading(log.new)
    lines = [f"# Contract changelog: {old['name']} → {new['name']}", ""]
    if commands := [c for c in (log.old.manifest.get("command"), log.new.manifest.get("command"), command) if c]:
        lines += ["Regenerate with:", "", "```sh", *commands, "```", ""]
    lines += ["| | old | new |", "|---|---|---|"]
    for label, key in (("golden set", "name"), ("target", "target"), ("gateway", "gateway"), ("version", "version"),
                       ("packages", "packages"), ("recorded at", "recorded_at"), ("model", "model"),
                       ("units recorded", "units"), ("units unsupported", "unsupported")):
        cells = [", ".join(value) if isinstance(value := side[key], list) else "—" if value is None else str(value)
                 for side in (old, new)]
        lines.append(f"| {label} | {_cell(cells[0])} | {_cell(cells[1])} |")
    counts = log.counts()
    lines += ["", "## Summary", ""]
    lines += [f"- **{verdict}** ({MEANING[verdict]}): {counts[verdict]}" for verdict in Verdict]
    if aspects := log.aspects():
        lines += ["", "| aspect | " + " | ".join(map(str, Verdict)) + " |", "|---" * (len(Verdict) + 1) + "|"]
        lines += [f"| {aspect} | " + " | ".join(str(row[v]) for v in Verdict) + " |" for aspect, row in aspects.items()]
    lines += ["", "## Changes", ""]
    if not log.changes:
        lines.append("No contract-level change.")
    scenario = where = None
    for change in log.changes:
        if change.scenario != scenario:
            scenario, where = change.scenario, None
            lines += [*([""] if lines[-1] else []), f"### {scenario}", ""]
        place = f"[{change.mode}]" + (f" step `{change.step}`" if change.step else "")
        if place != where:
            where = place
            lines.append(f"- {place}")
        lines.append(f"  - **{change.verdict}** · {change.aspect}: {_cell(change.message)}")
    return "\n".join(lines).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
