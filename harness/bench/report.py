"""What a benchmark run says: per target and workload, the figures paired with the floor batch
measured just before each of the target's batches, as Markdown and JSON.

Added latency is paired round by round: in each round, the target batch's median (p95) minus
its floor batch's median (p95); the table gives the median of those over the rounds. Throughput
is each round's requests per second and its share of the floor's in the same round, median over
rounds. CPU per request is the CPU time the target's process spent during its batches, over the
requests of those batches.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..wire.redaction import Redactor
from .run import CHECKER, FLOOR, BenchResult, Measured
from .workloads import CHAIN_TURNS, LABELS, WORKLOADS, Batch, Workload

MS = 1000.0
MIB = 2**20


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` in 0..1) of non-empty `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _median_of(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Figures:
    """One target's figures for one workload (seconds, requests per second, CPU seconds)."""

    target: str
    workload: Workload
    p50: float | None = None
    p95: float | None = None
    added_p50: float | None = None
    added_p95: float | None = None
    whole_p50: float | None = None
    """Streams: the whole stream's median (p50 is the first event's)."""
    added_whole_p50: float | None = None
    rps: float | None = None
    share: float | None = None
    cpu_per_request: float | None = None
    checker_cpu_per_request: float | None = None
    """A proxy's checker process's (`cpu_per_request` is its relay's)."""
    requests: int = 0
    errors: int = 0
    first_error: str | None = None
    not_run: str | None = None


STREAMED: frozenset[Workload] = frozenset({"stream", "socket"})
"""Workloads whose first event is their headline figure (the whole answer is the second)."""


def _series(batch: Batch, workload: Workload) -> list[float]:
    return batch.firsts if workload in STREAMED else batch.totals


def own_batches(result: BenchResult, target: str, workload: Workload) -> list[Measured]:
    """`target`'s batches of `workload`: the floor's are all paired with a target; another
    target's are those not measured as a proxy's baseline."""
    return [m for m in result.measured if m.workload == workload and m.target == target
            and (m.floor_for is not None) == (target == FLOOR)]


def figures(result: BenchResult, target: str, workload: Workload) -> Figures:
    """`target`'s figures for `workload`, paired with the batches of its baseline (the floor, or
    for a proxy the gateway behind it) measured before its own (the floor's own figures when
    `target` is the floor)."""
    mine = own_batches(result, target, workload)
    measured_target = next((t for t in result.targets if t.name == target), None)
    if measured_target is not None and (reason := measured_target.cannot.get(workload)):
        return Figures(target, workload, not_run=reason)
    baseline = measured_target.baseline if measured_target is not None else FLOOR
    floors = {(m.round, m.floor_for): m for m in result.measured if m.workload == workload and m.target == baseline}
    added50, added95, added_whole, rps, shares = [], [], [], [], []
    for m in mine:
        paired = floors.get((m.round, m.target)) if target != FLOOR else None
        series = _series(m.batch, workload)
        if m.batch.wall_s > 0:
            rps.append(len(m.batch.totals) / m.batch.wall_s)
        if paired is None or not series or not _series(paired.batch, workload):
            continue
        floor_series = _series(paired.batch, workload)
        added50.append(statistics.median(series) - statistics.median(floor_series))
        added95.append(percentile(series, 0.95) - percentile(floor_series, 0.95))
        if workload in STREAMED and m.batch.totals and paired.batch.totals:
            added_whole.append(statistics.median(m.batch.totals) - statistics.median(paired.batch.totals))
        if paired.batch.wall_s > 0 and paired.batch.totals and m.batch.wall_s > 0:
            shares.append((len(m.batch.totals) / m.batch.wall_s) / (len(paired.batch.totals) / paired.batch.wall_s))
    series_all = [value for m in mine for value in _series(m.batch, workload)]
    requests = sum(m.batch.requests for m in mine)
    errors = [error for m in mine for error in m.batch.errors]
    process = "upstream" if target == FLOOR else target
    cpu = sum(m.cpu_s.get(process, 0.0) for m in mine)
    checker = sum(m.cpu_s.get(process + CHECKER, 0.0) for m in mine)
    return Figures(
        target, workload,
        p50=_median_of([statistics.median(_series(m.batch, workload)) for m in mine if _series(m.batch, workload)]),
        p95=percentile(series_all, 0.95) if series_all else None,
        added_p50=_median_of(added50), added_p95=_median_of(added95),
        whole_p50=_median_of([statistics.median(m.batch.totals) for m in mine if m.batch.totals])
        if workload in STREAMED else None,
        added_whole_p50=_median_of(added_whole),
        rps=_median_of(rps) if workload == "throughput" else None,
        share=_median_of(shares) if workload == "throughput" else None,
        cpu_per_request=cpu / requests if requests and any(process in m.cpu_s for m in mine) else None,
        checker_cpu_per_request=checker / requests if requests and any(process + CHECKER in m.cpu_s for m in mine)
        else None,
        requests=requests, errors=len(errors), first_error=errors[0] if errors else None)


def all_figures(result: BenchResult) -> list[Figures]:
    names = [FLOOR, *(target.name for target in result.targets)]
    return [figures(result, name, workload) for workload in WORKLOADS if workload in result.options.workloads
            for name in names]


def _ms(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value * MS:+.2f} ms" if signed else f"{value * MS:.2f} ms"


def _cells(f: Figures) -> list[str]:
    """The cells of `f`'s row in its workload's table."""
    if f.not_run:
        return ["not run: " + f.not_run]
    errors = f"{f.errors} of {f.requests}" if f.errors else "0"
    cpu = _ms(f.cpu_per_request) + (f" + checker {_ms(f.checker_cpu_per_request)}"
                                    if f.checker_cpu_per_request is not None else "")
    if f.workload == "throughput":
        share = "1.00" if f.target == FLOOR else (f"{f.share:.2f}" if f.share is not None else "—")
        return [f"{f.rps:.0f}" if f.rps is not None else "—", share, cpu, errors]
    if f.workload in STREAMED:
        return [_ms(f.p50), _ms(f.added_p50, True), _ms(f.added_p95, True), _ms(f.whole_p50),
                _ms(f.added_whole_p50, True), cpu, errors]
    return [_ms(f.p50), _ms(f.p95), _ms(f.added_p50, True), _ms(f.added_p95, True), cpu, errors]


HEADERS: dict[Workload, list[str]] = {
    "text": ["p50", "p95", "added p50", "added p95", "CPU / request", "errors"],
    "stream": ["first event p50", "added p50", "added p95", "whole stream p50", "whole added p50", "CPU / request",
               "errors"],
    "throughput": ["req/s", "share of the floor", "CPU / request", "errors"],
    "mcp": ["p50", "p95", "added p50", "added p95", "CPU / request", "errors"],
    "socket": ["first frame p50", "added p50", "added p95", "whole response p50", "whole added p50",
               "CPU / request", "errors"],
    "chain_socket": ["chain p50", "chain p95", "added p50", "added p95", "CPU / chain", "errors"],
    "chain_http": ["chain p50", "chain p95", "added p50", "added p95", "CPU / chain", "errors"],
}
FLOOR_TITLE: dict[Workload, str] = {
    "text": "floor: the scripted upstream alone", "stream": "floor: the scripted upstream alone",
    "throughput": "floor: the scripted upstream alone",
    "mcp": "floor: the client does it (tools/list, model, tools/call, model; one MCP session kept open)",
    "socket": "floor: the scripted upstream's own socket",
    "chain_socket": "floor: the scripted upstream's own socket, the same chain",
    "chain_http": "floor: the scripted upstream over HTTP, the same chain",
}


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _title(result: BenchResult, name: str, workload: Workload) -> str:
    if name == FLOOR:
        return FLOOR_TITLE[workload]
    return next(target.title for target in result.targets if target.name == name)


def _summary_rows(result: BenchResult, table: list[Figures]) -> list[str]:
    """One line per target: the issue-style overview."""
    by = {(f.target, f.workload): f for f in table}
    lines = [_row(["target", "W1 added p50", "W2 first event / whole stream added", "W3 req/s (share of the floor)",
                   "W4 added p50", "W5 first frame / whole response added", "W5 20-turn chain: socket / HTTP p50"]),
             _row(["---"] * 7)]
    for name in [FLOOR, *(t.name for t in result.targets)]:
        def cell(workload: Workload, render: Callable[[Figures], str], name: str = name) -> str:
            f = by.get((name, workload))
            return "—" if f is None or f.not_run else render(f)

        if name == FLOOR:
            cells = [cell("text", lambda f: _ms(f.p50)), cell("stream", lambda f: f"{_ms(f.p50)} / {_ms(f.whole_p50)}"),
                     cell("throughput", lambda f: f"{f.rps:.0f} (1.00)" if f.rps else "—"),
                     cell("mcp", lambda f: _ms(f.p50)),
                     cell("socket", lambda f: f"{_ms(f.p50)} / {_ms(f.whole_p50)}")]
        else:
            cells = [cell("text", lambda f: _ms(f.added_p50, True)),
                     cell("stream", lambda f: f"{_ms(f.added_p50, True)} / {_ms(f.added_whole_p50, True)}"),
                     cell("throughput", lambda f: f"{f.rps:.0f} ({f.share:.2f})" if f.rps and f.share else "—"),
                     cell("mcp", lambda f: _ms(f.added_p50, True)),
                     cell("socket", lambda f: f"{_ms(f.added_p50, True)} / {_ms(f.added_whole_p50, True)}")]
        cells.append(_chains(result, name, by))
        lines.append(_row([_title(result, name, "text") if name != FLOOR else "floor (absolute figures)", *cells]))
    return lines


def chain_ratio(result: BenchResult, target: str) -> float | None:
    """A chain on one socket over the same chain over HTTP: per round, the ratio of the two
    batches' medians (measured in the same round), then the median over rounds."""
    def medians(workload: Workload) -> dict[int, float]:
        return {m.round: statistics.median(m.batch.totals) for m in own_batches(result, target, workload)
                if m.batch.totals and (target != FLOOR or m.floor_for == result.targets[0].name)}

    socket, http = medians("chain_socket"), medians("chain_http")
    return _median_of([socket[r] / http[r] for r in socket if r in http and http[r] > 0])


def _chains(result: BenchResult, name: str, by: dict[tuple[str, Workload], Figures]) -> str:
    socket, http = by.get((name, "chain_socket")), by.get((name, "chain_http"))
    if socket is None or http is None or socket.not_run or http.not_run or socket.p50 is None or http.p50 is None:
        return "—"
    ratio = chain_ratio(result, name)
    return f"{_ms(socket.p50)} / {_ms(http.p50)}" + (f" ({ratio:.2f})" if ratio is not None else "")


def markdown(result: BenchResult, command: str) -> str:
    """The report: what was run and how, the overview, a table per workload, memory, errors."""
    options, table = result.options, all_figures(result)
    sizes = options.sizes
    lines = [
        "# Gateway overhead benchmark",
        "",
        f"Regenerate with: `{command}`",
        "",
        f"Run {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {result.machine['cpus']} CPUs, Python "
        f"{result.machine['python']}, {result.machine['system']}. {options.rounds} rounds; in each, for every "
        f"workload and target, a floor batch (for a proxy, the gateway behind it alone) and right after it the "
        f"target's batch. Batches: "
        f"{sizes.sequential} requests one at a time (W1, W2, W4, W5 on one socket), {sizes.throughput} requests "
        f"{sizes.concurrency} at a time (W3), {sizes.chains} chains of {CHAIN_TURNS} turns (W5, the ratio in "
        "parentheses the socket's over HTTP's, paired by round). Every process ran on loopback, each in its own "
        "process: "
        + "; ".join(f"`{name}`: {what}" for name, what in result.processes.items()) + ".",
        "",
        "Added figures are paired: in each round, the target's batch minus the floor batch (a proxy's: its "
        "gateway's) measured just before it; the median over rounds. CPU / request is the CPU time (user + "
        "system) the target's own process (the floor: the scripted upstream's) spent during its batches, over "
        "their requests; a proxy's is its relay's, then its checker's (a process of its own at the lowest "
        "priority, which catches up after a batch; the next batch waits until it did).",
        "",
        "## Overview",
        "",
        *_summary_rows(result, table),
    ]
    for workload in options.workloads:
        lines += ["", f"## {LABELS[workload]}", "", _row(["target", *HEADERS[workload]]),
                  _row(["---"] * (len(HEADERS[workload]) + 1))]
        for f in table:
            if f.workload == workload:
                lines.append(_row([_title(result, f.target, workload), *_cells(f)]))
    lines += ["", "## Memory of the started gateways", "",
              _row(["target", "RSS after the warm-up", "after round 1", "at the end", "requests after round 1"]),
              _row(["---"] * 5)]
    for target in result.targets:
        if len(target.rss) > 1:
            later = sum(m.batch.requests for workload in result.options.workloads
                        for m in own_batches(result, target.name, workload) if m.round > 0)
            lines.append(_row([target.title, *(f"{rss / MIB:.0f} MiB" for rss in (target.rss[0], target.rss[1],
                                                                                   target.rss[-1])), f"{later:,}"]))
    failed = [f for f in table if f.first_error]
    if failed:
        lines += ["", "## Errors", ""]
        lines += [f"- {_title(result, f.target, f.workload)}, {LABELS[f.workload]}: {f.errors} of {f.requests}; "
                  f"the first: {f.first_error}" for f in failed]
    return "\n".join(lines) + "\n"


def as_json(result: BenchResult, command: str) -> dict[str, Any]:
    """Everything measured (every batch's samples) and the figures derived from it."""
    return {
        "command": command,
        "machine": result.machine,
        "options": {"targets": list(result.options.targets), "rounds": result.options.rounds,
                    "sizes": asdict(result.options.sizes), "workloads": list(result.options.workloads)},
        "processes": result.processes,
        "targets": [{"name": t.name, "title": t.title, "not_run": t.cannot, "rss_by_round": t.rss}
                    for t in result.targets],
        "figures": [asdict(f) for f in all_figures(result)],
        "batches": [_batch(m) for m in result.measured],
    }


def _batch(m: Measured) -> dict[str, Any]:
    """A batch for the JSON, its samples rounded to the microsecond (the clock's noise is larger)."""
    return {"round": m.round, "workload": m.workload, "target": m.target, "floor_for": m.floor_for,
            "cpu_s": m.cpu_s, "requests": m.batch.requests, "wall_s": m.batch.wall_s, "errors": m.batch.errors,
            "totals": [round(value, 6) for value in m.batch.totals],
            "firsts": [round(value, 6) for value in m.batch.firsts]}


def write(result: BenchResult, output: Path, command: str, redactor: Redactor) -> tuple[Path, Path]:
    """Write `output` (Markdown) and the JSON beside it (same name, `.json`), through `redactor`
    (a gateway's error may echo a key)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    redactor.write_text(output, markdown(result, command))
    data = output.with_suffix(".json")
    data.write_text(json.dumps(redactor.redact(as_json(result, command)), separators=(",", ":")) + "\n")
    return output, data
