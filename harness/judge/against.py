"""What a run holds its answers against beyond the scenarios' own expectations, from the options
that name it (`--against golden:NAME`, `--baseline FILE`). The engine passes it to the judge with
every step, so `parity run` and the pytest plugin judge alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import baseline, goldens
from .baseline import Baseline
from .goldens import GoldenSet


@dataclass(frozen=True)
class Against:
    golden: GoldenSet | None = None
    """Each step's answer is held against the set's record of it."""
    baseline: Baseline | None = None
    """The findings it knows are marked known."""


def load_against(against: str | None = None, golden_dir: Path | None = None,
                 baseline_file: Path | None = None) -> Against:
    """Raises `HarnessError` naming the golden set or baseline file that is wrong."""
    golden = goldens.load(goldens.resolve(against, goldens.search_path(golden_dir))) if against is not None else None
    return Against(golden, baseline.load(baseline_file) if baseline_file is not None else None)
