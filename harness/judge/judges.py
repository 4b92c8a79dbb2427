"""The judges a run may add to the scenarios' own expectations, built from the options that
name them (`--against golden:NAME`, `--baseline FILE`). The engine applies them to each
scenario run, so `parity run` and the pytest plugin judge alike."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from . import baseline, goldens
from ..model.results import ScenarioResult


class Judge(Protocol):
    """Judges a scenario run beyond its own expectations once it has run (how it differs from
    a golden set, which divergences a baseline already knows): it adds findings or marks them
    known, in place."""

    def __call__(self, result: ScenarioResult) -> None: ...


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
