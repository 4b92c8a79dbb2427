"""The judges a run may add to the scenarios' own expectations, built from the options that
name them (`--against golden:NAME`, `--baseline FILE`). The engine applies them to each
scenario run, so `parity run` and the pytest plugin judge alike."""

from __future__ import annotations

from pathlib import Path

from . import baseline, goldens
from ..engine.runner import Judge


def judges(against: str | None = None, golden_dir: Path | None = None,
           baseline_file: Path | None = None) -> tuple[Judge, ...]:
    """The golden judge (first: it adds findings), then the baseline judge (it marks them
    known); raises `HarnessError` naming the golden set or baseline file that is wrong."""
    found: list[Judge] = []
    if against is not None:
        found.append(goldens.GoldenJudge(goldens.load(goldens.resolve(against, goldens.search_path(golden_dir)))))
    if baseline_file is not None:
        found.append(baseline.BaselineJudge(baseline.load(baseline_file)))
    return tuple(found)
