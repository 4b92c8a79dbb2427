"""The shards of a matrix split over machines (`parity matrix --shard I/N`) put together as the
one matrix: each target's shards merged as a run's shards are (`merge.py`), the targets in the
order the parts first name them. A part is the `matrix.json` a shard writes beside its matrix
(`matrix.matrix_document`), its targets' report folders where it says; a part may hold every
target or some (a job matrix of gateway x shard: one each).

The parts must be shards of one selection (the same scenario runs, split in as many shards,
selected by the same options) and hold every (target, shard) exactly once, and each must hold
what is read of it (`_PART`), or `MergeError` names what is missing, repeated or wrong. A target
that could not run in one of its shards could not run in the matrix (its first such shard says
why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from jsonschema import Draft202012Validator

from ...openai_contract.documents import DocumentError, read_json
from .matrix import TargetRun
from ..engine.shards import MergeError, shard_of
from .merge import merge, object_schema


@dataclass(frozen=True)
class MergedTarget:
    run: TargetRun
    """As its parts describe it, with its merged results document (none when it could not run)."""
    folders: list[Path]
    """Its shards' report folders, in shard order: where their failing exchanges are."""


@dataclass(frozen=True)
class MergedMatrix:
    targets: list[MergedTarget]
    selection: str
    """The options that selected the scenario runs (`-s`, `-t`, `--mode`), as the command line says them."""


def merge_matrix(parts: Sequence[tuple[Path, Any]]) -> MergedMatrix:
    """One matrix from its shards' `(matrix.json path, its document)`."""
    if not parts:
        raise MergeError("no matrix document to merge")
    shards = [(path, shard_of(path, document, _PART, "matrix document", "parity matrix --shard I/N writes one"))
              for path, document in parts]
    first_path, first = shards[0]
    for path, shard in shards:
        if (shard["count"], shard["units"], shard["selection"]) != (first["count"], first["units"], first["selection"]):
            raise MergeError(f"{path} is a shard of another matrix than {first_path} (other shards, scenario runs "
                             "or options)")
    count = first["count"]
    if strays := [str(path) for path, shard in shards if not 1 <= shard["index"] <= count]:
        raise MergeError(f"{', '.join(strays)}: not a shard from 1 to {count}")
    found: dict[str, dict[int, list[tuple[Path, dict[str, Any]]]]] = {}
    for path, document in parts:
        for entry in document["targets"]:
            _confined(path, entry)
            found.setdefault(entry["name"], {}).setdefault(document["shard"]["index"], []).append((path, entry))
    problems = [f"target {name}: shard(s) {', '.join(map(str, twice))} of {count} given more than once"
                for name, by_index in found.items() if (twice := sorted(i for i, seen in by_index.items()
                                                                        if len(seen) > 1))]
    problems += [f"target {name}: shard(s) {', '.join(map(str, missing))} of {count} missing"
                 for name, by_index in found.items() if (missing := sorted(set(range(1, count + 1)) - set(by_index)))]
    if problems:
        raise MergeError("; ".join(problems))
    return MergedMatrix([_target([by_index[index][0] for index in sorted(by_index)]) for by_index in found.values()],
                        first["selection"])


def _confined(path: Path, entry: dict[str, Any]) -> None:
    """A target's merged report is written under its name, and read from its report folder: the
    name leads nowhere but below the merge's folder, and the report folder lies within the folder
    of its `matrix.json` (a part names no place elsewhere)."""
    name, report = entry["name"], entry["report"]
    if not name or "\0" in name or any(written.is_absolute() or ".." in written.parts
                                        for written in (PurePosixPath(name), PureWindowsPath(name))):
        raise MergeError(f"{path}: target {name!r}: its name would write its report outside the merged folder")
    if report is not None and not (path.parent / report).resolve().is_relative_to(path.parent.resolve()):
        raise MergeError(f"{path}: target {name}: its report folder {report!r} is outside {path.parent}")


def _target(shards: list[tuple[Path, dict[str, Any]]]) -> MergedTarget:
    """One target from its entries in its shards' documents, in shard order."""
    if failed := next((entry for _, entry in shards if entry["failure"] is not None), None):
        return MergedTarget(TargetRun.of_dict(failed), [])
    folders, documents = [], []
    for path, entry in shards:
        if entry["report"] is None:
            raise MergeError(f"{path}: target {entry['name']} ran, but no report folder is named")
        folder = path.parent / entry["report"]
        try:
            documents.append((str(folder / "results.json"), read_json(folder / "results.json")))
        except (OSError, DocumentError) as problem:
            raise MergeError(f"{folder / 'results.json'}: {problem}") from problem
        folders.append(folder)
    run = TargetRun.of_dict(shards[0][1])
    run.document = merge(documents)
    return MergedTarget(run, folders)


_STRING, _INTEGER = {"type": "string"}, {"type": "integer"}
_STRINGS = {"type": "array", "items": _STRING}
_PART = Draft202012Validator(object_schema({
    "command": _STRING,
    "shard": object_schema({"index": _INTEGER, "count": _INTEGER, "units": _STRINGS, "selection": _STRING}),
    "targets": {"type": "array", "items": object_schema({
        "target": _STRING, "name": _STRING, "title": _STRING, "failure": {"type": ["string", "null"]},
        "rewrites": _STRINGS, "lacks": {"type": "object", "additionalProperties": _STRING}, "notes": _STRINGS,
        "lacks_declared": {"type": "boolean"}, "report": {"type": ["string", "null"]}})},
}))
"""What `merge_matrix` reads of a shard's matrix document (`matrix.matrix_document`)."""
