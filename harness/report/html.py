"""The HTML report, in the order a person reads it: a summary (counts, parity, time); what failed,
each failing scenario run once, led by its root cause (`failed`), with every step of it folded
under it; the parity matrix (scenario x stream mode), each cell a link to its run; every other
scenario run, collapsed; and the coverage of OpenAI's types. A run's section holds every finding
of every step and each streamed step's timeline beside the sequence it is held against, differences
marked. A filter by outcome, tag and aspect is a small inline script; without it the page reads
the same, unfiltered. Rendered from the results document alone, with Jinja2 (autoescaped); the
pictures are inline SVG (`charts`)."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from ..defaults import MODES
from ..model.findings import Kind, Severity
from .charts import stream_picture
from .failed import failure_of, skipped_steps


def unit_anchor(scenario: str, mode: str) -> str:
    """The id of a scenario run's section in report.html (and report.md)."""
    return f"unit-{scenario}-{mode}"


def _cell(results: list[dict[str, Any]]) -> tuple[str, str, str | None]:
    """A matrix cell: outcome class, label (a failure names its worst finding's severity) and
    the anchor of the run's details."""
    if not results:
        return "none", "-", None
    result = results[0]
    anchor = unit_anchor(result["scenario"], result["mode"])
    if result["outcome"] == "fail":
        worst = max((f for s in result["steps"] for f in s["findings"] if not f["known"]),
                    key=lambda f: ("note", "warning", "error").index(f["severity"]), default=None)
        return "fail", f"divergence ({worst['severity']})" if worst else "divergence", anchor
    if result["outcome"] == "known":
        return "known", "known divergence", anchor
    known = any(f["known"] for s in result["steps"] for f in s["findings"])
    return result["outcome"], result["outcome"].replace("_", " ") + (" (known)" if known else ""), anchor


def aspect_of(kind: str) -> str:
    """The contract aspect a kind of finding (as a document names it) checks (`Kind.aspect`); a
    kind this version does not know (a document of another) is its own aspect."""
    try:
        return Kind(kind).aspect
    except ValueError:
        return kind


def _by_severity(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(findings, key=lambda f: -Severity.named(f["severity"]))


def _kinds(result: dict[str, Any]) -> list[str]:
    """The kinds of the run's warnings and errors: the aspects it diverges in, for the filter."""
    return sorted({f["kind"] for step in result["steps"] for f in step["findings"]
                   if Severity.named(f["severity"]) >= Severity.WARNING})


def _tags(result: dict[str, Any]) -> list[str]:
    """The scenario's tags (a document written before they were kept has none)."""
    return result.get("tags") or []


def _unit(result: dict[str, Any]) -> dict[str, Any]:
    """A scenario run as its section shows it: every step with its findings (worst first),
    whether it was skipped after an earlier step failed, and, for a streamed answer, its
    timeline; how it failed (`failed.failure_of`, None unless it did); what the filter reads."""
    skipped = skipped_steps(result)
    steps = [step | {"findings": _by_severity(step["findings"]), "skipped": step["step"] in skipped,
                     "picture": stream_picture(step["stream"]) if step["stream"] else None}
             for step in result["steps"]]
    counts = {name: sum(f["severity"] == name for step in steps for f in step["findings"])
              for name in ("error", "warning", "note")}
    return result | {"anchor": unit_anchor(result["scenario"], result["mode"]), "steps": steps, "counts": counts,
                     "failure": failure_of(result), "kinds": _kinds(result), "tags": _tags(result)}


@cache
def _environment() -> Environment:
    """The report's templates, each compiled once per process (a matrix writes a report per target)."""
    return Environment(loader=PackageLoader("responses_parity.harness", "templates"),
                       autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def prepare_html() -> None:
    """Compile the report's templates now (about 0.1 s), not when the report is written: a run
    does it while its servers start."""
    for name in ("report.html.j2", "charts.svg.j2"):
        _environment().get_template(name)


def modes_run(results: list[dict[str, Any]]) -> list[str]:
    """The modes some result of a run is in, in `MODES` order: the columns a report shows."""
    return [mode for mode in MODES if any(result["mode"] == mode for result in results)]


def render_html(document: dict[str, Any]) -> str:
    target = document["target"]["name"]
    ran = modes_run(document["results"])
    scenarios: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for result in document["results"]:
        scenarios.setdefault(result["scenario"], {}).setdefault(result["mode"], []).append(result)
    units = [_unit(result) for modes in scenarios.values() for mode in ran for result in modes.get(mode, [])]
    matrix = [{"scenario": name, "policy": not modes[next(iter(modes))][0]["openai_counterpart"],
               "cells": [_cell(modes.get(mode, [])) for mode in ran],
               "outcomes": sorted({result["outcome"] for results in modes.values() for result in results}),
               "tags": _tags(next(iter(modes.values()))[0]),
               "kinds": sorted({kind for results in modes.values() for result in results for kind in _kinds(result)})}
              for name, modes in scenarios.items()]
    seen = {kind for unit in units for kind in unit["kinds"]}
    kinds = [str(kind) for kind in Kind if kind in seen] + sorted(seen - set(Kind))
    return _environment().get_template("report.html.j2").render(
        document=document, target=target, modes=ran, matrix=matrix,
        failures=[unit for unit in units if unit["failure"] is not None],
        others=[unit for unit in units if unit["failure"] is None],
        tags=sorted({tag for unit in units for tag in unit["tags"]}),
        aspects=[(kind, aspect_of(kind)) for kind in kinds])
