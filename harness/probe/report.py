"""A probe comparison for people (console lines, Markdown) and machines (JSON). Secrets are
removed by whoever prints or writes them (the run's redactor)."""

from __future__ import annotations

from typing import Any

from .compare import Comparison, Group
from .send import Outcome

EXAMPLES = 3
"""Probes shown for each group of divergences."""


def headline(comparison: Comparison, selection: str) -> str:
    diverging, groups = len(comparison.divergences), len(comparison.groups)
    return (f"{len(comparison.probes)} probes ({selection}) sent to {comparison.target}, compared with "
            f"{comparison.against}: {len(comparison.probes) - diverging} agree, {diverging} diverge"
            + (f" in {groups} group{'s' if groups != 1 else ''}" if groups else ""))


def expectation_line(comparison: Comparison) -> str:
    counts = sorted(comparison.source_counts().items(), key=lambda item: -item[1])
    return "Expectations: " + "; ".join(f"{count} from {source}" for source, count in counts) + "."


def described(outcome: Outcome) -> str:
    """One outcome in full: status, body, type/code/param and what it said."""
    if outcome.body == "no answer":
        return f"no answer ({outcome.detail})"
    parts = [str(outcome.status), outcome.body]
    if outcome.body in ("envelope", "error"):
        parts.append(f"type={outcome.type} code={outcome.code} param={outcome.param}")
    text = " ".join(parts)
    return f"{text}: {outcome.detail}" if outcome.detail else text


def console_lines(comparison: Comparison, selection: str) -> list[str]:
    lines = [headline(comparison, selection), expectation_line(comparison)]
    lines += [f"  {group.sentence(comparison.target)}  (e.g. {group.divergences[0].probe.id})"
              for group in comparison.groups]
    return lines


def document(comparison: Comparison, selection: str, command: str) -> dict[str, Any]:
    """What `--json` prints: the counts, the groups, every divergence, the per-field table."""
    return {"command": command, "target": comparison.target, "against": comparison.against, "selection": selection,
            "probes": len(comparison.probes), "diverging": len(comparison.divergences),
            "expected_from": comparison.source_counts(),
            "groups": [group.to_dict(comparison.target) for group in comparison.groups],
            "divergences": [divergence.to_dict() for divergence in comparison.divergences],
            "fields": [{"field": family, "probes": probes, "diverging": diverging}
                       for family, probes, diverging in comparison.per_field()]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _examples(group: Group, target: str) -> list[str]:
    lines = []
    for divergence in group.divergences[:EXAMPLES]:
        lines.append(f"  - `{divergence.probe.id}` ({divergence.probe.method} {divergence.probe.field}): "
                     f"{target} {_cell(described(divergence.got))[:240]}; "
                     f"{group.source} {_cell(described(divergence.expected))[:240]}")
    if len(group.divergences) > EXAMPLES:
        lines.append(f"  - and {len(group.divergences) - EXAMPLES} more")
    return lines


def markdown(comparison: Comparison, selection: str, command: str) -> str:
    """The report: how to run it again, the counts, the divergences grouped per field (with
    examples), and every field family probed."""
    target = comparison.target
    lines = [f"# Request probes: {target} compared with {comparison.against}", "",
             f"Regenerate: `{command}`", "", headline(comparison, selection) + ".", "",
             expectation_line(comparison) + " Each probe is a valid request with one defect (its id names the "
             "field and the defect); compared are the status class, whether the body is OpenAI's error "
             "envelope, and its `type`, `code` and `param`.", ""]
    if comparison.groups:
        lines += ["## Divergences, grouped per field", ""]
        for group in comparison.groups:
            lines += [f"- **{_cell(group.sentence(target))}**", *_examples(group, target)]
        lines.append("")
    fields = comparison.per_field()
    alike = [family for family, _, diverging in fields if not diverging]
    lines += ["## Fields probed", "", f"{len(fields)} field families; in {len(alike)} every probe was answered alike.",
              "", "| Field | Probes | Diverging |", "|---|---:|---:|"]
    lines += [f"| `{_cell(family)}` | {probes} | {diverging} |" for family, probes, diverging in fields if diverging]
    return "\n".join(lines) + "\n"
