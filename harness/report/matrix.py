"""The cross-gateway matrix: the same scenarios against several targets, one after another,
tabulated per scenario and stream mode, with the latency each gateway adds over the scripted
model alone and a short account of what each gets right and wrong.

`run_matrix` runs the targets and writes each one's full report folder; `build_matrix` turns
those reports' documents (`results.json`) into the matrix, so a matrix can also be rebuilt
from saved reports: `matrix.json` (`matrix_document`) says what else it was built from (the
command, each target as described, why one could not run, its report folder), and, for one
shard of a split matrix, which (`matrix_merge.py` puts the shards together). One redactor
learns the secrets of every target and writes everything. Rendering is `matrix.md.j2` /
`matrix.html.j2`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from jinja2 import Environment, PackageLoader

from ..engine.profile import ProfileError, find_profile
from ..engine.session import OPENAI, REFERENCE, TargetOptions, open_session
from ..engine.stack_process import APART_FROM_UNITS
from ..errors import HarnessError
from ..judge.results import UnitFinished
from ..model.findings import Kind, Severity, group_of
from ..scenario.capabilities import HOSTED_TOOLS
from ..scenario.loader import LoadedScenario
from ..scenario.model import MODES, Mode
from ..wire.redaction import Redactor
from .charts import latency_chart
from .documents import RunInfo, write_reports
from .html import aspect_of, unit_anchor

CellStatus = Literal["pass", "divergence", "unsupported", "could_not_run", "none"]
HostedToolStatus = Literal["runs", "lacks", "unknown"]
TOP_DIVERGENCES = 6


@dataclass(frozen=True)
class Cell:
    status: CellStatus
    errors: int = 0
    warnings: int = 0
    detail: str = ""
    """Why unsupported, or what could not run."""
    target: str = ""
    anchor: str | None = None
    """Where the scenario run's details are in its target's report (`unit_anchor`); None
    when the target did not run it."""

    @property
    def label(self) -> str:
        if self.status == "divergence":
            return f"divergence ({self.errors} error{'s' * (self.errors != 1)})"
        if self.status == "pass" and self.warnings:
            return f"pass ({self.warnings} warning{'s' * (self.warnings != 1)})"
        return "-" if self.status == "none" else self.status.replace("_", " ")

    @property
    def short(self) -> str:
        """For a table with many columns."""
        if self.status == "divergence":
            return f"**div {self.errors}e**"
        if self.status == "pass" and self.warnings:
            return f"pass {self.warnings}w"
        return {"none": "-", "unsupported": "unsup", "could_not_run": "**could not run**"}.get(self.status,
                                                                                                self.status)


def cell_of(result: dict[str, Any] | None) -> Cell:
    """A scenario run's cell, from its entry in a results document. Known divergences (the
    target's baseline) count as neither errors nor warnings."""
    if result is None:
        return Cell("none")
    anchor = unit_anchor(result["scenario"], result["mode"])
    if result["outcome"] == "unsupported":
        return Cell("unsupported", detail=result["unsupported"] or "", anchor=anchor)
    findings = [f for step in result["steps"] for f in step["findings"] if not f["known"]]
    errors = sum(f["severity"] == "error" for f in findings)
    warnings = sum(f["severity"] == "warning" for f in findings)
    if result["outcome"] == "could_not_run":
        reasons = [step["error"] for step in result["steps"] if step["error"]]
        return Cell("could_not_run", errors, warnings, reasons[0] if reasons else "", anchor=anchor)
    return Cell("divergence" if result["outcome"] == "fail" else "pass", errors, warnings, anchor=anchor)


@dataclass(frozen=True)
class Latency:
    """Per step that reached the model: the gateway's time, the scripted model's own time
    within it, and the difference (what the gateway adds), in milliseconds."""

    steps: int
    gateway_median_ms: float
    gateway_p95_ms: float
    upstream_median_ms: float
    added_median_ms: float
    added_p95_ms: float


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]


def latency_of(document: dict[str, Any]) -> Latency | None:
    """From the timings of a results document's steps that were answered (HTTP 2xx, no
    transport error) after at least one model request; None if there are none."""
    gateway, upstream = [], []
    for result in document["results"]:
        for step in result["steps"]:
            timing, contract = step.get("timing"), step["contract"] or {}
            if not timing or not timing["model_requests"] or timing["upstream_s"] is None:
                continue
            status = contract.get("http_status")
            if status is None or not 200 <= status < 300 or any(f["kind"] == "transport" for f in step["findings"]):
                continue
            gateway.append(timing["elapsed_s"] * 1000)
            upstream.append(timing["upstream_s"] * 1000)
    if not gateway:
        return None
    added = [g - u for g, u in zip(gateway, upstream, strict=True)]
    return Latency(len(gateway), round(statistics.median(gateway), 1), round(_p95(gateway), 1),
                   round(statistics.median(upstream), 1), round(statistics.median(added), 1), round(_p95(added), 1))


@dataclass(frozen=True)
class HostedTool:
    """Whether a target runs a hosted tool: `runs` (its profile does not say it lacks it),
    `lacks` (its profile says so, `why` with a source) or `unknown` (no profile speaks for it)."""

    tool: str
    status: HostedToolStatus
    why: str = ""


@dataclass
class TargetRun:
    """One target's part of a matrix: its report document, or why it could not run at all."""

    name: str
    title: str
    document: dict[str, Any] | None = None
    failure: str | None = None
    rewrites: list[str] = field(default_factory=list)
    lacks: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    report_dir: Path | None = None
    lacks_declared: bool = True
    """False for a gateway known only by its URL: nothing says what it lacks."""
    target: str = ""
    """The target as `--targets` named it (a profile file's path, say), when not `name`."""

    @property
    def state(self) -> str:
        """How it did, in a few words: `parity 3/4`, or `could not run`."""
        if self.document is None:
            return "could not run"
        counts = self.document["summary"]["parity"]
        return f"parity {counts['pass']}/{counts['runs']}"

    def to_dict(self, report: str | None) -> dict[str, Any]:
        """What `matrix.json` keeps of it, with where its report folder is (`of_dict`)."""
        return {"target": self.target or self.name, "name": self.name, "title": self.title, "failure": self.failure,
                "rewrites": self.rewrites, "lacks": self.lacks, "notes": self.notes,
                "lacks_declared": self.lacks_declared, "report": report}

    @classmethod
    def of_dict(cls, data: dict[str, Any]) -> TargetRun:
        """The target as described in `matrix.json`, without its report (`to_dict`)."""
        return cls(data["name"], data["title"], failure=data["failure"], rewrites=list(data["rewrites"]),
                   lacks=dict(data["lacks"]), notes=list(data["notes"]), lacks_declared=data["lacks_declared"],
                   target=data["target"])

    def hosted_tools(self) -> list[HostedTool]:
        """Per hosted tool (`HOSTED_TOOLS`), whether the gateway runs it, from `lacks`."""
        if not self.lacks_declared:
            return [HostedTool(tool, "unknown") for tool in HOSTED_TOOLS]
        return [HostedTool(tool, "lacks", self.lacks[tool]) if tool in self.lacks else HostedTool(tool, "runs")
                for tool in HOSTED_TOOLS]


def describe_target(name: str, profile_dirs: Sequence[Path] = ()) -> TargetRun:
    """A target's title, rewrites, lacks and notes, from its profile if it has one; a profile
    at another version (`smg@1.12.0`) is a target of its own, named with its version."""
    if name == REFERENCE:
        return TargetRun(name, "reference gateway (embedded, this project's executable spec)", target=name)
    if name == OPENAI:
        return TargetRun(name, "OpenAI (live)", target=name)
    try:
        profile = find_profile(name, profile_dirs)
    except ProfileError:
        profile = None  # reported when the run tries to open it
    if profile is None:
        return TargetRun(name, name, lacks_declared=False, target=name)
    return TargetRun(f"{profile.name}@{profile.version}" if "@" in name else profile.name, profile.title,
                     rewrites=profile.rewrite.describe(), lacks=dict(profile.lacks), notes=list(profile.notes),
                     target=name)


def run_matrix(targets: Sequence[str], units: Sequence[tuple[LoadedScenario, Mode]], base: TargetOptions,
               report_root: Path, *, jobs: int = 2, say: Callable[[str], None] = lambda line: None,
               on_event: Callable[[UnitFinished], None] | None = None,
               redactor: Redactor | None = None, shard: dict[str, Any] | None = None) -> list[TargetRun]:
    """Run `units` against each target in turn (each started, run and stopped before the next:
    a 2-core machine runs one gateway at a time), writing each one's report to
    `report_root/<target>` (as one shard of a split run when `shard` says which: `RunInfo.shard`).
    A target that cannot be installed or started is recorded with why, and the others still
    run. `redactor` (default: a new one) learns each target's secrets."""
    redactor = redactor or Redactor()
    mcp_names = {name for loaded, _ in units for name in loaded.scenario.fixtures}
    runs = []
    for name in targets:
        run = describe_target(name, base.profile_dirs)
        say(f"== {name}: {run.title}")
        options = replace(base, target=name)
        started, clock = datetime.now(UTC), time.monotonic()
        try:
            with open_session(options, mcp_names, say, redactor, apart=len(units) >= APART_FROM_UNITS) as session:
                results = session.run(units, jobs, on_event)
        except HarnessError as error:
            run.failure = str(error)
            say(f"{name} could not run: {error}")
            runs.append(run)
            continue
        run.report_dir = report_root / run.name
        run.document = write_reports(run.report_dir, results,
                                     RunInfo(session.target, started, time.monotonic() - clock, redactor, shard=shard))
        runs.append(run)
    return runs


@dataclass(frozen=True)
class Divergence:
    """A kind of divergence a target shows, with how many scenario runs show it."""

    kind: str
    rule: str
    message: str
    runs: int
    example: str
    anchor: str
    """Where the example run is in the target's report (`unit_anchor`)."""


def _diverging(finding: dict[str, Any]) -> bool:
    """Whether a finding counts as a divergence of its own: a failing one that is not what an
    error answer caused (`judge/cause.py`: the error is the divergence)."""
    return finding["severity"] == "error" and not finding["known"] and not finding.get("consequence")


def divergences_of(document: dict[str, Any]) -> list[Divergence]:
    """A target's divergences of its own (`_diverging`) grouped by what differs (kind, rule,
    key), most frequent first."""
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for result in document["results"]:
        if not result["openai_counterpart"]:
            continue
        for step in result["steps"]:
            for finding in step["findings"]:
                if _diverging(finding):
                    groups.setdefault(group_of(finding), []).append((result["scenario"], result["mode"]))
    found = []
    for (kind, rule, what), units in groups.items():
        scenario, mode = min(units)
        found.append(Divergence(kind, rule, what, len(set(units)), f"{scenario} [{mode}]", unit_anchor(scenario, mode)))
    return sorted(found, key=lambda d: (-d.runs, d.rule, d.message))


@dataclass(frozen=True)
class AspectDivergences:
    """What a target diverges in within one aspect of the contract: how many runs, and the
    divergences, most frequent first (at most `TOP_DIVERGENCES`; `more`: how many others)."""

    aspect: str
    runs: int
    divergences: list[Divergence]
    more: int


@dataclass(frozen=True)
class Summary:
    right: list[str]
    """Scenarios with an OpenAI counterpart that pass in every mode the target ran."""
    clean_aspects: list[str]
    """Aspects no run of a scenario with an OpenAI counterpart diverged in."""
    aspect_runs: dict[str, int]
    """Aspect -> how many such runs diverged in it."""
    wrong: list[Divergence]
    passing: int
    runs: int
    by_aspect: list[AspectDivergences] = field(default_factory=list)
    """The divergences grouped by aspect, the aspects as `aspect_runs` orders them."""


def summary_of(document: dict[str, Any]) -> Summary:
    """What a target gets right (scenarios passing in every mode, aspects it never diverges in)
    and wrong (the aspects it diverges in, and its divergences: the most frequent, and per
    aspect)."""
    by_scenario: dict[str, list[str]] = {}
    diverged: Counter[str] = Counter()
    for result in document["results"]:
        if not result["openai_counterpart"] or result["outcome"] == "unsupported":
            continue
        by_scenario.setdefault(result["scenario"], []).append(result["outcome"])
        kinds = {f["kind"] for step in result["steps"] for f in step["findings"] if _diverging(f)}
        diverged.update(aspect_of(kind) for kind in kinds)
    right = sorted(name for name, outcomes in by_scenario.items() if set(outcomes) == {"pass"})
    clean = [kind.aspect for kind in Kind if not diverged[kind.aspect]]
    counts = document["summary"]["parity"]
    divergences = divergences_of(document)
    by_aspect = []
    for aspect, runs in diverged.most_common():
        within = [divergence for divergence in divergences if aspect_of(divergence.kind) == aspect]
        by_aspect.append(AspectDivergences(aspect, runs, within[:TOP_DIVERGENCES], len(within[TOP_DIVERGENCES:])))
    return Summary(right, clean, dict(diverged.most_common()), divergences[:TOP_DIVERGENCES], counts["pass"],
                   counts["runs"], by_aspect)


@dataclass(frozen=True)
class Row:
    scenario: str
    title: str
    policy: bool
    cells: list[Cell]
    """Per target, per mode (target-major)."""
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Matrix:
    runs: list[TargetRun]
    modes: tuple[str, ...]
    rows: list[Row]
    generated_at: str
    command: str
    shard: dict[str, Any] | None = None
    """For one shard of a split matrix: which, every unit of the whole, and the options that
    selected them (`parity matrix` words: `-s`, `-t`, `--mode`)."""

    def summaries(self) -> dict[str, Summary]:
        return {run.name: summary_of(run.document) for run in self.runs if run.document is not None}

    def latencies(self) -> dict[str, Latency | None]:
        return {run.name: latency_of(run.document) for run in self.runs if run.document is not None}

    def details(self) -> list[dict[str, Any]]:
        """Every divergent or failed cell with its findings (errors and warnings, each
        difference once with a count) and the evidence of what OpenAI does."""
        found = []
        for run in self.runs:
            for result in (run.document or {}).get("results", []):
                if result["outcome"] not in ("fail", "could_not_run"):
                    continue
                findings = Counter()
                for step in result["steps"]:
                    if step["error"]:
                        findings[f"`{step['step']}` could not run: {step['error']}"] += 1
                    for finding in step["findings"]:
                        if Severity.named(finding["severity"]) >= Severity.WARNING and not finding["known"]:
                            findings[f"{finding['severity']}: {group_of(finding)[2]}"] += 1
                found.append({"target": run.name, "scenario": result["scenario"], "mode": result["mode"],
                              "anchor": unit_anchor(result["scenario"], result["mode"]),
                              "policy": not result["openai_counterpart"], "evidence": result["evidence"],
                              "findings": sorted(findings.items(), key=lambda pair: not pair[0].startswith("error"))})
        return found


def build_matrix(runs: list[TargetRun], command: str, shard: dict[str, Any] | None = None) -> Matrix:
    results: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    meta: dict[str, dict[str, Any]] = {}
    for run in runs:
        for result in (run.document or {}).get("results", []):
            results.setdefault(result["scenario"], {})[(run.name, result["mode"])] = result
            meta.setdefault(result["scenario"], result)
    modes = tuple(m for m in MODES if any(mode == m for cells in results.values() for _, mode in cells))
    rows = [Row(scenario, meta[scenario]["title"], not meta[scenario]["openai_counterpart"],
                [replace(cell_of(cells.get((run.name, mode))), target=run.name) if run.document is not None
                 else Cell("could_not_run", detail="the target could not run", target=run.name)
                 for run in runs for mode in modes],
                meta[scenario]["evidence"])
            for scenario, cells in sorted(results.items(), key=lambda pair: (not meta[pair[0]]["openai_counterpart"],
                                                                            pair[0]))]
    return Matrix(runs, modes, rows, datetime.now(UTC).isoformat(timespec="seconds"), command, shard)


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _environment(autoescape: bool) -> Environment:
    environment = Environment(loader=PackageLoader("responses_parity.harness", "templates"),
                              autoescape=autoescape, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)
    environment.filters["md"] = _md_cell
    return environment


def report_links(matrix: Matrix, home: Path) -> dict[str, str]:
    """Per target that wrote a report, its folder as a relative link from `home`, the folder
    the matrix is written to."""
    return {run.name: Path(os.path.relpath(run.report_dir, home)).as_posix()
            for run in matrix.runs if run.report_dir is not None}


def render_matrix(matrix: Matrix, template: Literal["md", "html"], home: Path) -> str:
    """The matrix as Markdown or HTML, linking each target's report relative to `home`."""
    latencies = matrix.latencies()
    added = {name: (latency.added_median_ms, latency.added_p95_ms) for name, latency in latencies.items() if latency}
    context = {"matrix": matrix, "summaries": matrix.summaries(), "latencies": latencies,
               "details": matrix.details(), "reports": report_links(matrix, home), "hosted_tools": HOSTED_TOOLS,
               "latency_chart": latency_chart(added)}
    return _environment(template == "html").get_template(f"matrix.{template}.j2").render(context)


def matrix_document(matrix: Matrix, home: Path) -> dict[str, Any]:
    """What `matrix.json` holds: how the matrix was made, its targets (`TargetRun.to_dict`, their
    report folders relative to `home`) and, for a shard, which (`Matrix.shard`)."""
    reports = report_links(matrix, home)
    return {"command": matrix.command, "generated_at": matrix.generated_at,
            "targets": [run.to_dict(reports.get(run.name)) for run in matrix.runs]} | \
        ({"shard": matrix.shard} if matrix.shard else {})


def write_matrix(matrix: Matrix, markdown_path: Path, redactor: Redactor | None = None) -> Path:
    """Write the matrix as Markdown to `markdown_path`, and as HTML and its document
    (`matrix_document`) beside it, through `redactor` (default: one that knows no secret by
    value); returns the HTML path."""
    redactor = redactor or Redactor()
    home = markdown_path.parent
    home.mkdir(parents=True, exist_ok=True)
    redactor.write_text(markdown_path, render_matrix(matrix, "md", home))
    html_path = markdown_path.with_suffix(".html")
    redactor.write_text(html_path, render_matrix(matrix, "html", home))
    redactor.write_json(markdown_path.with_suffix(".json"), matrix_document(matrix, home))
    return html_path
