"""One run split over several machines: `--shard I/N` runs the I-th of N parts of the selected
units, and `parity merge` puts the parts' results back together as one run's.

The split is by scenario (all the modes of a scenario run on one shard), stable for a given
catalogue and balanced: scenarios are dealt heaviest first to the shard with the least work so
far (ties to the lowest shard), a scenario weighing its recorded duration when one is known
(`--shard-durations`, a previous run's results.json) and otherwise its number of units times
the median known duration (one per unit when none is known). Every shard computes the same
split from the same catalogue, so none needs to hear from the others.
"""

from __future__ import annotations

import heapq
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...openai_contract.documents import DocumentError, read_json
from ..options import SHARD, SHARD_DURATIONS, OptionError
from ..scenario.loader import LoadedScenario
from ..scenario.model import Mode

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 1000

Unit = tuple[LoadedScenario, Mode]


@dataclass(frozen=True)
class Shard:
    index: int
    """1-based, as `--shard 1/4` writes it."""
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N`, or a `ValueError` saying what is wrong with it."""
        match = _SHARD.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not I/N (the I-th of N shards, as 2/4)")
        index, count = int(match[1]), int(match[2])
        if not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"{text!r}: N must be from 1 to {MAX_SHARDS}")
        if not 1 <= index <= count:
            raise ValueError(f"{text!r}: I must be from 1 to N")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def unit_key(scenario_id: str, mode: str) -> str:
    """How a shard names a unit: `scenario[mode]`."""
    return f"{scenario_id}[{mode}]"


def split(units: Sequence[Unit], count: int, durations: Mapping[str, float] | None = None) -> list[list[Unit]]:
    """The units of each of `count` shards, each in the order of `units` (see the module)."""
    by_scenario: dict[str, list[Unit]] = {}
    for unit in units:
        by_scenario.setdefault(unit[0].scenario.id, []).append(unit)
    known = dict(durations or {})
    per_unit = statistics.median(known.values()) if known else 1.0

    def weight(scenario: str) -> float:
        return known.get(scenario, per_unit * len(by_scenario[scenario]))

    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [(0.0, index) for index in range(count)]
    for scenario in sorted(by_scenario, key=lambda name: (-weight(name), name)):
        load, index = heapq.heappop(loads)
        shards[index].append(scenario)
        heapq.heappush(loads, (load + weight(scenario), index))
    return [[unit for unit in units if unit[0].scenario.id in chosen] for chosen in map(set, shards)]


def shard_part(units: Sequence[Unit], text: str | None, durations_file: Path | None
               ) -> tuple[Shard, list[Unit]] | None:
    """The shard `--shard` names and its units (None when it names none); `OptionError` for a
    shard that is not one, or durations that cannot be read."""
    if text is None:
        if durations_file is not None:
            raise OptionError(SHARD_DURATIONS, "balances shards: give the shard too")
        return None
    try:
        shard = Shard.parse(text)
    except ValueError as problem:
        raise OptionError(SHARD, str(problem)) from problem
    durations: dict[str, float] = {}
    if durations_file is not None:
        try:
            durations = durations_of(read_json(durations_file))
        except (OSError, DocumentError) as problem:
            raise OptionError(SHARD_DURATIONS, f"{durations_file}: {problem}") from problem
    return shard, split(units, shard.count, durations)[shard.index - 1]


def durations_of(document: Any) -> dict[str, float]:
    """Each scenario's duration (its units together) in a results document; nothing from a
    document that is not one."""
    found: dict[str, float] = {}
    results = document.get("results") if isinstance(document, dict) else None
    for entry in results if isinstance(results, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("scenario"), str) and \
                isinstance(entry.get("duration_s"), int | float):
            found[entry["scenario"]] = found.get(entry["scenario"], 0.0) + float(entry["duration_s"])
    return found
