"""The pictures of the HTML reports, as geometry for inline SVG (drawn by `charts.svg.j2`, so
a page needs nothing from the network): a stream's timeline beside the sequence it is held
against, and the matrix's latency bars.

A stream's timeline has one row per event type of its sequence (runs collapsed), aligned with
the reference sequence as `side_by_side` pairs them, each row's events marked at the time they
arrived after the request was sent.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from itertools import groupby
from typing import Any

CHAR_PX = 7.3
"""The advance of one character of the 12 px monospace font the pictures' labels use."""
ROW_PX = 18
AXIS_PX = 26
TIME_PX = 420
MAX_ROWS = 400
MAX_MARKS_PER_ROW = 60


@dataclass(frozen=True)
class Row:
    reference: str
    actual: str
    tag: str
    """`same`, `missing` (only the reference has it), `extra` (only the answer) or `changed`;
    `unjudged` when there is no reference to hold the answer against."""
    actual_index: int | None = None
    """The row's place in the answer's sequence; None when only the reference has it."""


def side_by_side(reference: list[str], actual: list[str]) -> list[Row]:
    """Two sequences aligned row by row, each row tagged with how they differ."""
    rows = []
    matcher = difflib.SequenceMatcher(a=reference, b=actual, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        left, right = reference[a1:a2], actual[b1:b2]
        if op == "equal":
            rows += [Row(a, b, "same", b1 + i) for i, (a, b) in enumerate(zip(left, right, strict=True))]
            continue
        for index in range(max(len(left), len(right))):
            a = left[index] if index < len(left) else ""
            b = right[index] if index < len(right) else ""
            rows.append(Row(a, b, "changed" if a and b else "missing" if a else "extra",
                            b1 + index if b else None))
    return rows


def ticks(maximum: float, count: int = 5) -> list[float]:
    """Round values from 0 to at least `maximum`, about `count` of them (steps of 1, 2 or 5
    times a power of ten)."""
    if maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(factor * power for factor in (1, 2, 5, 10) if factor * power >= raw)
    return [round(i * step, 10) for i in range(math.ceil(maximum / step - 1e-9) + 1)]


def _label_px(labels: list[str]) -> float:
    return max((len(label) for label in labels), default=0) * CHAR_PX + 16


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


@dataclass(frozen=True)
class Mark:
    x: float
    title: str


@dataclass(frozen=True)
class TimelineRow:
    y: float
    row: Row
    marks: list[Mark]
    span: tuple[float, float] | None
    """Where the row's first and last events arrived (x), when it has more than one."""
    title: str


@dataclass(frozen=True)
class Timeline:
    width: float
    height: float
    reference_x: float | None
    """Where the reference column starts; None without a reference sequence."""
    actual_x: float
    time_x: float | None
    """Where the time axis starts; None when arrival times were not recorded."""
    rows: list[TimelineRow]
    ticks: list[tuple[float, str]]
    omitted: int
    """Rows left out (beyond `MAX_ROWS`)."""


def _marks(times: list[float], scale: float, left: float) -> list[Mark]:
    """One mark per arrival, thinned evenly to `MAX_MARKS_PER_ROW` (the first and last kept)."""
    if len(times) > MAX_MARKS_PER_ROW:
        step = (len(times) - 1) / (MAX_MARKS_PER_ROW - 1)
        times = [times[round(i * step)] for i in range(MAX_MARKS_PER_ROW)]
    return [Mark(left + t * scale, f"{_ms(t)} ms") for t in times]


def timeline(reference: list[str] | None, actual: list[str], arrivals: list[tuple[str, float]] | None) -> Timeline:
    """The picture of one stream: its sequence (`actual`, runs collapsed) aligned with
    `reference` (None: no reference), and per row the arrival times (ms) of its events, from
    `arrivals` (each event's label and time, in order; None when not recorded)."""
    runs = [[time for _, time in group] for _, group in groupby(arrivals or [], key=lambda pair: pair[0])]
    aligned = side_by_side(reference, actual) if reference is not None else \
        [Row("", label, "unjudged", index) for index, label in enumerate(actual)]
    shown, omitted = aligned[:MAX_ROWS], max(0, len(aligned) - MAX_ROWS)
    x = 24.0  # the gutter, where a row's difference is marked
    reference_x = x if reference is not None else None
    if reference is not None:
        x += _label_px([row.reference for row in shown] + ["reference"])
    actual_x = x
    x += _label_px([row.actual for row in shown] + ["answer"])
    latest = max((time for run in runs for time in run), default=0.0)
    time_x = x + 10 if arrivals is not None else None
    axis = ticks(latest)
    scale = TIME_PX / axis[-1]
    rows = []
    for number, row in enumerate(shown):
        y = AXIS_PX + number * ROW_PX
        times = runs[row.actual_index] if time_x is not None and row.actual_index is not None \
            and row.actual_index < len(runs) else []
        span = (time_x + times[0] * scale, time_x + times[-1] * scale) if time_x is not None and len(times) > 1 \
            else None
        what = {"same": "", "unjudged": "", "missing": " (only the reference has it)",
                "extra": " (only the answer has it)", "changed": f" (the reference has {row.reference})"}[row.tag]
        when = "" if not times else f": {len(times)} event(s) at {_ms(times[0])}" + \
            (f" to {_ms(times[-1])}" if len(times) > 1 else "") + " ms"
        rows.append(TimelineRow(y, row, _marks(times, scale, time_x) if time_x is not None else [], span,
                                f"{row.actual or row.reference}{what}{when}"))
    width = (time_x + TIME_PX + 30) if time_x is not None else x
    return Timeline(width, AXIS_PX + len(shown) * ROW_PX + (ROW_PX if omitted else 0) + 6, reference_x, actual_x,
                    time_x, rows, [(time_x + t * scale, _ms(t)) for t in axis] if time_x is not None else [], omitted)


@dataclass(frozen=True)
class Bar:
    name: str
    y: float
    median_x: float
    p95_x: float
    median_ms: float
    p95_ms: float


@dataclass(frozen=True)
class LatencyChart:
    width: float
    height: float
    bars_x: float
    bars: list[Bar]
    ticks: list[tuple[float, str]]


BAR_PX = 34
BARS_WIDTH_PX = 520


def latency_chart(added: dict[str, tuple[float, float]]) -> LatencyChart | None:
    """Horizontal bars of what each gateway adds per step, median and p95 (ms), on one scale;
    None when no gateway has a figure."""
    if not added:
        return None
    left = _label_px(list(added)) + 4
    axis = ticks(max(p95 for _, p95 in added.values()))
    scale = BARS_WIDTH_PX / axis[-1]
    bars = [Bar(name, AXIS_PX + index * BAR_PX, left + max(median, 0) * scale, left + max(p95, 0) * scale,
                median, p95) for index, (name, (median, p95)) in enumerate(added.items())]
    return LatencyChart(left + BARS_WIDTH_PX + 90, AXIS_PX + len(bars) * BAR_PX + 30, left, bars,
                        [(left + t * scale, _ms(t)) for t in axis])


def stream_picture(stream: dict[str, Any]) -> Timeline:
    """The timeline of a step's `stream` part of a results document."""
    arrivals = stream.get("arrivals")
    return timeline(stream["reference"], stream["events"],
                    None if arrivals is None else [(label, time) for label, time in arrivals])
