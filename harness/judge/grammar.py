"""Stream grammar: rules every Responses event stream keeps, checked without a reference.

Each rule is a function `<aspect>_conformance(events, resumed_after) -> findings`; a stream
resumed with `starting_after=N` numbers its events from N + 1 and may name items added before
it began. The rules: framing (JSON objects with a `type`); `sequence_number` from 0 by 1; the
lifecycle (response.created first, one terminal event, last); every `.added` closed by its
`.done`, with consistent indices and ids; deltas adding up to their `.done` (text, arguments,
a code_interpreter_call's code, a custom tool call's input, an apply_patch diff, a shell command,
which names no `item_id`) and each `.done` value the one its item carries when done; annotations
added 0, 1, 2 ... and carried by their part; a hosted tool's phase events (`in_progress` first,
one `completed` or `failed` last, partial images 0, 1, 2 ...) on an item of its type; the terminal
output equal to the items done; the Response's `id`, `created_at` and `model` the same in
every lifecycle event; an `mcp_call`'s status agreeing with its `.completed` / `.failed`
event; an item added with each field empty or already as it is done; and no `data: [DONE]` (a
warning: clients skip it, OpenAI never sends it).

The rules follow what real OpenAI streams do, so real OpenAI traffic passes them:
- streams recorded before `sequence_number` existed are a legacy note, not an error;
- `obfuscation` fields and the nested `error` event are normal;
- with several MCP servers OpenAI closes only the last `mcp_list_tools` item with
  `output_item.done` (the others appear only in the terminal output): a note;
- after `response.failed`, items may stay open: a note;
- the terminal event's reasoning items carry `encrypted_content` encrypted anew (and `program`
  items a new `fingerprint`), so it differs from what their `output_item.done` carried: a note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..model.findings import Finding, Kind, Severity
from ..wire.exchange import TERMINAL_EVENTS
from ..wire.sse import SseEvent

_SUB = object()
"""In a path into an item: the index the `.done` event names by its separating key."""


class _Streamed(NamedTuple):
    """How one streamed value travels: its `.done` event, the field there that holds the whole
    value, the key that separates streams within an item ("" for one stream per item), and the
    path to the value in the item `output_item.done` carries."""
    done: str
    field: str
    separator: str
    path: tuple[Any, ...]


_DELTAS: dict[str, _Streamed] = {
    # an event that names no item (shell commands) belongs to the item at its output_index
    "response.output_text.delta": _Streamed("response.output_text.done", "text", "content_index",
                                            ("content", _SUB, "text")),
    "response.refusal.delta": _Streamed("response.refusal.done", "refusal", "content_index",
                                        ("content", _SUB, "refusal")),
    "response.reasoning_text.delta": _Streamed("response.reasoning_text.done", "text", "content_index",
                                               ("content", _SUB, "text")),
    "response.reasoning_summary_text.delta": _Streamed("response.reasoning_summary_text.done", "text",
                                                       "summary_index", ("summary", _SUB, "text")),
    "response.function_call_arguments.delta": _Streamed("response.function_call_arguments.done", "arguments", "",
                                                        ("arguments",)),
    "response.mcp_call_arguments.delta": _Streamed("response.mcp_call_arguments.done", "arguments", "",
                                                   ("arguments",)),
    "response.custom_tool_call_input.delta": _Streamed("response.custom_tool_call_input.done", "input", "",
                                                       ("input",)),
    "response.code_interpreter_call_code.delta": _Streamed("response.code_interpreter_call_code.done", "code", "",
                                                           ("code",)),
    "response.apply_patch_call_operation_diff.delta": _Streamed("response.apply_patch_call_operation_diff.done",
                                                                "diff", "", ("operation", "diff")),
    "response.shell_call_command.delta": _Streamed("response.shell_call_command.done", "command", "command_index",
                                                   ("action", "commands", _SUB)),
}
_DONE_TO_DELTA = {streamed.done: delta for delta, streamed in _DELTAS.items()}


def _finding(severity: Severity, rule: str, message: str, **extra: Any) -> Finding:
    """A grammar finding; a message that names positions (events, output indices, ids) comes
    with a `key` that does not, so the same break in many places groups as one."""
    return Finding(Kind.STREAM_GRAMMAR, severity, f"grammar.{rule}", message, **extra)


def _payloads(events: list[SseEvent]) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.payload is not None]


def framing_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    return [finding for position, event in enumerate(events) for finding in event_framing(event, position)]


def event_framing(event: SseEvent, position: int) -> list[Finding]:
    """The framing findings of the `position`th event of a stream."""
    if event.is_done_sentinel:
        return []
    if event.defect is not None:
        return [_finding(Severity.ERROR, "framing", event.defect.of(f"event {position}").message,
                         key=f"an event's data is not readable JSON ({event.defect.rule})")]
    if event.payload is None:
        return [_finding(Severity.ERROR, "framing", key="an event is not a JSON object",
                         message=f"event {position} is not a JSON object: {event.data[:80]!r}")]
    if not isinstance(event.payload.get("type"), str):
        return [_finding(Severity.ERROR, "framing", f"event {position} has no `type`", key="an event has no `type`")]
    if event.event and event.event != event.payload["type"]:
        return [_finding(Severity.WARNING, "framing", key="an SSE `event:` field differs from its `type`",
                         message=f"event {position}: the SSE `event:` field "
                         f"{event.event!r} differs from its `type` {event.payload['type']!r}")]
    return []


def sequence_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    numbering = SequenceNumbering(resumed_after)
    for payload in _payloads(events):
        numbering.add(payload)
    return numbering.findings()


class SequenceNumbering:
    """`sequence_conformance` of a stream whose events are added one at a time, in constant
    memory (a proxy checks an endless stream so)."""

    def __init__(self, resumed_after: int | None = None) -> None:
        self._start = 0 if resumed_after is None else resumed_after + 1
        self._payloads = 0
        self._numbered = 0
        self._first_unnumbered: tuple[Any] | None = None
        """The type of the first event without a number (in a tuple: it may be None)."""
        self._first_wrong: tuple[int, Any, Any] | None = None
        """The position, type and number of the first event numbered out of order."""

    @property
    def next_number(self) -> int | None:
        """The `sequence_number` the next event carries when every one so far carried one."""
        return self._start + self._payloads if self._numbered and self._numbered == self._payloads else None

    def add(self, payload: dict[str, Any]) -> None:
        """The next event's payload."""
        position = self._payloads
        self._payloads += 1
        if "sequence_number" not in payload:
            self._first_unnumbered = self._first_unnumbered or (payload.get("type"),)
            return
        self._numbered += 1
        if self._first_wrong is None and payload["sequence_number"] != self._start + position:
            self._first_wrong = position, payload.get("type"), payload["sequence_number"]

    def findings(self) -> list[Finding]:
        """The stream's numbering findings so far."""
        if not self._numbered:
            return [_finding(Severity.NOTE, "sequence_numbers", "the stream carries no `sequence_number` "
                             "(streams recorded before June 2025 do not)")] if self._payloads else []
        if self._first_unnumbered is not None:
            return [_finding(Severity.ERROR, "sequence_numbers", f"some events have `sequence_number` and some do "
                             f"not (first without: {self._first_unnumbered[0]})")]
        if self._first_wrong is not None:
            position, kind, number = self._first_wrong
            expected = self._start + position
            return [_finding(Severity.ERROR, "sequence_numbers", key="numbering does not go 0, 1, 2 ...",
                             message=f"event {position} ({kind}) has sequence_number {number}, expected {expected}: "
                             f"numbering starts at {self._start} and goes up by 1", expected=expected, actual=number)]
        return []


def _opening(types: list[str | None]) -> list[Finding]:
    """A whole stream opens with response.created, then (response.queued and) response.in_progress."""
    if types[0] != "response.created":
        return [_finding(Severity.ERROR, "lifecycle", f"the first event is {types[0]}, not response.created")]
    after_created = types[2:3] if types[1:2] == ["response.queued"] else types[1:2]
    if after_created and after_created[0] != "response.in_progress":
        return [_finding(Severity.WARNING, "lifecycle", f"response.created is followed by {after_created[0]}, "
                         "not response.in_progress as in OpenAI's streams")]
    return []


def lifecycle_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    payloads = _payloads(events)
    if not payloads:
        return [] if resumed_after is not None else [_finding(Severity.ERROR, "lifecycle", "the stream is empty")]
    types = [p.get("type") for p in payloads]
    findings = _opening(types) if resumed_after is None else []
    terminals = [i for i, t in enumerate(types) if t in TERMINAL_EVENTS]
    if not terminals:
        findings.append(_finding(Severity.ERROR, "terminal", "the stream ended without a terminal event "
                                 "(response.completed, response.incomplete or response.failed)"))
    elif len(terminals) > 1:
        findings.append(_finding(Severity.ERROR, "terminal", f"the stream has {len(terminals)} terminal events: "
                                 + ", ".join(types[i] for i in terminals)))
    elif terminals[0] != len(types) - 1:
        findings.append(_finding(Severity.ERROR, "terminal", f"{types[terminals[0]]} is followed by "
                                 f"{types[terminals[0] + 1]}: the terminal event must be the last"))
    for index in terminals:
        expected = types[index].removeprefix("response.")
        actual = (payloads[index].get("response") or {}).get("status")
        if actual != expected:
            findings.append(_finding(Severity.ERROR, "terminal", f"{types[index]} carries a response with status "
                                     f"{actual!r}", expected=expected, actual=actual))
    return findings


REISSUED_IN_TERMINAL = frozenset({"encrypted_content", "fingerprint"})
"""Opaque fields OpenAI issues anew in the terminal event: a reasoning item's
`encrypted_content`, a `program` item's `fingerprint`."""


@dataclass
class _Item:
    added: dict[str, Any]
    done: dict[str, Any] | None = None
    open_parts: set[int] = field(default_factory=set)


def item_lifecycle_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    findings: list[Finding] = []
    items: dict[int, _Item] = {}
    payloads = _payloads(events)
    failed = any(p.get("type") == "response.failed" for p in payloads)
    for payload in payloads:
        kind, index = payload.get("type"), payload.get("output_index")
        if not isinstance(index, int):
            continue
        item = items.get(index)
        if kind == "response.output_item.added":
            if index in items:
                findings.append(_finding(Severity.ERROR, "items", f"output_index {index} is added twice",
                                         key="an output_index is added twice"))
            elif index != len(items):
                findings.append(_finding(Severity.ERROR, "items", key="output indices do not go 0, 1, 2 ...",
                                         message=f"output_item.added for output_index {index} "
                                         f"comes after {len(items)} items: indices go 0, 1, 2 ...",
                                         expected=len(items), actual=index))
            items[index] = _Item(payload.get("item") or {})
            continue
        if item is None:
            if resumed_after is None:
                findings.append(_finding(Severity.ERROR, "items", key=f"{kind} before its item's output_item.added",
                                         message=f"{kind} for output_index {index} before its "
                                         "output_item.added"))
            continue
        if item.done is not None:
            findings.append(_finding(Severity.ERROR, "items", key=f"{kind} after its item's output_item.done",
                                     message=f"{kind} for output_index {index} after its "
                                     "output_item.done"))
            continue
        item_id = payload.get("item_id")
        if item_id is not None and item_id != item.added.get("id"):
            findings.append(_finding(Severity.ERROR, "items", key=f"{kind} names an item_id not at its output_index",
                                     message=f"{kind} names item_id {item_id!r}, but output_index "
                                     f"{index} is item {item.added.get('id')!r}"))
        if kind == "response.content_part.added":
            item.open_parts.add(payload.get("content_index", 0))
        elif kind == "response.content_part.done":
            item.open_parts.discard(payload.get("content_index", 0))
        elif kind in ("response.output_text.delta", "response.output_text.done") and \
                payload.get("content_index", 0) not in item.open_parts:
            findings.append(_finding(Severity.ERROR, "items", key=f"{kind} outside an open content part",
                                     message=f"{kind} for output_index {index} outside an open "
                                     "content part (content_part.added ... content_part.done)"))
        elif kind == "response.output_item.done":
            done = payload.get("item") or {}
            item.done = done
            if done.get("type") != item.added.get("type") or done.get("id") != item.added.get("id"):
                findings.append(_finding(Severity.ERROR, "items", key="output_item.done is another item than added",
                                         message=f"output_item.done at {index} is "
                                         f"{done.get('type')} {done.get('id')!r}, but the item added there is "
                                         f"{item.added.get('type')} {item.added.get('id')!r}"))
            if item.open_parts:
                findings.append(_finding(Severity.ERROR, "items", key="output_item.done while content parts are open",
                                         message=f"output_item.done at {index} while content "
                                         f"part(s) {sorted(item.open_parts)} are still open"))
    closed_list_tools = [i for i, it in items.items() if it.done and it.added.get("type") == "mcp_list_tools"]
    for index, item in items.items():
        if item.done is not None:
            continue
        item_type = item.added.get("type")
        if item_type == "mcp_list_tools" and any(i > index for i in closed_list_tools):
            findings.append(_finding(Severity.NOTE, "items", key="an mcp_list_tools but the last is never closed",
                                     message=f"mcp_list_tools at {index} is never closed with "
                                     "output_item.done; OpenAI closes only the last of several"))
        elif failed:
            findings.append(_finding(Severity.NOTE, "items", key=f"{item_type} left open by the failed response",
                                     message=f"{item_type} at {index} is left open by the failed "
                                     "response"))
        else:
            findings.append(_finding(Severity.ERROR, "items", key=f"{item_type} added but never closed",
                                     message=f"{item_type} at output_index {index} is added but "
                                     "never closed with response.output_item.done"))
    return findings


def delta_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    findings = []
    streamed: dict[tuple[str, Any, Any], str] = {}
    for payload in _payloads(events):
        kind = payload.get("type")
        if kind in _DELTAS:
            sub = _DELTAS[kind].separator
            key = (kind, payload.get("item_id", payload.get("output_index")), payload.get(sub) if sub else None)
            streamed[key] = streamed.get(key, "") + str(payload.get("delta", ""))
        elif kind in _DONE_TO_DELTA:
            delta_kind = _DONE_TO_DELTA[kind]
            value_field, sub = _DELTAS[delta_kind].field, _DELTAS[delta_kind].separator
            key = (delta_kind, payload.get("item_id", payload.get("output_index")), payload.get(sub) if sub else None)
            if key in streamed and streamed[key] != payload.get(value_field) and resumed_after is None:
                which = f"item {payload['item_id']!r}" if "item_id" in payload else \
                    f"the item at output_index {payload.get('output_index')}"
                findings.append(_finding(Severity.ERROR, "deltas", key=f"{delta_kind} events do not add up to {kind}",
                                         message=f"the {delta_kind} events of {which} concatenate to "
                                         f"{streamed[key][:60]!r}, but {kind} says "
                                         f"{str(payload.get(value_field))[:60]!r}"))
    return findings


def _done_items(payloads: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The item each `output_item.done` closes, by output_index."""
    return {p["output_index"]: p["item"] for p in payloads if p.get("type") == "response.output_item.done"
            and isinstance(p.get("output_index"), int) and isinstance(p.get("item"), dict)}


_ABSENT = object()


def _follow(item: Any, path: tuple[Any, ...], index: Any) -> Any:
    """The value at `path` in `item` (`_SUB` standing for `index`), or `_ABSENT`."""
    for step in path:
        step = index if step is _SUB else step
        if isinstance(step, str) and isinstance(item, dict):
            item = item.get(step, _ABSENT)
        elif isinstance(step, int) and isinstance(item, list) and 0 <= step < len(item):
            item = item[step]
        else:
            return _ABSENT
    return item


def _dotted(path: tuple[Any, ...], index: Any) -> str:
    return "".join(f"[{index}]" if step is _SUB else f".{step}" for step in path).lstrip(".")


def done_value_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """A `.done` event's whole value is the one its item carries when `output_item.done` closes
    it: the text of a content part, a call's arguments, the code a code_interpreter_call runs, a
    custom tool call's input, an apply_patch_call's diff, a shell_call's command."""
    payloads = _payloads(events)
    done_items = _done_items(payloads)
    findings = []
    for payload in payloads:
        kind, output_index = payload.get("type"), payload.get("output_index")
        item = done_items.get(output_index) if isinstance(output_index, int) else None
        if kind not in _DONE_TO_DELTA or item is None:
            continue
        streamed = _DELTAS[_DONE_TO_DELTA[kind]]
        index = payload.get(streamed.separator, 0) if streamed.separator else None
        carried, where = _follow(item, streamed.path, index), _dotted(streamed.path, index)
        if carried != payload.get(streamed.field):
            shown = "nothing" if carried is _ABSENT else repr(str(carried)[:60])
            findings.append(_finding(Severity.ERROR, "done_value", key=f"{kind} differs from its item's {where}",
                                     message=f"{kind} at output_index {output_index} says "
                                     f"{str(payload.get(streamed.field))[:60]!r}, but the {item.get('type')} "
                                     f"output_item.done closes carries {shown} at {where}"))
    return findings


def annotation_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """`response.output_text.annotation.added` events number a content part's annotations 0, 1,
    2 ... and together are the annotations that part carries when its item is done."""
    if resumed_after is not None:
        return []
    payloads = _payloads(events)
    added: dict[tuple[Any, Any], list[Any]] = {}
    findings = []
    for payload in payloads:
        if payload.get("type") != "response.output_text.annotation.added":
            continue
        part = (payload.get("output_index"), payload.get("content_index"))
        so_far = added.setdefault(part, [])
        if payload.get("annotation_index") != len(so_far):
            findings.append(_finding(Severity.ERROR, "annotations", key="annotation indices do not go 0, 1, 2 ...",
                                     message=f"output_text.annotation.added at output_index {part[0]}, "
                                     f"content_index {part[1]} has annotation_index "
                                     f"{payload.get('annotation_index')!r}, expected {len(so_far)}",
                                     expected=len(so_far), actual=payload.get("annotation_index")))
        so_far.append(payload.get("annotation"))
    done_items = _done_items(payloads)
    for (output_index, content_index), part_annotations in added.items():
        item = done_items.get(output_index)
        carried = _follow(item, ("content", _SUB, "annotations"), content_index) if item else _ABSENT
        if item is not None and carried != part_annotations:
            count = "none" if carried is _ABSENT else len(carried)
            findings.append(_finding(Severity.ERROR, "annotations", key="annotations added differ from the part's",
                                     message=f"output_index {output_index}, content_index {content_index}: the "
                                     f"{len(part_annotations)} annotation(s) added differ from the {count} its part "
                                     "carries when output_item.done closes the item"))
    return findings


CALL_PHASE_FAMILIES = frozenset({"web_search_call", "file_search_call", "code_interpreter_call",
                                 "image_generation_call", "mcp_call", "mcp_list_tools"})
"""Items whose progress is streamed as `response.<item type>.<phase>` events."""
_FINAL_PHASES = frozenset({"completed", "failed"})


def call_phase_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """A hosted tool's phase events (`response.web_search_call.searching`, ...) belong to an item
    of that type; its phases open with `in_progress`, end with one `completed` or `failed`, and
    its partial images number 0, 1, 2 ..."""
    findings = []
    item_types: dict[int, Any] = {}
    phases: dict[int, list[str]] = {}
    for payload in _payloads(events):
        kind, index = str(payload.get("type")), payload.get("output_index")
        if kind == "response.output_item.added" and isinstance(index, int):
            item_types[index] = (payload.get("item") or {}).get("type")
        family, _, phase = kind.removeprefix("response.").rpartition(".")
        if family not in CALL_PHASE_FAMILIES or not isinstance(index, int) or index not in item_types:
            continue
        if item_types[index] != family:
            findings.append(_finding(Severity.ERROR, "call_phases", key=f"{kind} for an item of another type",
                                     message=f"{kind} for output_index {index}, which is a "
                                     f"{item_types[index]}"))
            continue
        seen = phases.setdefault(index, [])
        if not seen and phase != "in_progress" and resumed_after is None:
            findings.append(_finding(Severity.ERROR, "call_phases", key=f"{family} phases do not open with in_progress",
                                     message=f"{kind} is the first phase of the {family} at output_index "
                                     f"{index}; its phases open with response.{family}.in_progress"))
        elif _FINAL_PHASES & set(seen):
            findings.append(_finding(Severity.ERROR, "call_phases", key=f"{family} phase after its final one",
                                     message=f"{kind} for the {family} at output_index {index} after its "
                                     f"{next(p for p in seen if p in _FINAL_PHASES)} phase"))
        if phase == "partial_image" and resumed_after is None and \
                payload.get("partial_image_index") != seen.count("partial_image"):
            findings.append(_finding(Severity.ERROR, "call_phases", key="partial image indices do not go 0, 1, 2 ...",
                                     message=f"{kind} at output_index {index} has partial_image_index "
                                     f"{payload.get('partial_image_index')!r}, expected {seen.count('partial_image')}",
                                     expected=seen.count("partial_image"), actual=payload.get("partial_image_index")))
        seen.append(phase)
    return findings


def terminal_output_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    payloads = _payloads(events)
    terminal = next((p for p in reversed(payloads) if p.get("type") in TERMINAL_EVENTS), None)
    if terminal is None:
        return []
    output = (terminal.get("response") or {}).get("output") or []
    done = {p["output_index"]: p.get("item") for p in payloads
            if p.get("type") == "response.output_item.done" and isinstance(p.get("output_index"), int)}
    added = {p["output_index"] for p in payloads
             if p.get("type") == "response.output_item.added" and isinstance(p.get("output_index"), int)}
    findings = []
    if terminal.get("type") != "response.failed" and resumed_after is None and len(output) != len(added):
        findings.append(_finding(Severity.ERROR, "terminal_output", f"{terminal['type']} lists {len(output)} output "
                                 f"items, but the stream added {len(added)}", expected=len(added), actual=len(output)))
    for index, item in enumerate(output):
        if index in done and done[index] != item:
            carried = done[index] or {}
            differing = sorted(k for k in set(item) | set(carried) if item.get(k) != carried.get(k))
            if set(differing) <= REISSUED_IN_TERMINAL:
                findings.append(_finding(Severity.NOTE, "terminal_output", key=f"{terminal['type']} output carries "
                                         f"{', '.join(differing)} issued anew",
                                         message=f"{terminal['type']} output[{index}] "
                                         f"carries {', '.join(differing)} issued anew, as OpenAI's streams do"))
                continue
            findings.append(_finding(Severity.ERROR, "terminal_output", key=f"{terminal['type']} output differs from "
                                     "the items done", message=f"{terminal['type']} output[{index}] differs "
                                     f"from the item its output_item.done carried (fields: {', '.join(differing)})"))
    return findings


def done_sentinel_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    if not any(event.is_done_sentinel for event in events):
        return []
    return [_finding(Severity.WARNING, "done_sentinel", "the stream sends data: [DONE], which OpenAI's Responses "
                     "streams never do (its Chat Completions streams do); most clients skip it")]


_LIFECYCLE_EVENTS = ("response.created", "response.queued", "response.in_progress", *TERMINAL_EVENTS)
_IDENTITY = ("id", "created_at", "model")


def response_identity_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """The Response that response.created announces is the one every later lifecycle event
    carries: the same `id`, `created_at` and `model`."""
    snapshots = [(p["type"], p["response"]) for p in _payloads(events)
                 if p.get("type") in _LIFECYCLE_EVENTS and isinstance(p.get("response"), dict)]
    if not snapshots:
        return []
    first_type, first = snapshots[0]
    findings = []
    for event_type, response in snapshots[1:]:
        differing = [name for name in _IDENTITY if response.get(name) != first.get(name)]
        if differing:
            findings.append(_finding(Severity.ERROR, "response_identity", key=f"{event_type} carries another "
                                     f"{', '.join(differing)}", message=f"{event_type} carries a response whose "
                                     + ", ".join(f"{name} {response.get(name)!r}" for name in differing)
                                     + f" differ(s) from {first_type}'s "
                                     + ", ".join(f"{first.get(name)!r}" for name in differing),
                                     expected={n: first.get(n) for n in differing},
                                     actual={n: response.get(n) for n in differing}))
    return findings


_MCP_CALL_OUTCOMES = {"response.mcp_call.completed": "completed", "response.mcp_call.failed": "failed"}


_FILLED_LATER = frozenset({"status", "encrypted_content", "fingerprint"})
"""Fields an item changes between `.added` and `.done` on purpose: its status, and the opaque
values OpenAI mints anew when it is done (a reasoning or compaction item's `encrypted_content`,
a program's `fingerprint`: recorded)."""


def _unfilled_or_final(added: Any, done: Any) -> bool:
    """Whether a value an item is added with is not yet filled (null, empty, or a list of such,
    as a shell_call's commands `[""]` before their deltas) or already the one it is done with;
    an object, field by field."""
    if added in (None, "", [], {}) or added == done:
        return True
    if isinstance(added, list):
        return all(_unfilled_or_final(value, None) for value in added)
    return isinstance(added, dict) and isinstance(done, dict) and \
        all(_unfilled_or_final(value, done.get(key)) for key, value in added.items())


def added_value_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """An item is added with each field either not yet filled or already as it is done: a
    client that shows the item from `output_item.added` never shows a value the item does not
    end with (OpenAI adds a file_search_call with `queries: []`, filled when it is done)."""
    payloads = _payloads(events)
    done_items = _done_items(payloads)
    findings = []
    for payload in payloads:
        added, index = payload.get("item"), payload.get("output_index")
        done = done_items.get(index) if isinstance(index, int) else None
        if payload.get("type") != "response.output_item.added" or not isinstance(added, dict) or done is None:
            continue
        for name, value in added.items():
            if name not in _FILLED_LATER and name in done and not _unfilled_or_final(value, done[name]):
                findings.append(_finding(
                    Severity.ERROR, "added_value", key=f"a {added.get('type')} is added with a {name} it is not done "
                    "with", message=f"the {added.get('type')} at output_index {index} is added with {name} "
                    f"{json.dumps(value)[:80]}, but done with {json.dumps(done[name])[:80]}: a field is added empty "
                    "or as it ends", expected=done[name], actual=value))
    return findings


def mcp_call_outcome_conformance(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """An `mcp_call` that ends with `response.mcp_call.completed` is done with status completed;
    one that ends with `.failed`, with status failed."""
    payloads = _payloads(events)
    outcomes = {p.get("item_id"): p["type"] for p in payloads if p.get("type") in _MCP_CALL_OUTCOMES}
    findings = []
    for payload in payloads:
        item = payload.get("item") if payload.get("type") == "response.output_item.done" else None
        if not isinstance(item, dict) or item.get("type") != "mcp_call" or item.get("id") not in outcomes:
            continue
        event_type = outcomes[item["id"]]
        if item.get("status") != _MCP_CALL_OUTCOMES[event_type]:
            findings.append(_finding(Severity.ERROR, "mcp_call_outcome", key=f"an mcp_call ends {item.get('status')!r} "
                                     f"after {event_type}", message=f"mcp_call {item.get('id')!r} ends with "
                                     f"status {item.get('status')!r} after {event_type}",
                                     expected=_MCP_CALL_OUTCOMES[event_type], actual=item.get("status")))
    return findings


RULES: tuple[Callable[[list[SseEvent], int | None], list[Finding]], ...] = (
    framing_conformance, sequence_conformance, lifecycle_conformance, item_lifecycle_conformance,
    delta_conformance, done_value_conformance, annotation_conformance, call_phase_conformance,
    terminal_output_conformance, done_sentinel_conformance, response_identity_conformance,
    mcp_call_outcome_conformance, added_value_conformance,
)


def check_chat_stream(events: list[SseEvent]) -> list[Finding]:
    """The rules of a Chat Completions chunk stream: every data line a `chat.completion.chunk`
    (or an error) of one completion id, exactly one chunk with a finish_reason and only a usage
    chunk after it, and `data: [DONE]` last, as OpenAI sends it."""
    findings: list[Finding] = []
    chunks: list[dict[str, Any]] = []
    for position, event in enumerate(events):
        if event.is_done_sentinel:
            continue
        if event.payload is None:
            what = event.defect.message if event.defect else "is not a JSON object"
            findings.append(_finding(Severity.ERROR, "chat_chunks", f"data line {position} {what}",
                                     key="a data line is not a JSON object"))
        elif "error" not in event.payload:
            if event.payload.get("object") != "chat.completion.chunk":
                findings.append(_finding(Severity.ERROR, "chat_chunks",
                                         key="a data line is not a chat.completion.chunk",
                                         message=f"data line {position} is a "
                                         f"{event.payload.get('object')!r}, not a chat.completion.chunk"))
            chunks.append(event.payload)
    if len({chunk.get("id") for chunk in chunks}) > 1:
        findings.append(_finding(Severity.ERROR, "chat_chunks", "the chunks carry more than one completion id"))
    finishes = [i for i, chunk in enumerate(chunks) if any(c.get("finish_reason") for c in chunk.get("choices") or [])]
    if len(finishes) != 1:
        findings.append(_finding(Severity.ERROR, "chat_finish", f"{len(finishes)} chunks carry a finish_reason; "
                                 "exactly one must"))
    elif any(chunk.get("choices") for chunk in chunks[finishes[0] + 1:]):
        findings.append(_finding(Severity.ERROR, "chat_finish", "content follows the chunk with the finish_reason"))
    if not events or not events[-1].is_done_sentinel:
        findings.append(_finding(Severity.WARNING, "chat_done", "the stream does not end with data: [DONE], as "
                                 "OpenAI's Chat Completions streams do"))
    return findings


def check_stream(events: list[SseEvent], resumed_after: int | None = None) -> list[Finding]:
    """Every grammar rule's findings for one stream (resumed after sequence number N, or whole)."""
    return [finding for rule in RULES for finding in rule(events, resumed_after)]
