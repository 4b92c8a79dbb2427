"""A probe comparison for people (console lines, Markdown) and machines (JSON). Secrets are
removed by whoever prints or writes them (the run's redactor)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .compare import COSTS, Comparison, Group
from .send import Outcome

EXAMPLES = 3
"""Probes shown for each group of divergences."""


def headline(comparison: Comparison, selection: str) -> str:
    diverging, groups = len(comparison.divergences), len(comparison.groups)
    skipped = len(comparison.skipped)
    skipped_text = f" ({skipped} more not sent: the target lacks what they need)" if skipped else ""
    return (f"{len(comparison.probes)} probes ({selection}){skipped_text} sent to {comparison.target}, compared with "
            f"{comparison.against}: {len(comparison.probes) - diverging} agree, {diverging} diverge"
            + (f" from {groups} cause{'s' if groups != 1 else ''}" if groups else ""))


def expectation_line(comparison: Comparison) -> str:
    counts = sorted(comparison.source_counts().items(), key=lambda item: -item[1])
    return "Expectations: " + "; ".join(f"{count} from {source}" for source, count in counts) + "."


def described(outcome: Outcome) -> str:
    """One outcome in full: status, body, type/code/param and what it said."""
    if outcome.body == "no answer":
        return f"no answer ({outcome.detail})"
    parts = [str(outcome.status), outcome.body]
    if outcome.body in ("envelope", "error"):
        parts.append(" ".join(f"{name}={getattr(outcome, name)}" for name in ("type", "code", "param")
                              if name not in outcome.unsaid))
    text = " ".join(parts)
    return f"{text}: {outcome.detail}" if outcome.detail else text


def console_lines(comparison: Comparison, selection: str) -> list[str]:
    lines = [headline(comparison, selection), expectation_line(comparison)]
    lines += [f"  [{COSTS[group.cost]}] {group.sentence(comparison.target)}  (e.g. {group.examples(1)[0].probe.id})"
              for group in comparison.groups]
    return lines


def document(comparison: Comparison, selection: str, command: str) -> dict[str, Any]:
    """What `--json` prints: the counts, the groups, every divergence, the per-field table, and
    the probes not sent."""
    return {"command": command, "target": comparison.target, "against": comparison.against, "selection": selection,
            "probes": len(comparison.probes), "diverging": len(comparison.divergences),
            "expected_from": comparison.source_counts(),
            "groups": [group.to_dict(comparison.target) for group in comparison.groups],
            "divergences": [divergence.to_dict() for divergence in comparison.divergences],
            "fields": [{"field": family, "probes": probes, "diverging": diverging}
                       for family, probes, diverging in comparison.per_field()],
            "skipped": comparison.skipped}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _examples(group: Group, target: str) -> list[str]:
    lines = [f"  - `{divergence.probe.id}` ({divergence.probe.method} {divergence.probe.field}): "
             f"{target} {_cell(described(divergence.got))[:240]}; "
             f"{group.source} {_cell(described(divergence.expected))[:240]}"
             for divergence in group.examples(EXAMPLES)]
    if len(group.divergences) > len(lines):
        lines.append(f"  - and {len(group.divergences) - len(lines)} more")
    return lines


def markdown(comparison: Comparison, selection: str, command: str) -> str:
    """The report: how to run it again, the counts, the divergences by cause, the costliest
    first (with an example from each of the field families it spans), and every field family
    probed."""
    target = comparison.target
    lines = [f"# Request probes: {target} compared with {comparison.against}", "",
             f"Regenerate: `{command}`", "", headline(comparison, selection) + ".", "",
             expectation_line(comparison) + " Each probe is a valid request with one defect (its id names the "
             "field and the defect); compared are the status class, whether the body is OpenAI's error "
             "envelope, and its `type`, `code` and `param`. Where the reference gateway refuses a request "
             "for a limit of its own (a tool or an input item it does not run), the expectation is OpenAI's "
             "description of the request instead; a field the target passes on to the model, the scripted "
             "model refuses as OpenAI would.", ""]
    if comparison.groups:
        lines += ["## Divergences, by cause, the costliest for a client first", ""]
        for cost, name in enumerate(COSTS):
            if ranked := [group for group in comparison.groups if group.cost == cost]:
                lines += [f"### {name[0].upper()}{name[1:]} ({sum(len(g.divergences) for g in ranked)} probes)", ""]
                for group in ranked:
                    lines += [f"- **{_cell(group.sentence(target))}**", *_examples(group, target)]
                lines.append("")
    fields = comparison.per_field()
    alike = [family for family, _, diverging in fields if not diverging]
    lines += ["## Fields probed", "", f"{len(fields)} field families; in {len(alike)} every probe was answered alike.",
              "", "| Field | Probes | Diverging |", "|---|---:|---:|"]
    lines += [f"| `{_cell(family)}` | {probes} | {diverging} |" for family, probes, diverging in fields if diverging]
    if comparison.skipped:
        reasons = Counter(comparison.skipped.values())
        lines += ["", "## Not sent", ""] + [f"- {count} probe(s): {reason}" for reason, count in reasons.items()]
    return "\n".join(lines) + "\n"
