"""The results documents of the shards of one run (`parity run --shard I/N`) put together as
the one run's document: its scenario runs in the order one machine would have run them, the
tally and coverage counted over all of them, started when the first shard started and lasting
as long as the longest, the target's URL the first shard's. Only timings (and an embedded
gateway's URL) can differ from what one machine writes.

Each shard's document says which shard it is and lists every unit of the whole run
(`RunInfo.shard`); the documents must be the N shards of the same run (the same target and
units, each shard once) and hold every unit exactly once (but those a shard that stopped at its
first failure did not start), and each must hold what is read of it
(`_SHARD_DOCUMENT`: a results file is input like any other), or `MergeError` says what is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from jsonschema import Draft202012Validator

from ..engine.shards import MergeError, shard_of
from .documents import OUTCOMES, Counted, tally_of

_SAME_SPLIT = " (the shards must split the run alike: give every one the same --shard-durations, or none)"


def merge(documents: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """One run's document from its shards' (`(where, document)`: `where` names each in errors)."""
    shards = [(where, shard_of(where, document, _SHARD_DOCUMENT, "results document",
                               "parity run --shard I/N writes one")) for where, document in documents]
    if not shards:
        raise MergeError("no results document to merge")
    first_where, first = shards[0]
    count, units = first["count"], first["units"]
    target = documents[0][1]["target"]
    for where, shard in shards:
        if (shard["count"], shard["units"]) != (count, units):
            raise MergeError(f"{where} is a shard of another run than {first_where} (other shards or units)")
    for where, document in documents:  # its URL may differ: an embedded gateway listens where it can
        if (document["target"]["name"], document["target"]["model"]) != (target["name"], target["model"]):
            raise MergeError(f"{where} ran against {document['target']['name']} ({document['target']['model']}), "
                             f"{first_where} against {target['name']} ({target['model']})")
    indexes = Counter(shard["index"] for _, shard in shards)
    if twice := sorted(index for index, seen in indexes.items() if seen > 1):
        raise MergeError(f"shard(s) {', '.join(map(str, twice))} of {count} given more than once")
    if missing := sorted(set(range(1, count + 1)) - set(indexes)):
        raise MergeError(f"shard(s) {', '.join(map(str, missing))} of {count} missing")
    position = {unit: index for index, unit in enumerate(units)}
    entries = [entry for _, document in documents for entry in document["results"]]
    ran = Counter(f"{entry['scenario']}[{entry['mode']}]" for entry in entries)
    if strays := sorted(unit for unit, seen in ran.items() if seen > 1 or unit not in position):
        raise MergeError(f"unit(s) run twice or outside the run: {', '.join(strays)}{_SAME_SPLIT}")
    unrun = [unit for unit in units if unit not in ran]
    if len(unrun) != sum(document["summary"]["not_run"] for _, document in documents):
        raise MergeError(f"unit(s) no shard ran: {', '.join(unrun[:10])}{_SAME_SPLIT}")
    entries.sort(key=lambda entry: position[f"{entry['scenario']}[{entry['mode']}]"])
    head = documents[0][1]
    return {
        "tool": head["tool"],
        "scenario_format": head["scenario_format"],
        "sdk": head["sdk"],
        "target": target,
        "started_at": min(document["started_at"] for _, document in documents),
        "duration_s": max(document["duration_s"] for _, document in documents),
        "summary": tally_of(map(Counted.of_entry, entries)) | {
            "file_errors": len(head["file_errors"]),
            "not_run": sum(document["summary"]["not_run"] for _, document in documents)},
        "file_errors": head["file_errors"],
        "coverage": {name: _coverage([document["coverage"][name] for _, document in documents])
                     for name in head["coverage"]},
        "results": entries,
    }


def object_schema(required: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an object that has (at least) these properties, each as its schema says."""
    return {"type": "object", "required": list(required), "properties": required}


_STRING, _NUMBER, _INTEGER, _LIST = {"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "array"}
_COVERAGE = object_schema({"exercised": {"type": "object", "additionalProperties": _INTEGER},
                     "not_exercised": {"type": "array", "items": _STRING},
                     "unknown_to_sdk": {"type": "array", "items": _STRING}})
_RESULT = object_schema({
    "scenario": _STRING, "mode": _STRING, "outcome": {"enum": list(OUTCOMES)}, "path": _STRING,
    "duration_s": _NUMBER, "unsupported": {}, "openai_counterpart": {"type": "boolean"},
    "steps": {"type": "array", "items": object_schema({
        "step": _STRING, "outcome": _STRING, "error": {}, "inferred": {}, "exchange_file": {},
        "stream": {"type": ["object", "null"]},
        "findings": {"type": "array", "items": object_schema({
            "known": {"type": "boolean"}, "severity": _STRING, "kind": _STRING, "rule": _STRING,
            "message": _STRING})}})}})
_RESULT["properties"]["tags"] = {"type": "array", "items": _STRING}  # a document written before tags were kept has none
_SHARD_DOCUMENT = Draft202012Validator(object_schema({
    "tool": {"type": "object"}, "scenario_format": {}, "sdk": {"type": "object"},
    "target": object_schema({"name": _STRING, "model": _STRING}),
    "started_at": _STRING, "duration_s": _NUMBER, "file_errors": {"type": "array", "items": _STRING},
    "summary": object_schema({"not_run": _INTEGER}),
    "coverage": {"type": "object", "additionalProperties": _COVERAGE},
    "shard": object_schema({"index": _INTEGER, "count": _INTEGER, "units": {"type": "array", "items": _STRING}}),
    "results": {"type": "array", "items": _RESULT},
}))
"""What `merge` and the reports it writes read of a shard's results document
(`documents.results_document`)."""


def _coverage(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One coverage entry (`documents.coverage`) from the shards' own."""
    seen: Counter[str] = Counter()
    universe: set[str] = set()
    unknown: set[str] = set()
    for part in parts:
        seen.update(part["exercised"])
        universe |= set(part["exercised"]) | set(part["not_exercised"])
        unknown |= set(part["unknown_to_sdk"])
    return {"exercised": {kind: seen[kind] for kind in sorted(universe) if seen[kind]},
            "not_exercised": sorted(kind for kind in universe if not seen[kind]),
            "unknown_to_sdk": sorted(unknown)}
