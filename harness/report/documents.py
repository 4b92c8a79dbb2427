"""Reports of a run, written to one folder: `results.json` (everything, for machines),
`results.jsonl` (one scenario run per line), `report.md` and `report.html` (for people: what
failed first, each failing run led by its root cause, then the parity matrix, the streams side
by side, the coverage of OpenAI's types), and `exchanges/`
with the raw exchange of every failing step. Everything is written through the run's
`Redactor`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..engine.targets import Target
from ..judge.results import Outcome, ScenarioResult, StepResult
from ..model.contract import sequence_marks, streamed_sequence
from ..model.versions import versions
from ..scenario.model import FORMAT_VERSION
from ..scenario.vocabulary import output_item_types, sdk_event_types
from ..wire.redaction import Redactor
from .failed import FAILED, roots_of, skipped_steps
from .html import modes_run, render_html, unit_anchor


@dataclass(frozen=True)
class RunInfo:
    target: Target
    started_at: datetime
    duration_s: float
    redactor: Redactor
    """The run's secrets, removed from everything written."""
    file_errors: tuple[str, ...] = ()
    not_run: int = 0
    """Selected units the run never started: it stopped at its first failure (`--exitfirst`)."""
    shard: dict[str, Any] | None = None
    """For one shard of a run split over machines (`shards.py`): which, and every unit of the
    whole run in order, so that `parity merge` can put the shards together."""


def _exchange_name(result: ScenarioResult, step: StepResult) -> str:
    return f"{result.scenario.id}__{result.mode}__{step.step_id}.json"


MAX_ARRIVALS = 5000
"""The arrival times a report keeps of one stream: the first ones, enough for any picture."""


def _stream_document(step: StepResult) -> dict[str, Any] | None:
    """A streamed answer's sequence (runs collapsed), the sequence it is held against and
    where that comes from (or why there is none), and when each of its events arrived (ms
    after the request was sent; None when not recorded)."""
    exchange, contract, reference = step.exchange, step.contract, step.reference
    if exchange is None or contract is None or reference is None:
        return None
    times = exchange.event_times_s if len(exchange.event_times_s) == len(exchange.events) else None
    marks = sequence_marks(exchange, step.chat)
    return {"events": list(streamed_sequence(contract) or ()),
            "reference": None if reference.events is None else list(reference.events),
            "reference_label": reference.source if reference.events is not None else None,
            "no_reference": reference.source if reference.events is None else None,
            "arrivals": None if times is None else [[label, round(times[index] * 1000, 3)]
                                                    for index, label in marks[:MAX_ARRIVALS]],
            "arrivals_total": len(marks)}


def _step_document(result: ScenarioResult, step: StepResult) -> dict[str, Any]:
    scripted = next((s for s in result.scenario.steps if s.id == step.step_id), None)
    return {
        "step": step.step_id,
        "inferred": scripted.inferred if scripted else None,
        "outcome": step.outcome,
        "error": step.error,
        "contract": step.contract.to_dict() if step.contract else None,
        "findings": [finding.to_dict() for finding in step.findings],
        "stream": _stream_document(step),
        "exchange_file": f"exchanges/{_exchange_name(result, step)}" if step.outcome != "pass" and step.exchange
        else None,
        "timing": _timing(step),
    }


def _timing(step: StepResult) -> dict[str, Any] | None:
    """How long the target took for the step, and how much of it the scripted model took
    answering the requests the gateway sent it (`model_requests` of them)."""
    if step.exchange is None:
        return None
    requests = step.observed.model_requests if step.observed else []
    served = [request["served_s"] for request in requests if "served_s" in request]
    return {"elapsed_s": round(step.exchange.elapsed_s, 6), "model_requests": len(requests),
            "upstream_s": round(sum(served), 6) if len(served) == len(requests) else None}


def coverage(results: list[ScenarioResult]) -> dict[str, dict[str, Any]]:
    """Which of the stream event types and output item types the installed openai SDK knows
    the run's answers exercised (how many steps showed each), and which none did."""
    events: Counter[str] = Counter()
    items: Counter[str] = Counter()
    for result in results:
        for step in result.steps:
            if step.exchange is None:
                continue
            events.update({e.type for e in step.exchange.events if e.type and not e.is_done_sentinel})
            response = step.exchange.latest_response() or {}
            items.update({item.get("type") for item in response.get("output") or [] if isinstance(item, dict)})
    known = {"event_types": (events, sdk_event_types()), "item_types": (items, output_item_types())}
    return {name: {"exercised": {t: seen[t] for t in sorted(universe) if seen[t]},
                   "not_exercised": sorted(t for t in universe if not seen[t]),
                   "unknown_to_sdk": sorted(t for t in seen if t not in universe)}
            for name, (seen, universe) in known.items()}


OUTCOMES = ("pass", "known", "fail", "could_not_run", "unsupported")


@dataclass(frozen=True)
class Counted:
    """What the tally takes of one scenario run. The pytest plugin carries it in each test's
    report, so that a pytest-xdist controller tallies what its workers ran."""

    outcome: Outcome
    openai_counterpart: bool
    known: int
    """How many of its findings the baseline knew."""

    @classmethod
    def of(cls, result: ScenarioResult) -> Counted:
        return cls(result.outcome, result.scenario.openai_counterpart,
                   sum(finding.known for _, finding in result.findings))

    @classmethod
    def of_entry(cls, entry: dict[str, Any]) -> Counted:
        """The same, of a scenario run as a results document holds it (`result_entry`)."""
        return cls(entry["outcome"], entry["openai_counterpart"],
                   sum(bool(finding["known"]) for step in entry["steps"] for finding in step["findings"]))


def tally(results: Iterable[ScenarioResult]) -> dict[str, Any]:
    """The one summary of a run that the console, the reports and the pytest plugin all show
    (see `tally_of`)."""
    return tally_of(Counted.of(result) for result in results)


def tally_of(units: Iterable[Counted]) -> dict[str, Any]:
    """Scenario runs per outcome; parity with OpenAI and gateway policy as passing runs over
    runs that passed, failed or diverged as the baseline knows (a run that could not run, or
    that the target does not support, says nothing either way), with how many were known; and
    how many findings the baseline knew."""
    units = list(units)
    outcomes = Counter(unit.outcome for unit in units)
    counts = {"parity": {"pass": 0, "known": 0, "runs": 0}, "gateway_policy": {"pass": 0, "known": 0, "runs": 0}}
    for unit in units:
        if unit.outcome in ("pass", "known", "fail"):
            group = counts["parity" if unit.openai_counterpart else "gateway_policy"]
            group["runs"] += 1
            group["pass"] += unit.outcome == "pass"
            group["known"] += unit.outcome == "known"
    return {"units": len(units), **{name: outcomes.get(name, 0) for name in OUTCOMES}, **counts,
            "known_findings": sum(unit.known for unit in units)}


def tally_line(counts: dict[str, Any]) -> str:
    """The tally in one line of words; runs the baseline knows are counted apart, never as passes."""
    def share(group: dict[str, int]) -> str:
        return f"{group['pass']}/{group['runs']}" + (f", {group['known']} known" if group["known"] else "")

    return (f"{counts['pass']} passed, " + (f"{counts['known']} known, " if counts["known"] else "")
            + f"{counts['fail']} failed, {counts['could_not_run']} could not run, {counts['unsupported']} unsupported; "
            f"parity with OpenAI {share(counts['parity'])}, gateway policy {share(counts['gateway_policy'])}"
            + (f"; {counts['known_findings']} known divergence(s) from the baseline"
               if counts["known_findings"] else ""))


def results_document(results: list[ScenarioResult], info: RunInfo) -> dict[str, Any]:
    return info.redactor.redact({
        "tool": {"name": "responses-parity", **{"version": versions()["responses-parity"]}},
        "scenario_format": FORMAT_VERSION,
        "sdk": {name: version for name, version in versions().items() if name != "responses-parity"},
        "target": {"name": info.target.name, "base_url": info.target.base_url, "model": info.target.model},
        "started_at": info.started_at.isoformat(timespec="seconds"),
        "duration_s": round(info.duration_s, 3),
        "summary": tally(results) | {"file_errors": len(info.file_errors), "not_run": info.not_run},
        "file_errors": list(info.file_errors),
        "coverage": coverage(results),
        "results": [result_entry(result) for result in results],
    } | ({"shard": info.shard} if info.shard is not None else {}))


def result_entry(result: ScenarioResult) -> dict[str, Any]:
    """One scenario run as the results document holds it."""
    return {
        "scenario": result.scenario.id,
        "title": result.scenario.title,
        "tags": list(result.scenario.tags),
        "path": result.path,
        "mode": result.mode,
        "outcome": result.outcome,
        "attempt": result.attempt,
        "unsupported": result.unsupported,
        "openai_counterpart": result.scenario.openai_counterpart,
        "duration_s": round(result.duration_s, 3),
        "evidence": result.scenario.evidence.model_dump(exclude_defaults=True),
        "steps": [_step_document(result, step) for step in result.steps],
    }


_MARK = {"pass": "pass", "known": "known", "fail": "**FAIL**", "could_not_run": "**could not run**",
         "unsupported": "unsupported"}


def _finding_line(step: str, finding: dict[str, Any]) -> str:
    known = " *(known divergence)*" if finding["known"] else ""
    return (f"step `{step}`: {finding['severity']}{known} ({finding['kind']}, `{finding['rule']}`): "
            f"{finding['message']}")


def _unit_lines(result: dict[str, Any]) -> list[str]:
    """A scenario run that did not pass, led by its root cause (`failed`): each root a line, what
    it caused (or found again) under it, then the steps skipped and the raw exchanges."""
    lines = [f"<a id=\"{unit_anchor(result['scenario'], result['mode'])}\"></a>", "",
             f"### {result['scenario']} [{result['mode']}]", ""]
    for root in roots_of(result):
        lines.append(f"- step `{root.step}` could not run: {root.error}" if root.finding is None
                     else f"- {_finding_line(root.step, root.finding)}")
        lines += [f"  - {'caused by it' if finding.get('consequence') else 'the same, again'}: "
                  f"{_finding_line(step, finding)}" for step, finding in root.caused]
    skipped = skipped_steps(result)
    lines += [f"- step `{step}` skipped, since an earlier step failed: {why}" for step, why in skipped.items()]
    for step in result["steps"]:
        if step["outcome"] != "pass" and step["inferred"] and step["step"] not in skipped:
            lines.append(f"- step `{step['step']}` states more than OpenAI's recordings show: {step['inferred']}")
        if step["exchange_file"]:
            lines.append(f"- raw exchange of `{step['step']}`: [{step['exchange_file']}]({step['exchange_file']})")
    return [*lines, ""]


def markdown(document: dict[str, Any]) -> str:
    """report.md, in report.html's order: the summary, what failed (each failing run led by its
    root cause), the matrix, the known divergences, the coverage of OpenAI's types."""
    summary = document["summary"]
    lines = [
        "# responses-parity report",
        "",
        f"Target **{document['target']['name']}** ({document['target']['base_url']}, model "
        f"`{document['target']['model']}`), {document['started_at']}, {document['duration_s']}s.  ",
        f"responses-parity {document['tool']['version']}, scenario format {document['scenario_format']}, "
        + ", ".join(f"{name} SDK {version}" for name, version in document["sdk"].items()) + ".",
        "",
        f"{summary['pass']} passed, " + (f"{summary['known']} known, " if summary["known"] else "")
        + f"{summary['fail']} failed, {summary['could_not_run']} could not run, "
        f"{summary['unsupported']} unsupported by the target ({summary['units']} scenario runs); "
        f"{summary['file_errors']} scenario file error(s)"
        + (f"; {summary['not_run']} not run (the run stopped at its first failure)" if summary["not_run"] else "")
        + (f"; {summary['known_findings']} known divergence(s) from the baseline." if summary["known_findings"]
           else "."),
        "",
        f"**Parity with OpenAI**: {summary['parity']['pass']} of {summary['parity']['runs']} runs of scenarios "
        f"with an OpenAI counterpart pass"
        + (f", {summary['parity']['known']} diverge as the baseline knows" if summary["parity"]["known"] else "")
        + " (runs that could not run or are unsupported count neither way). "
        f"Gateway policy (no OpenAI counterpart, not counted toward parity): "
        f"{summary['gateway_policy']['pass']} of {summary['gateway_policy']['runs']}.",
        "",
    ]
    ran = modes_run(document["results"])
    by_scenario: dict[str, dict[str, dict[str, Any]]] = {}
    for result in document["results"]:
        by_scenario.setdefault(result["scenario"], {})[result["mode"]] = result
    in_order = [modes[mode] for modes in by_scenario.values() for mode in ran if mode in modes]
    failed = [result for result in in_order if result["outcome"] in FAILED]
    if failed or document["file_errors"]:
        lines += ["## What failed", ""]
    for result in failed:
        lines += _unit_lines(result)
    if document["file_errors"]:
        lines += ["Scenario file errors:", ""] + [f"- {error}" for error in document["file_errors"]] + [""]
    lines += ["## Parity matrix", "", "| scenario | " + " | ".join(ran) + " |", "|---|" + "---|" * len(ran)]
    for scenario, modes in by_scenario.items():
        policy = not next(iter(modes.values()))["openai_counterpart"]
        name = f"{scenario} *(gateway policy)*" if policy else scenario
        lines.append(f"| {name} | " + " | ".join(_MARK[modes[mode]["outcome"]] if mode in modes else "-"
                                                  for mode in ran) + " |")
    if known := [result for result in in_order if result["outcome"] == "known"]:
        lines += ["", "## Known divergences (the baseline's)", ""]
        for result in known:
            lines += _unit_lines(result)
    lines += ["", "## Coverage of OpenAI's types", "", "| | exercised | not exercised |", "|---|---|---|"]
    for name, label in (("event_types", "stream event types"), ("item_types", "output item types")):
        part = document["coverage"][name]
        lines.append(f"| {label} | {len(part['exercised'])}: " + ", ".join(f"`{t}`" for t in part["exercised"])
                     + f" | {len(part['not_exercised'])}: " + ", ".join(f"`{t}`" for t in part["not_exercised"])
                     + " |")
    return "\n".join(lines) + "\n"


def write_reports(directory: Path, results: list[ScenarioResult], info: RunInfo) -> dict[str, Any]:
    """Write the report folder (replacing what a previous run left there); returns the document."""
    document = results_document(results, info)
    exchanges = write_document_reports(directory, document, info.redactor)
    for result in results:
        for step in result.steps:
            if step.outcome != "pass" and step.exchange is not None:
                saved = step.exchange.to_file() | {"observed": step.observed.to_dict() if step.observed else None}
                info.redactor.write_json(exchanges / _exchange_name(result, step), saved)
    return document


def write_document_reports(directory: Path, document: dict[str, Any], redactor: Redactor) -> Path:
    """Write a results document's files to the report folder (`results.json`, `results.jsonl`,
    `report.md`, `report.html`), emptying its `exchanges/` folder, which it returns."""
    directory.mkdir(parents=True, exist_ok=True)
    exchanges = directory / "exchanges"
    exchanges.mkdir(exist_ok=True)
    for old in exchanges.glob("*.json"):
        old.unlink()
    redactor.write_json(directory / "results.json", document)
    redactor.write_text(directory / "results.jsonl", "".join(json.dumps(unit) + "\n" for unit in document["results"]))
    redactor.write_text(directory / "report.md", markdown(document))
    redactor.write_text(directory / "report.html", render_html(document))
    return exchanges
