"""OpenAI's request bodies as one machine-readable description, and the 400 a body that breaks
it gets.

The description is JSON Schema built from the installed `openai` SDK's request TypedDicts
(generated from OpenAI's spec, so it follows OpenAI as the SDK updates), tightened as OpenAI
enforces it: an object takes no key it does not declare (`unknown_parameter`); a union of
objects is told apart by their `type` (so an error names the member the body meant, not the
closest of thirty); and the bounds the SDK does not carry (lengths, counts, ranges, patterns),
which OpenAI's OpenAPI description states, are added from the data the project ships
(`openai_bounds.py`), with the few it states only in words or not at all (`DOCUMENTED_BOUNDS`,
`OBSERVED_BOUNDS`). `jsonschema` checks a body against it; `first_violation` turns the first
violation, in body order, into OpenAI's 400 as a `Violation` (its code, its `param` path as
`input[0].content`, its wording, per the contract notes §4.2).

Deriving JSON Schema from the SDK's types imports the SDK and pydantic and takes about half a
second, so what is derived (`sdk_descriptions`: each body's schema and the SDK's literal value
sets the gateway checks against) is kept on disk (`json_cache`, `sdk-requests/`) under a name
made of the openai and pydantic versions and a hash of this module: the gateway and the harness
start without importing the SDK, and a new SDK, pydantic or list of bodies derives it anew.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import import_module
from pathlib import Path
from typing import Any, get_args

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from . import openai_bounds
from .json_cache import load_or_build, sdk_cache_file
from .violations import Violation, invalid_type, invalid_value, json_type, missing, unknown

Schema = dict[str, Any]

DOCUMENTED_BOUNDS: dict[str, Schema] = {"metadata": {"maxProperties": 16}, "metadata.<key>": {"maxLength": 64},
                                        "metadata.*": {"maxLength": 512}}
"""Bounds OpenAI's description states only in words, by path (`openai_bounds.py`): `metadata`
holds 16 keys of at most 64 characters, each value at most 512. Added to every body that has it."""
OBSERVED_BOUNDS: dict[str, dict[str, Schema]] = {"responses": {"max_tool_calls": {"minimum": 1}}}
"""Bounds OpenAI enforces that its description does not state, per body (contract notes §3.5)."""


def bounds_of(body: str) -> dict[str, Schema]:
    """Every bound of one body (a name of `openai_bounds.BODIES`), by path."""
    return DOCUMENTED_BOUNDS | openai_bounds.bounds(body) | OBSERVED_BOUNDS.get(body, {})


def member_bounds(body: str) -> dict[str, int]:
    """The top-level arrays and objects of one body whose number of members is bounded, and the
    bound: the gateway's `read_json` counts their members as it parses them, and refuses one too
    many before the rest is read."""
    return {path: bound.get("maxItems", bound.get("maxProperties")) for path, bound in bounds_of(body).items()
            if openai_bounds.segments(path) == [path] and ("maxItems" in bound or "maxProperties" in bound)}


_KIND = "x-number-kind"
_DISPATCH = "x-dispatch-by-type"
_IMPLICIT = ""
"""The dispatch key of the member a body meets when it leaves `type` out."""
_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a decimal", "boolean": "a boolean",
               "array": "an array", "object": "an object", "null": "null"}
_ROLES_AS_OPENAI_LISTS_THEM = ("assistant", "system", "developer", "user")
_ALSO_REQUIRED = {"function_call_output": {"call_id", "output"}, "function_call": {"call_id", "name", "arguments"}}
"""Keys of the objects of a `type` that OpenAI requires and the SDK lets a body leave out
(contract notes §4.2)."""
_NOT_REQUIRED = {"function": {"strict", "parameters"}, "message": {"type", "id", "status"},
                 "output_text": {"annotations"}, "reasoning": {"id"}}
"""Keys the SDK makes a body send that OpenAI lets it leave out: a function tool without
`strict` is echoed strict (recorded); an assistant message sent back as input with `output_text`
content needs neither `id` nor `status` (recorded: `{type: message, role: assistant, content:
[{type: output_text, text, annotations: []}]}` answered 200), nor its `type` or the text's
`annotations` (recorded: `{role: assistant, content: [{type: output_text, text}]}` passed the
request's checks and was refused only for the context window); a reasoning item sent back without
its `id` (recorded: `{type: reasoning, summary: [], encrypted_content}` with `store: false`
answered 200)."""
_ALSO_ALLOWED = {frozenset({"attributes", "file_id", "filename", "score", "text"}):
                 {"vector_store_id": {"type": ["string", "null"]}},
                 frozenset({"content", "role", "status", "type"}): {"id": {"type": "string"}}}
"""Keys OpenAI's own output carries, and so accepts back as input, that the SDK's input types
lack, by the keys of the object that has them: a `file_search_call` result's `vector_store_id`
(recorded with `include: ["file_search_call.results"]`); a user message's `id`, which every
user message of a compacted window carries (recorded: `/responses/compact` answers them with
new `msg_` ids) and which OpenAI's guides say to send back as it is ("as-is; do not prune")."""
_NAMED_ARRAYS = {"input": "array of input items"}
"""How OpenAI names an array parameter in `expected one of ...` (contract notes §4.2)."""


def _param(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class RequestSchema:
    """The description of one surface's request body, and its check."""

    schema: Schema
    required: tuple[str, ...] = ()
    """The keys the SDK says a body must have (checking that they are there, and in what order
    they are asked for, is the caller's: `first_violation` does not)."""
    unapplied: tuple[str, ...] = ()
    """The paths of OpenAI's bounds on this body that its SDK type does not have (a field the
    installed SDK does not know yet): not checked."""

    @property
    def parameters(self) -> frozenset[str]:
        """Every top-level key the body may have."""
        return frozenset(self.schema["properties"])

    @cached_property
    def _validators(self) -> dict[str, Any]:
        definitions = self.schema.get("$defs", {})
        return {key: _Validator(schema | {"$defs": definitions})
                for key, schema in self.schema["properties"].items()}

    @cached_property
    def _bounds(self) -> dict[str, Any]:
        """The bounds of each bounded parameter alone (the members after the first of its `allOf`)."""
        return {key: _Validator({"allOf": schema["allOf"][1:]}) for key, schema in self.schema["properties"].items()
                if "allOf" in schema}

    def first_violation(self, body: dict[str, Any]) -> Violation | None:
        """OpenAI's 400 for the first part of `body`, in body order, that breaks the schema, or
        None when none does. Each top-level value is checked only until its first violation,
        its bounds first (a count is checked before the members it counts are walked)."""
        for key, value in body.items():
            if key not in self._validators:
                return unknown(key, key, self._validators)
            for validator in (self._bounds.get(key), self._validators[key]):
                if validator is not None and (error := next(validator.iter_errors(value), None)) is not None:
                    error.path.appendleft(key)
                    return _openai_error(error, self.schema.get("$defs", {}))
        return None


def _openai_error(error: ValidationError, definitions: Schema) -> Violation:
    """The error OpenAI answers for one violation; of a union no member of which holds, the
    violation of the member the body came closest to."""
    param, value, rule, wanted = _param(error.absolute_path), error.instance, error.validator, error.validator_value
    if rule == "anyOf":
        return _union_error(error, param, definitions)
    if rule == "type":
        return invalid_type(param, " or ".join(_TYPE_NAMES[t] for t in _listed(wanted)), value)
    if rule in ("enum", "const") and isinstance(value, list | dict):
        return invalid_type(param, json_type(_listed(wanted)[0]), value)
    if rule in ("enum", "const"):
        if param.startswith("input[") and param.endswith(".role"):  # reported at the item, roles so (§4.2)
            return invalid_value(param, value, _ROLES_AS_OPENAI_LISTS_THEM, reported_at=param.rsplit(".", 1)[0])
        return invalid_value(param, value, _listed(wanted))
    if rule == "required":
        key = next(key for key in wanted if key not in value)
        return missing(f"{param}.{key}" if param else key)
    if rule == "additionalProperties":
        declared = error.schema.get("properties", {})
        key = next(key for key in value if key not in declared)
        return unknown(f"{param}.{key}" if param else key, key, declared)
    if rule in ("minimum", "maximum"):
        return _out_of_range(param, value, rule, wanted, error.schema.get(_KIND, "decimal"))
    if rule in ("maxProperties", "maxLength", "maxItems"):
        return _too_large(param, value, rule, wanted)
    if rule in ("minLength", "minItems"):
        return _too_small(param, value, rule, wanted)
    if rule == "pattern":
        return Violation(f"Invalid '{param}': string does not match pattern. Expected a string that matches the "
                              f"pattern '{wanted}'.", param=param, code="invalid_value")
    return Violation(f"Invalid value for '{param}': {error.message}.", param=param or None, code="invalid_value")


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _union_error(error: ValidationError, param: str, definitions: Schema) -> Violation:
    """Of a union: the error of the member the body meant, the one that takes the value's type,
    whose fixed fields (a chat message's `role`) the body matches most, and that has the fewest
    errors; when no member takes its type, `expected one of ...`."""
    members: dict[Any, list[ValidationError]] = {}
    for member_error in error.context:
        members.setdefault(member_error.relative_schema_path[0], []).append(member_error)
    depth = len(error.absolute_path)
    mismatched = {index for index, errors in members.items()
                  if any(e.validator == "type" and len(e.absolute_path) == depth for e in errors)}

    def matched(index: int) -> int:
        """How many of the member's fixed fields the body has as the member fixes them."""
        member = _resolve(error.validator_value[index], definitions)
        value = error.instance if isinstance(error.instance, dict) else {}
        return sum(1 for key, node in member.get("properties", {}).items()
                   if key in value and value[key] in [*node.get("enum", []), *([node["const"]] if "const" in node
                                                                              else [])])

    if taking := [index for index in members if index not in mismatched]:
        closest = min(taking, key=lambda index: (-matched(index), len(members[index]),
                                                 -max(len(e.absolute_path) for e in members[index])))
        return _openai_error(members[closest][0], definitions)
    kinds = [_TYPE_NAMES[t] if t != "array" else _NAMED_ARRAYS.get(param, "an array")
             for e in error.context if e.validator == "type" for t in _listed(e.validator_value)]
    names = list(dict.fromkeys(k for k in kinds if k != "null"))
    expected = names[0] if len(names) == 1 else "one of " + ", ".join(names[:-1]) + " or " + names[-1]
    return invalid_type(param, expected, error.instance)


def _out_of_range(param: str, value: Any, rule: str, bound: float, kind: str) -> Violation:
    side, relation = ("below", ">=") if rule == "minimum" else ("above", "<=")
    shown = bound if isinstance(bound, int) else f"{bound:g}"
    return Violation(f"Invalid '{param}': {kind} {side} {rule} value. Expected a value {relation} {shown}, "
                          f"but got {value} instead.", param=param, code=f"{kind}_{side}_{rule[:3]}_value")


def _too_small(param: str, value: Any, rule: str, bound: int) -> Violation:
    noun = "array" if rule == "minItems" else "string"
    wanted = f"Expected {'an' if noun == 'array' else 'a'} {noun} with minimum length {bound}"
    if not value:
        return Violation(f"Invalid '{param}': empty {noun}. {wanted}, but got an empty {noun} instead.",
                              param=param, code=f"empty_{noun}")
    return Violation(f"Invalid '{param}': {noun} too short. {wanted}, but got {'an' if noun == 'array' else 'a'} "
                          f"{noun} with length {len(value)} instead.", param=param, code=f"{noun}_below_min_length")


def _too_large(param: str, value: Any, rule: str, bound: int) -> Violation:
    size = len(value)
    if rule == "maxProperties":
        return Violation(f"Invalid '{param}': too many properties. Expected an object with at most {bound} "
                              f"properties, but got an object with {size} properties instead.", param=param,
                              code="object_above_max_properties")
    noun = "array" if rule == "maxItems" else "string"
    return Violation(f"Invalid '{param}': {noun} too long. Expected {'an' if noun == 'array' else 'a'} {noun} "
                          f"with maximum length {bound}, but got {'an' if noun == 'array' else 'a'} {noun} with "
                          f"length {size} instead.", param=param, code=f"{noun}_above_max_length")


# Building the schemas

def _resolve(node: Schema, definitions: Schema) -> Schema:
    while "$ref" in node:
        node = definitions[node["$ref"].rsplit("/", 1)[1]]
    return node


def _type_values(member: Schema) -> list[str] | None:
    """The `type` values an object member of a union declares, or None if it declares none."""
    declared = member.get("properties", {}).get("type", {})
    values = [value for node in [declared, *declared.get("anyOf", [])]
              for value in ([node["const"]] if "const" in node else node.get("enum", []))]
    return values or None


def _dispatch(members: list[Schema], definitions: Schema) -> Schema | None:
    """Object members of a union told apart by `type`: the member a body names is the one it is
    checked against; a member whose `type` may be left out is the one a body without it meets.
    None when the members do not all declare their `type`."""
    by_type: dict[str, list[Schema]] = {}
    for member in members:
        resolved = _resolve(member, definitions)
        if (values := _type_values(resolved)) is None:
            return None
        keys = [*values, *([_IMPLICIT] if "type" not in resolved.get("required", []) else [])]
        for key in keys:
            by_type.setdefault(key, []).append(member)
    cases = {key: group[0] if len(group) == 1 else {"anyOf": group} for key, group in by_type.items()}
    types = [key for key in cases if key != _IMPLICIT]
    return {"type": "object", "properties": {"type": {"enum": types}},
            **({} if _IMPLICIT in cases else {"required": ["type"]}), _DISPATCH: cases}


def _by_type(validator: Any, cases: dict[str, Schema], instance: Any, schema: Schema) -> Iterator[ValidationError]:
    """The `x-dispatch-by-type` keyword: check an object against the member its `type` names
    (one lookup, where `if`/`then` per member would try them all)."""
    if not isinstance(instance, dict) or not isinstance(key := instance.get("type", _IMPLICIT), str):
        return  # the `type` property's own `enum` says what is wrong with it
    if (case := cases.get(key)) is not None:
        yield from validator.descend(instance, case)


_Validator = validators.extend(Draft202012Validator, {_DISPATCH: _by_type})


def _tighten(node: Any, definitions: Schema) -> Any:
    """The schema with closed objects and `type`-dispatched unions, in depth."""
    if isinstance(node, list):
        return [_tighten(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _tighten(value, definitions) if key not in ("const", "enum", "default", _DISPATCH) else value
            for key, value in node.items()}
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if "anyOf" in node:
        objects = [m for m in node["anyOf"] if "properties" in _resolve(m, definitions)]
        if len(objects) > 1 and (dispatch := _dispatch(objects, definitions)) is not None:
            others = [m for m in node["anyOf"] if m not in objects]
            node["anyOf"] = [*others, dispatch] if others else [dispatch]
            if len(node["anyOf"]) == 1:
                node |= node.pop("anyOf")[0]
    return node


def _alternatives(node: Schema, definitions: Schema) -> Iterator[Schema]:
    """The schemas a node stands for: `$ref` resolved, the declared part of a bounded `allOf`,
    each member of an `anyOf` (a union told apart by `type` is one schema)."""
    node = _resolve(node, definitions)
    if "allOf" in node:
        yield from _alternatives(node["allOf"][0], definitions)
    elif "anyOf" in node and _DISPATCH not in node:
        for member in node["anyOf"]:
            yield from _alternatives(member, definitions)
    else:
        yield node


def _places(holder: Schema, key: str, parts: list[str], definitions: Schema) -> Iterator[tuple[Schema, str]]:
    """Where the value a bound's path (`openai_bounds.segments`) names below `holder[key]` is
    declared: each (holder, key) of its schema."""
    if not parts:
        yield holder, key
        return
    for node in _alternatives(holder[key], definitions):
        yield from _within(node, parts, definitions)


def _within(node: Schema, parts: list[str], definitions: Schema) -> Iterator[tuple[Schema, str]]:
    part, rest = parts[0], parts[1:]
    if part == "[]" and isinstance(node.get("items"), dict):
        yield from _places(node, "items", rest, definitions)
    elif part.startswith("{"):
        kind = part[1:-1]
        if kind in node.get(_DISPATCH, {}):
            yield from _places(node[_DISPATCH], kind, rest, definitions)
        elif rest and kind in (_type_values(node) or []):  # a lone member, not a dispatching union
            yield from _within(node, rest, definitions)
    elif part == "*" and isinstance(node.get("additionalProperties"), dict):
        yield from _places(node, "additionalProperties", rest, definitions)
    elif part == "<key>" and not rest and isinstance(node.get("additionalProperties"), dict):
        yield node, "propertyNames"
    elif part in node.get("properties", {}):
        yield from _places(node["properties"], part, rest, definitions)


def _bounded(schema: Schema, bounds: dict[str, Schema], *, required: frozenset[str] = frozenset()) -> list[str]:
    """Each bound added to the schema where its path leads (`allOf` with what the SDK declares),
    a number's marked with its kind (OpenAI words an integer's bound and a decimal's apart); the
    paths of `required` that lead nowhere."""
    definitions, unapplied, done = schema.get("$defs", {}), [], set()
    root = {"": schema}
    for path, bound in bounds.items():
        places = list(_places(root, "", openai_bounds.segments(path), definitions))
        if not places and path in required:
            unapplied.append(path)
        for holder, key in places:
            if (id(holder), key, repr(bound)) in done:  # a definition reached by another path too
                continue
            done.add((id(holder), key, repr(bound)))
            if key == "propertyNames" and key not in holder:
                holder[key] = dict(bound)
                continue
            kinds = {kind for node in _alternatives(holder[key], definitions)
                     for kind in _listed(node.get("type", []))}
            holder[key] = {"allOf": [holder[key], bound | {_KIND: "integer" if "integer" in kinds else "decimal"}]}
    return unapplied


def _as_openai_requires(definition: Schema) -> Schema:
    """`definition` with the keys OpenAI requires, and allows, where they differ from the SDK's."""
    if "properties" in definition:
        definition["properties"] |= _ALSO_ALLOWED.get(frozenset(definition["properties"]), {})
    for value in _type_values(definition) or []:
        required = set(definition.get("required", [])) | _ALSO_REQUIRED.get(value, set())
        definition["required"] = sorted(required - _NOT_REQUIRED.get(value, set()))
    return definition


SDK_BODIES: dict[str, str] = {
    "responses": "openai.types.responses.response_create_params:ResponseCreateParamsBase",
    "responses.compact": "openai.types.responses.response_compact_params:ResponseCompactParams",
    "responses.input_tokens": "openai.types.responses.input_token_count_params:InputTokenCountParams",
    "chat": "openai.types.chat.completion_create_params:CompletionCreateParamsBase",
    "conversations.create": "openai.types.conversations.conversation_create_params:ConversationCreateParams",
    "conversations.update": "openai.types.conversations.conversation_update_params:ConversationUpdateParams",
    "conversations.add_items": "openai.types.conversations.item_create_params:ItemCreateParams",
    "vector_stores.create": "openai.types.vector_store_create_params:VectorStoreCreateParams",
    "vector_stores.update": "openai.types.vector_store_update_params:VectorStoreUpdateParams",
    "vector_stores.search": "openai.types.vector_store_search_params:VectorStoreSearchParams",
    "vector_stores.files.create": "openai.types.vector_stores.file_create_params:FileCreateParams",
    "vector_stores.files.update": "openai.types.vector_stores.file_update_params:FileUpdateParams",
    "vector_stores.file_batches.create": "openai.types.vector_stores.file_batch_create_params:FileBatchCreateParams",
}
"""Each body (a name of `openai_bounds.BODIES`) and the SDK type of its parameters."""
SDK_LITERALS: dict[str, str] = {
    "ResponseIncludable": "openai.types.responses:ResponseIncludable",
    "FilePurpose": "openai.types:FilePurpose",
}
"""The SDK's value sets the gateway checks a query or form field against, by type name."""


def _sdk_type(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


def derive_sdk_descriptions() -> dict[str, dict[str, Any]]:
    """From the installed SDK: each body's JSON Schema as pydantic derives it (`bodies`), and
    the values of each literal type (`literals`)."""
    from pydantic import TypeAdapter

    return {"bodies": {body: TypeAdapter(_sdk_type(path)).json_schema() for body, path in SDK_BODIES.items()},
            "literals": {name: list(get_args(_sdk_type(path))) for name, path in SDK_LITERALS.items()}}


def sdk_descriptions_file() -> Path:
    """Where the installed SDK's descriptions, as this module derives them, are kept."""
    return sdk_cache_file("sdk-requests", __file__)


def _complete(value: Any) -> bool:
    bodies, literals = (value.get("bodies"), value.get("literals")) if isinstance(value, dict) else (None, None)
    return isinstance(bodies, dict) and all(isinstance(bodies.get(body), dict) for body in SDK_BODIES) and \
        isinstance(literals, dict) and all(isinstance(literals.get(name), list) and
                                           all(isinstance(each, str) for each in literals[name])
                                           for name in SDK_LITERALS)


@cache
def sdk_descriptions() -> dict[str, dict[str, Any]]:
    """`derive_sdk_descriptions()`, read from its cache file when that holds it, else derived
    and saved there. Callers copy what they change."""
    return load_or_build(sdk_descriptions_file(), derive_sdk_descriptions, _complete)


def sdk_literal(name: str) -> tuple[str, ...]:
    """The values of the SDK's literal type `name` (a key of `SDK_LITERALS`)."""
    return tuple(sdk_descriptions()["literals"][name])


def _build(body: str, extra: dict[str, Schema] | None = None, path_parameters: tuple[str, ...] = ()
           ) -> RequestSchema:
    """The description of one body (a name of `SDK_BODIES`) from the SDK's type of its
    parameters (`path_parameters` are the URL's, not the body's)."""
    raw = copy.deepcopy(sdk_descriptions()["bodies"][body])
    definitions = {name: _as_openai_requires(d) for name, d in raw.pop("$defs", {}).items()}
    tightened_definitions = {name: _tighten(d, definitions) for name, d in definitions.items()}
    schema = _tighten(raw, definitions)
    schema["properties"] |= extra or {}
    for name in path_parameters:
        del schema["properties"][name]
    required = tuple(key for key in schema.pop("required", []) if key not in path_parameters)
    schema["$defs"] = tightened_definitions
    unapplied = _bounded(schema, bounds_of(body), required=frozenset(openai_bounds.bounds(body)))
    return RequestSchema(schema, required, tuple(unapplied))


_STREAM = {"stream": {"type": ["boolean", "null"]}}


@cache
def responses_schema() -> RequestSchema:
    """`POST /v1/responses`."""
    return _build("responses", _STREAM)


@cache
def compact_schema() -> RequestSchema:
    """`POST /v1/responses/compact`."""
    return _build("responses.compact")


@cache
def input_tokens_schema() -> RequestSchema:
    """`POST /v1/responses/input_tokens`."""
    return _build("responses.input_tokens")


@cache
def chat_schema() -> RequestSchema:
    """`POST /v1/chat/completions`."""
    return _build("chat", _STREAM)


@cache
def conversation_schemas() -> dict[str, RequestSchema]:
    """The Conversations API's bodies: `create`, `update`, `add_items`."""
    return {name: _build(f"conversations.{name}") for name in ("create", "update", "add_items")}


@cache
def vector_store_schemas() -> dict[str, RequestSchema]:
    """The Vector Stores API's bodies, by name in `openai_bounds.BODIES` (`vector_stores.create`,
    `vector_stores.files.create`, `vector_stores.search`, ...)."""
    return {body: _build(body, path_parameters=("vector_store_id",) if body == "vector_stores.files.update" else ())
            for body in SDK_BODIES if body.startswith("vector_stores.")}
