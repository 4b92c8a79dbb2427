"""The HTML report: the parity matrix (scenario x target and stream mode), each streamed
step's events side by side with the sequence it is held against (the scenario's expectation
or a golden set) with the differences marked, the findings, and the coverage of OpenAI's
types. Rendered from the results document alone, with Jinja2 (autoescaped)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from .scenario import MODES


@dataclass(frozen=True)
class Row:
    reference: str
    actual: str
    tag: str
    """`same`, `missing` (only the reference has it), `extra` (only the answer) or `changed`."""


def side_by_side(reference: list[str], actual: list[str]) -> list[Row]:
    """Two event sequences aligned row by row, each row tagged with how they differ."""
    rows = []
    matcher = difflib.SequenceMatcher(a=reference, b=actual, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        left, right = reference[a1:a2], actual[b1:b2]
        if op == "equal":
            rows += [Row(a, b, "same") for a, b in zip(left, right, strict=True)]
            continue
        for index in range(max(len(left), len(right))):
            a = left[index] if index < len(left) else ""
            b = right[index] if index < len(right) else ""
            rows.append(Row(a, b, "changed" if a and b else "missing" if a else "extra"))
    return rows


def _cell(results: list[dict[str, Any]]) -> tuple[str, str]:
    """A matrix cell: outcome class and label (a failure names its worst finding's severity)."""
    if not results:
        return "none", "-"
    result = results[0]
    if result["outcome"] == "fail":
        worst = max((f for s in result["steps"] for f in s["findings"] if not f["known"]),
                    key=lambda f: ("note", "warning", "error").index(f["severity"]), default=None)
        return "fail", f"divergence ({worst['severity']})" if worst else "divergence"
    known = any(f["known"] for s in result["steps"] for f in s["findings"])
    return result["outcome"], result["outcome"].replace("_", " ") + (" (known)" if known else "")


def _environment() -> Environment:
    return Environment(loader=PackageLoader("responses_parity.harness", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def render_html(document: dict[str, Any]) -> str:
    target = document["target"]["name"]
    scenarios: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for result in document["results"]:
        scenarios.setdefault(result["scenario"], {}).setdefault(result["mode"], []).append(result)
    matrix = [{"scenario": name, "policy": not modes[next(iter(modes))][0]["openai_counterpart"],
               "cells": [_cell(modes.get(mode, [])) for mode in MODES]} for name, modes in scenarios.items()]
    streams = [{"scenario": result["scenario"], "mode": result["mode"], "outcome": result["outcome"],
                "step": step["step"], "label": step["stream"]["reference_label"],
                "rows": side_by_side(step["stream"]["reference"] or [], step["stream"]["events"]),
                "findings": [f for f in step["findings"] if f["severity"] != "note"]}
               for result in document["results"] for step in result["steps"] if step["stream"]]
    streams.sort(key=lambda s: (s["outcome"] == "pass", s["scenario"], s["mode"]))
    return _environment().get_template("report.html.j2").render(
        document=document, target=target, modes=MODES, matrix=matrix, streams=streams)
