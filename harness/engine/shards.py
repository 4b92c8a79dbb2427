"""One run split over several machines: `--shard I/N` runs the I-th of N parts of what was
selected (`parity run` and `parity matrix` the scenario runs, `parity probe` the probes), and
`parity merge` puts the parts' results back together as one run's.

The split deals groups of items whole (`deal`): scenario runs by scenario (all the modes of a
scenario run on one shard), probes one by one (by id). It is stable for a given selection and
balanced: groups are dealt heaviest first (then by name) to the shard with the least work so
far (ties to the lowest shard), a group weighing its recorded duration when one is known
(`--shard-durations`: a previous run's results.json, or a matrix's matrix.json) and otherwise
its number of items times the median known duration (one per item when none is known). Every
shard computes the same split from the same selection and durations, so none needs to hear from
the others (`parity merge` refuses shards that split otherwise: a unit run twice, or by none).
"""

from __future__ import annotations

import heapq
import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...openai_contract.documents import DocumentError, read_json
from ..options import SHARD, SHARD_DURATIONS, OptionError
from ..scenario.loader import LoadedScenario
from ..scenario.model import Mode

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 1000

Unit = tuple[LoadedScenario, Mode]
Item = TypeVar("Item")


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


def scenario_of(unit: Unit) -> str:
    """The group a scenario run is dealt in: its scenario."""
    return unit[0].scenario.id


def deal(items: Sequence[Item], group: Callable[[Item], str], count: int,
         durations: Mapping[str, float] | None = None) -> list[list[Item]]:
    """The items of each of `count` shards, each in the order of `items`, every group (`group`
    names an item's) dealt whole by its weight in `durations` (see the module)."""
    by_group = Counter(map(group, items))
    known = dict(durations or {})
    per_item = statistics.median(known.values()) if known else 1.0

    def weight(name: str) -> float:
        return known.get(name, per_item * by_group[name])

    shard_of: dict[str, int] = {}
    loads = [(0.0, index) for index in range(count)]
    for name in sorted(by_group, key=lambda name: (-weight(name), name)):
        load, index = heapq.heappop(loads)
        shard_of[name] = index
        heapq.heappush(loads, (load + weight(name), index))
    shards: list[list[Item]] = [[] for _ in range(count)]
    for item in items:
        shards[shard_of[group(item)]].append(item)
    return shards


def split(units: Sequence[Unit], count: int, durations: Mapping[str, float] | None = None) -> list[list[Unit]]:
    """The scenario runs of each of `count` shards, dealt by scenario (`deal`)."""
    return deal(units, scenario_of, count, durations)


def shard_part(items: Sequence[Item], text: str | None, durations_file: Path | None,
               group: Callable[[Item], str] = scenario_of) -> tuple[Shard, list[Item]] | None:
    """The shard `--shard` names and its items, dealt by `group` (default: scenario runs by
    scenario), or None when it names none; `OptionError` for a shard that is not one, or
    durations that cannot be read."""
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
            durations = recorded_durations(durations_file)
        except (OSError, DocumentError) as problem:
            raise OptionError(SHARD_DURATIONS, f"{durations_file}: {problem}") from problem
    return shard, deal(items, group, shard.count, durations)[shard.index - 1]


def recorded_durations(path: Path) -> dict[str, float]:
    """Each scenario's duration in a results document (`durations_of`) or, summed over its
    targets (a matrix runs them one after another), in the results documents of a matrix's
    `matrix.json`; `OSError` or `DocumentError` for a file that cannot be read."""
    document = read_json(path)
    targets = document.get("targets") if isinstance(document, dict) else None
    if not isinstance(targets, list):
        return durations_of(document)
    found: Counter[str] = Counter()
    for target in targets:
        if isinstance(target, dict) and isinstance(target.get("report"), str):
            found.update(durations_of(read_json(path.parent / target["report"] / "results.json")))
    return dict(found)


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


class MergeError(ValueError):
    """The documents are not the parts of one split run, matrix or probe run; the text says why."""


def shard_of(where: object, document: Any, schema: Draft202012Validator, what: str, made_by: str) -> dict[str, Any]:
    """A part's `shard`, once its document (`what`, `made_by` the command that writes one)
    holds all that its merge reads, as `schema` says (a part is input like any other); else a
    `MergeError` naming the place that does not."""
    if not isinstance(document, dict) or not isinstance(document.get("shard"), dict):
        raise MergeError(f"{where} is not the {what} of a shard ({made_by})")
    if problem := next(schema.iter_errors(document), None):
        at = "/".join(map(str, problem.absolute_path)) or "the document"
        raise MergeError(f"{where}: {at}: {problem.message}")
    return document["shard"]
