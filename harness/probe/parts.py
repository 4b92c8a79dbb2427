"""A probe run split over machines (`parity probe --shard I/N --json`): each shard's document
(`report.document`) is a part that also holds every answer it compared and which probes the
whole run selected (`part_fields`); `merge_parts` puts the N parts back together as the
comparison one machine would have made, so that its report and document are that machine's.

The parts must be the N shards of one probe run (the same target compared with the same, the
same probes, each shard once), hold every selected probe exactly once (answered or not sent),
name only probes this version generates, and each must hold what is read of it (`_PART`), or
`MergeError` says what is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from ..defaults import DEFAULT_MODEL
from ..engine.shards import MergeError, Shard, shard_of
from .compare import Comparison
from .generate import Probe, all_probes
from .send import BASE_INPUT, Outcome


@dataclass(frozen=True)
class Merged:
    comparison: Comparison
    selection: str
    """What the whole run selected, as its report says it."""
    command: str
    """The command line of the whole run (a shard's without `--shard`)."""


def part_fields(comparison: Comparison, shard: Shard, selected: Sequence[Probe], selection: str,
                command: str) -> dict[str, Any]:
    """What a shard's document holds besides its comparison's: which shard, every probe the
    whole run selected (`selected`, described by `selection`, run by `command`), and each
    answer compared with what was expected of it."""
    return {"shard": {"index": shard.index, "count": shard.count, "probes": [probe.id for probe in selected],
                      "selection": selection, "command": command},
            "answers": {probe.id: {"got": comparison.got[probe.id].to_dict(),
                                   "expected": comparison.expected[probe.id].to_dict(),
                                   "expected_from": comparison.sources[probe.id]} for probe in comparison.probes}}


def merge_parts(parts: Sequence[tuple[str, Any]]) -> Merged:
    """The whole run from its shards' documents (`(where, document)`: `where` names each in
    errors); its selection and command are shard 1's."""
    if not parts:
        raise MergeError("no probe document to merge")
    for where, document in parts:
        shard_of(where, document, _PART, "document", "parity probe --shard I/N --json prints one")
    first_where, first = parts[0]
    count, selected = first["shard"]["count"], first["shard"]["probes"]
    for where, document in parts:
        if (document["shard"]["count"], document["shard"]["probes"]) != (count, selected):
            raise MergeError(f"{where} is a shard of another probe run than {first_where} (other shards or probes)")
        if (document["target"], document["against"]) != (first["target"], first["against"]):
            raise MergeError(f"{where} compared {document['target']} with {document['against']}, {first_where} "
                            f"{first['target']} with {first['against']}")
    indexes = Counter(document["shard"]["index"] for _, document in parts)
    if twice := sorted(index for index, seen in indexes.items() if seen > 1):
        raise MergeError(f"shard(s) {', '.join(map(str, twice))} of {count} given more than once")
    if missing := sorted(set(range(1, count + 1)) - set(indexes)):
        raise MergeError(f"shard(s) {', '.join(map(str, missing))} of {count} missing")
    if strays := sorted(index for index in indexes if not 1 <= index <= count):
        raise MergeError(f"shard(s) {', '.join(map(str, strays))} of {count} are no shards of it")
    seen = Counter(probe for _, document in parts for probe in [*document["answers"], *document["skipped"]])
    chosen = set(selected)
    if wrong := sorted(probe for probe, times in seen.items() if times > 1 or probe not in chosen):
        raise MergeError(f"probe(s) answered twice or not selected: {', '.join(wrong[:10])}")
    if unanswered := [probe for probe in selected if probe not in seen]:
        raise MergeError(f"probe(s) neither answered nor skipped by any shard: {', '.join(unanswered[:10])}")
    generated = {probe.id: probe for probe in all_probes(DEFAULT_MODEL, BASE_INPUT)}
    if unknown := [probe for probe in selected if probe not in generated]:
        raise MergeError(f"probe(s) this version of parity does not generate: {', '.join(unknown[:10])}")
    answers = {probe: answer for _, document in parts for probe, answer in document["answers"].items()}
    skipped = {probe: why for _, document in parts for probe, why in document["skipped"].items()}
    head = next(document for _, document in parts if document["shard"]["index"] == 1)
    comparison = Comparison(
        first["target"], first["against"], [generated[probe] for probe in selected if probe in answers],
        {probe: Outcome.from_dict(answers[probe]["got"]) for probe in selected if probe in answers},
        {probe: Outcome.from_dict(answers[probe]["expected"]) for probe in selected if probe in answers},
        {probe: answers[probe]["expected_from"] for probe in selected if probe in answers},
        {probe: skipped[probe] for probe in selected if probe in skipped})
    return Merged(comparison, head["shard"]["selection"], head["shard"]["command"])


_STRING, _INTEGER = {"type": "string"}, {"type": "integer"}
_MAYBE_STRING = {"type": ["string", "null"]}
_OUTCOME = {"type": "object", "required": ["status", "body"],
            "properties": {"status": {"type": ["integer", "null"]}, "body": _STRING, "type": _MAYBE_STRING,
                           "code": _MAYBE_STRING, "param": _MAYBE_STRING, "detail": _STRING,
                           "unsaid": {"type": "array", "items": _STRING}}}
_PART = Draft202012Validator({
    "type": "object", "required": ["target", "against", "skipped", "shard", "answers"],
    "properties": {
        "target": _STRING, "against": _STRING, "skipped": {"type": "object", "additionalProperties": _STRING},
        "shard": {"type": "object", "required": ["index", "count", "probes", "selection", "command"],
                  "properties": {"index": _INTEGER, "count": _INTEGER, "probes": {"type": "array", "items": _STRING},
                                 "selection": _STRING, "command": _STRING}},
        "answers": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["got", "expected", "expected_from"],
            "properties": {"got": _OUTCOME, "expected": _OUTCOME, "expected_from": _STRING}}}}})
"""What `merge_parts` reads of a shard's document (`report.document` with `part_fields`)."""
