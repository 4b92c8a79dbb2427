"""Schema checks without a reference: every Response, stream event and error envelope is
validated against JSON Schema derived at run time from the installed `openai` SDK's types.

The SDK's models are the newest word on the wire format, and real OpenAI traffic from a year
ago does not match them field for field. So each violation is sorted by what it would do to
a client, never reported flatly:

- **error** (breaks a client): a value of the wrong JSON type, a missing `id`, `type` or
  `call_id`, an output item type the SDK does not know, an error envelope without its
  `message` or `type`;
- **warning**: an unknown type where clients usually pass things through (a content part, an
  annotation, a tool echo), an event type the SDK does not know, a bound or pattern broken;
- any other field the SDK marks required but the answer lacks: a **warning** for a target
  answering now (`current`: OpenAI sends it today, and a client validating strictly, like the
  SDK with `_strict_response_validation`, rejects the answer), a **note** (drift) for traffic
  recorded earlier (added after it: `sequence_number`, `logprobs`, `usage.*_details.*`,
  `web_search_call.action`);
- **note**: a value outside a closed enum (`insufficient_quota`, a web search source of type
  `api`); an event type OpenAI sends that the SDK does not declare yet (an `apply_patch` diff).

Discriminated unions (`anyOf` over objects told apart by `type`) are rewritten to `if/then`
dispatch on `type` before validation, so a bad item yields the precise error inside its own
shape rather than "matches none of 28 alternatives".

Each object is first asked of jsonschema-rs (compiled, a few microseconds for a Response, where
jsonschema takes most of a millisecond); only one it finds invalid is walked by jsonschema, whose
errors (paths, values, the leaves of an `anyOf`) the findings are made of. Both implement Draft
2020-12; jsonschema-rs saying valid where jsonschema finds an error would lose a finding, which
`tests/harness/test_schema_validators_agree.py` rules out over every payload the tests know and
mutations of them.

Deriving the schemas imports the SDK and takes about a second, so they are derived once and
kept on disk (`PARITY_CACHE_DIR`, `sdk-schemas/`) under a name made of the openai and
pydantic versions and a hash of this module: a new SDK, pydantic or rule derives them anew.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, ValidationError

from ..model.findings import Finding, Kind, Severity
from ...openai_contract.json_cache import load_or_build, sdk_cache_file

BREAKING_IF_MISSING = frozenset({"id", "type", "call_id"})
"""Fields whose absence stops a client: it cannot tell what a thing is or answer it."""
BREAKING_IF_MISSING_BY_KIND = {"error": frozenset({"message"})}
"""An error envelope without its message tells the client nothing."""

_ITEM_PATH = re.compile(r"(^|\.)output\[\d+\]$|^item$")
"""Where an output item sits: in a Response's `output`, or as an event's `item`."""


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return root["$defs"][ref.rsplit("/", 1)[1]] if isinstance(ref, str) else schema


def _type_values(member: dict[str, Any]) -> list[str] | None:
    """The `type` values an object schema accepts, or None when it is not a tagged object."""
    tag = (member.get("properties") or {}).get("type") or {}
    if "const" in tag:
        return [tag["const"]]
    if isinstance(tag.get("enum"), list):
        return list(tag["enum"])
    return None


def _dispatch(branches: list[dict[str, Any]], root: dict[str, Any]) -> dict[str, Any] | None:
    """An `if/then` rewrite of a union of tagged objects, or None if it is not one."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for branch in branches:
        values = _type_values(_resolve(branch, root))
        if not values:
            return None
        for value in values:
            by_type.setdefault(value, []).append(branch)
    rules = [{"if": {"properties": {"type": {"const": value}}, "required": ["type"]},
              "then": members[0] if len(members) == 1 else {"anyOf": members}} for value, members in by_type.items()]
    return {"type": "object", "required": ["type"],
            "properties": {"type": {"type": "string", "enum": sorted(by_type), "x-discriminator": True}},
            "allOf": rules}


def _rewrite(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _rewrite(value, root) for key, value in node.items()}
    branches = node.get("anyOf")
    if isinstance(branches, list) and len(branches) > 1:
        tagged = [b for b in branches if b != {"type": "null"}]
        dispatch = _dispatch(tagged, root) if len(tagged) > 1 else None
        if dispatch is not None:
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            node = rest | ({"anyOf": [dispatch, {"type": "null"}]} if len(tagged) < len(branches) else dispatch)
    return node


def _derived(model: Any) -> dict[str, Any]:
    from pydantic import TypeAdapter

    schema = TypeAdapter(model).json_schema()
    return _rewrite(schema, copy.deepcopy(schema))


def _compacted_window() -> Any:
    """`CompactedResponse` with the `output` OpenAI sends and the SDK describes in words ("all
    user messages, followed by a single compaction item"): its type says output items, whose
    messages are the assistant's, and every recorded compaction holds user messages there."""
    from openai.types.responses import CompactedResponse, ResponseCompactionItem, ResponseInputMessageItem

    class CompactedWindow(CompactedResponse):
        output: list[ResponseInputMessageItem | ResponseCompactionItem]  # type: ignore[assignment]

    return CompactedWindow


def derive_sdk_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each kind of payload, derived from the installed SDK's types."""
    from openai.types import ErrorObject
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.responses import InputTokenCountResponse, Response, ResponseStreamEvent

    models = {"response": Response, "event": ResponseStreamEvent, "error": ErrorObject,
              "chat.completion": ChatCompletion, "chat.completion.chunk": ChatCompletionChunk,
              "response.compaction": _compacted_window(), "response.input_tokens": InputTokenCountResponse}
    return {kind: _derived(model) for kind, model in models.items()}


def sdk_schema_cache_file() -> Path:
    """Where the schemas of the installed SDK, as this module derives them, are kept."""
    return sdk_cache_file("sdk-schemas", __file__)


def _complete(value: Any) -> bool:
    kinds = ("response", "event", "error", "chat.completion", "chat.completion.chunk", "response.compaction",
             "response.input_tokens")
    return isinstance(value, dict) and all(isinstance(value.get(kind), dict) for kind in kinds)


def sdk_schemas() -> dict[str, dict[str, Any]]:
    """`derive_sdk_schemas()`, read from the cache file when it holds them, else derived and
    saved there."""
    return load_or_build(sdk_schema_cache_file(), derive_sdk_schemas, _complete)


_BUILDING = threading.Lock()
"""Building the validators takes CPU (a second without the cache); checks run in worker
threads, and the first ones to need the validators must not each build them."""


class Compiled:
    """A schema as jsonschema-rs compiles it, on first use (once, whichever thread asks first)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._validator: Any = None
        self._compiling = threading.Lock()

    def is_valid(self, instance: Any) -> bool:
        return bool(self.compile().is_valid(instance))

    def compile(self) -> Any:
        """jsonschema-rs's validator of the schema, compiled by the first caller."""
        if self._validator is None:
            with self._compiling:
                if self._validator is None:
                    self._validator = jsonschema_rs.Draft202012Validator(self._schema)
        return self._validator


class Validator:
    """One schema's validation: whether an object is valid (`compiled`, jsonschema-rs's: by
    default of this schema, or of one that holds an object valid only where this one does), and
    if not, why (`errors`, jsonschema's)."""

    def __init__(self, schema: dict[str, Any], compiled: Compiled | None = None) -> None:
        self.schema = schema
        self.compiled = compiled or Compiled(schema)
        self._detailed = Draft202012Validator(schema)

    def valid(self, instance: Any) -> bool:
        return self.compiled.is_valid(instance)

    def errors(self, instance: Any) -> Iterator[ValidationError]:
        return self._detailed.iter_errors(instance)


def validators() -> dict[str, Validator]:
    """Validators by kind of payload, built once from the installed SDK."""
    with _BUILDING:
        return _validators()


def event_validators() -> dict[str, Validator]:
    """One validator per stream event type: the event union dispatched once, by `type`, in
    Python rather than by trying each of its sixty `if` branches on every event."""
    with _BUILDING:
        return _event_validators()


def prepare_validators() -> None:
    """Build the validators, and compile those of whole payloads, now rather than in the first
    check (a tenth of a second: reading the SDK's schemas, compiling the largest)."""
    for validator in validators().values():
        validator.compiled.compile()
    event_validators()


@cache
def _validators() -> dict[str, Validator]:
    return {kind: Validator(schema) for kind, schema in sdk_schemas().items()}


@cache
def _event_validators() -> dict[str, Validator]:
    """Each type's validator asks the whole union first (compiled once: for jsonschema-rs its
    sixty `if` branches cost nothing, where one compiled copy of each type's schema cost about
    2 MiB each, 9 MiB for the three that hold a Response); only the jsonschema walk of an
    invalid event is its type's own."""
    events = _validators()["event"]
    root = events.schema
    return {rule["if"]["properties"]["type"]["const"]: Validator(rule["then"] | {"$defs": root["$defs"]},
                                                                  events.compiled)
            for rule in root["allOf"]}


@dataclass(frozen=True)
class Where:
    """Where a checked object sits: `label` names it with its position (`event 12
    (response.completed)`), `general` without (`event (response.completed)`), so a finding's
    message says where and its key what."""

    label: str
    general: str

    @classmethod
    def of(cls, where: str | Where) -> Where:
        return where if isinstance(where, Where) else cls(where, where)

    def inside(self, name: str) -> Where:
        return Where(f"{self.label} {name}", f"{self.general} {name}")


def _path(error: ValidationError, general: bool = False) -> str:
    """The path to the error (`output[1].content`); `general`: list positions as `[i]`."""
    text = ""
    for part in error.absolute_path:
        text += ("[i]" if general else f"[{part}]") if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """The errors that say what is wrong: for a nullable value that is not null, those of its
    non-null branch; for other unions, the union's error itself."""
    if error.validator == "anyOf" and error.instance is not None and error.context:
        schemas = error.validator_value
        non_null = [i for i, s in enumerate(schemas) if s != {"type": "null"}]
        if len(non_null) == 1:
            for sub in error.context:
                if sub.relative_schema_path and sub.relative_schema_path[0] == non_null[0]:
                    yield from _leaves(sub)
            return
    yield error


def _missing(name: str, where: Where, kind: str, current: bool) -> Finding:
    if name in BREAKING_IF_MISSING | BREAKING_IF_MISSING_BY_KIND.get(kind, frozenset()):
        return _finding(Severity.ERROR, "required", where, f"`{name}` is missing")
    if current:
        return _finding(Severity.WARNING, "missing", where, f"`{name}` is missing: the installed openai SDK requires "
                        "it and OpenAI sends it, so a client that validates strictly rejects the answer")
    return _finding(Severity.NOTE, "drift", where, f"`{name}` is absent (the SDK added or requires it; older OpenAI "
                    "traffic lacks it)")


def _classify(error: ValidationError, where: Where, kind: str, current: bool) -> list[Finding]:
    path = _path(error)
    if path:
        where = Where(f"{where.label} {path}", f"{where.general} {_path(error, general=True)}")
    if error.validator == "required":
        return [_missing(name, where, kind, current)
                for name in error.validator_value if name not in (error.instance or {})]
    if error.validator == "enum" and error.schema.get("x-discriminator"):
        item = bool(_ITEM_PATH.search(path.removesuffix(".type")))
        return [_finding(Severity.ERROR if item else Severity.WARNING, "unknown_type", where,
                         f"{'output item type' if item else 'type'} {error.instance!r} is not one the installed "
                         "openai SDK knows")]
    if error.validator in ("enum", "const"):
        return [_finding(Severity.NOTE, "open_enum", where, f"{error.instance!r} is outside the SDK's values")]
    if error.validator in ("type", "anyOf"):
        return [_finding(Severity.ERROR, "type", where, f"{_short(error.instance)} is not {_expected_type(error)}")]
    return [_finding(Severity.WARNING, str(error.validator), where, error.message)]


def _expected_type(error: ValidationError) -> str:
    if error.validator == "type":
        return f"of type {error.validator_value}"
    kinds = [s.get("type") or s.get("$ref", "?").rsplit("/", 1)[-1] for s in error.validator_value]
    return "any of " + ", ".join(str(k) for k in kinds)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _finding(severity: Severity, rule: str, where: Where, text: str) -> Finding:
    return Finding(Kind.SCHEMA, severity, f"schema.{rule}", f"{where.label}: {text}", key=f"{where.general}: {text}")


def check_payload(kind: str, instance: Any, where: str | Where, current: bool = False) -> list[Finding]:
    """Findings for one object of a kind `validators()` knows, each naming `where` it is;
    `current`: the target answered just now (not traffic recorded earlier)."""
    return _validate(validators()[kind], kind, instance, Where.of(where), current)


def _validate(validator: Validator, kind: str, instance: Any, where: Where, current: bool) -> list[Finding]:
    if not isinstance(instance, dict):
        return [_finding(Severity.ERROR, "type", where, f"{_short(instance)} is not a JSON object")]
    if validator.valid(instance):
        return []
    findings = [finding for error in validator.errors(instance) for leaf in _leaves(error)
                for finding in _classify(leaf, where, kind, current)]
    return _dedup(findings)


def _dedup(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    kept = []
    for finding in findings:
        if (finding.rule, finding.message) not in seen:
            seen.add((finding.rule, finding.message))
            kept.append(finding)
    return kept


def check_event(payload: dict[str, Any], position: int, current: bool = False) -> list[Finding]:
    """One stream event. The nested error event OpenAI sends (`{type: error, error: {...}}`)
    is checked as an error envelope; an event type the SDK lacks is a warning."""
    event_type = payload.get("type")
    where = Where(f"event {position} ({event_type})", f"event ({event_type})")
    if event_type == "error" and isinstance(payload.get("error"), dict):
        return [_finding(Severity.NOTE, "nested_error_event", where, "carries its error nested under `error`, as "
                         "OpenAI sends it (the SDK's type has the fields at the top level)"),
                *check_payload("error", payload["error"], where.inside("error"), current)]
    validator = event_validators().get(event_type)  # type: ignore[arg-type]
    if validator is not None:
        return _validate(validator, "event", payload, where, current)
    from ..scenario.vocabulary import EVENT_TYPES_BEYOND_THE_SDK  # it imports the SDK: only for a type the SDK lacks

    if event_type in EVENT_TYPES_BEYOND_THE_SDK:
        return [_finding(Severity.NOTE, "sdk_lag", where, "an event type OpenAI sends that the installed openai "
                         "SDK does not declare yet")]
    return [_finding(Severity.WARNING, "unknown_event", where, "an event type the installed openai SDK does not "
                     "know")]


def check_error_envelope(body: Any, where: str = "body", current: bool = False) -> list[Finding]:
    """An error answer's body: `{"error": {message, type, param, code}}`."""
    location = Where.of(where)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return [_finding(Severity.ERROR, "error_envelope", location, "an error answer without the "
                         '{"error": {message, type, param, code}} envelope')]
    findings = check_payload("error", error, location.inside("error"), current)
    missing = [name for name in ("param", "code") if name not in error]
    if missing:
        findings.append(_finding(Severity.WARNING, "error_envelope", location.inside("error"), f"lacks "
                                 f"{' and '.join(missing)} (OpenAI always sends them, null when empty)"))
    return findings
