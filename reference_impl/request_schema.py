"""OpenAI's request bodies as one machine-readable description, and the 400 a body that breaks
it gets.

The description is JSON Schema built from the installed `openai` SDK's request TypedDicts
(generated from OpenAI's spec, so it follows OpenAI as the SDK updates), tightened as OpenAI
enforces it: an object takes no key it does not declare (`unknown_parameter`); a union of
objects is told apart by their `type` (so an error names the member the body meant, not the
closest of thirty); and the bounds the SDK does not carry (sampling ranges, metadata limits),
which OpenAI's API reference states, are added from `BOUNDS`. `jsonschema` checks a body
against it; `first_violation` turns the first violation, in body order, into OpenAI's error
(its code, its `param` path as `input[0].content`, its wording, per the contract notes §4.2).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from openai.types.chat import completion_create_params
from openai.types.conversations import conversation_create_params, conversation_update_params, item_create_params
from openai.types.responses import response_create_params
from pydantic import TypeAdapter
from starlette.requests import Request

from .errors import InvalidRequest
from .json_body import JsonBody, read_json

Schema = dict[str, Any]

_BOUND_PARAMETERS: dict[str, Schema] = {
    "temperature": {"minimum": 0, "maximum": 2},
    "top_p": {"minimum": 0, "maximum": 1},
    "top_logprobs": {"minimum": 0, "maximum": 20},
    "metadata": {"maxProperties": 16, "propertyNames": {"maxLength": 64}, "additionalProperties": {"maxLength": 512}},
}
BOUNDS: dict[str, dict[str, Schema]] = {
    "responses": _BOUND_PARAMETERS | {"max_output_tokens": {"minimum": 16}, "max_tool_calls": {"minimum": 1}},
    "conversations": {"metadata": _BOUND_PARAMETERS["metadata"], "items": {"maxItems": 20}},
    "chat": _BOUND_PARAMETERS | {"n": {"minimum": 1, "maximum": 128},
                                 "frequency_penalty": {"minimum": -2, "maximum": 2},
                                 "presence_penalty": {"minimum": -2, "maximum": 2}},
}
"""Top-level bounds per surface, from OpenAI's API reference (a conversation takes 20 items at a
time); they constrain a value of the right type only (a `null` where allowed still passes)."""

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
_NOT_REQUIRED = {"function": {"strict", "parameters"}}
"""Keys the SDK makes a body send (as nullable) that OpenAI lets it leave out: a function tool
without `strict` is echoed strict (recorded)."""
_ALSO_ALLOWED = {frozenset({"attributes", "file_id", "filename", "score", "text"}):
                 {"vector_store_id": {"type": ["string", "null"]}}}
"""Keys OpenAI's own output carries, and so accepts back as input, that the SDK's input types
lack, by the keys of the object that has them: a `file_search_call` result's `vector_store_id`
(recorded with `include: ["file_search_call.results"]`)."""
_NAMED_ARRAYS = {"input": "array of input items"}
"""How OpenAI names an array parameter in `expected one of ...` (contract notes §4.2)."""


def json_type(value: Any) -> str:
    """How OpenAI names a JSON value's type in its messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def missing(param: str) -> InvalidRequest:
    return InvalidRequest(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_type(param: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
                          param=param, code="invalid_type")


def invalid_value(param: str, value: Any, supported: Iterable[Any], *,
                  reported_at: str | None = None) -> InvalidRequest:
    quoted = [f"'{s}'" for s in supported]
    listing = " and ".join(quoted) if len(quoted) <= 2 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
    return InvalidRequest(f"Invalid value: '{value}'. Supported values are: {listing}.", param=reported_at or param,
                          code="invalid_value")


async def read_json_object(request: Request, max_members: Mapping[str, int] | None = None) -> JsonBody:
    """The body as a JSON object (an empty body is `{}`); a 400 naming `body` for any other value
    (`max_members`: see `read_json`)."""
    body = await read_json(request, max_members)
    if body.value is None:
        return JsonBody({}, body.size)
    if not isinstance(body.value, dict):
        raise invalid_type("body", "an object", body.value)
    return body


def unknown(param: str, key: str, known: Iterable[str]) -> InvalidRequest:
    message = f"Unknown parameter: '{param}'."
    if close := difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75):
        message += f" Did you mean '{close[0]}'?"
    return InvalidRequest(message, param=param, code="unknown_parameter")


def _param(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class RequestSchema:
    """The description of one surface's request body, and its check."""

    schema: Schema

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

    def first_violation(self, body: dict[str, Any]) -> InvalidRequest | None:
        """OpenAI's 400 for the first part of `body`, in body order, that breaks the schema, or
        None when none does. Each top-level value is checked only until its first violation,
        its bounds first (a count is checked before the members it counts are walked)."""
        for key, value in body.items():
            if key not in self._validators:
                return unknown(key, key, self._validators)
            for validator in (self._bounds.get(key), self._validators[key]):
                if validator is not None and (error := next(validator.iter_errors(value), None)) is not None:
                    error.path.appendleft(key)
                    return _openai_error(error)
        return None


def _openai_error(error: ValidationError) -> InvalidRequest:
    """The error OpenAI answers for one violation; of a union no member of which holds, the
    violation of the member the body came closest to."""
    param, value, rule, wanted = _param(error.absolute_path), error.instance, error.validator, error.validator_value
    if rule == "anyOf":
        return _union_error(error, param)
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
    return InvalidRequest(f"Invalid value for '{param}': {error.message}.", param=param or None, code="invalid_value")


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _union_error(error: ValidationError, param: str) -> InvalidRequest:
    """Of a union: the error of the member that takes the value's type and has the fewest
    errors (the member the body meant); when no member takes its type, `expected one of ...`."""
    members: dict[Any, list[ValidationError]] = {}
    for member_error in error.context:
        members.setdefault(member_error.relative_schema_path[0], []).append(member_error)
    depth = len(error.absolute_path)
    mismatched = {index for index, errors in members.items()
                  if any(e.validator == "type" and len(e.absolute_path) == depth for e in errors)}
    if taking := [errors for index, errors in members.items() if index not in mismatched]:
        closest = min(taking, key=lambda errors: (len(errors), -max(len(e.absolute_path) for e in errors)))
        return _openai_error(closest[0])
    kinds = [_TYPE_NAMES[t] if t != "array" else _NAMED_ARRAYS.get(param, "an array")
             for e in error.context if e.validator == "type" for t in _listed(e.validator_value)]
    names = list(dict.fromkeys(k for k in kinds if k != "null"))
    expected = names[0] if len(names) == 1 else "one of " + ", ".join(names[:-1]) + " or " + names[-1]
    return invalid_type(param, expected, error.instance)


def _out_of_range(param: str, value: Any, rule: str, bound: float, kind: str) -> InvalidRequest:
    side, relation = ("below", ">=") if rule == "minimum" else ("above", "<=")
    return InvalidRequest(f"Invalid '{param}': {kind} {side} {rule} value. Expected a value {relation} {bound:g}, "
                          f"but got {value} instead.", param=param, code=f"{kind}_{side}_{rule[:3]}_value")


def _too_large(param: str, value: Any, rule: str, bound: int) -> InvalidRequest:
    size = len(value)
    if rule == "maxProperties":
        return InvalidRequest(f"Invalid '{param}': too many properties. Expected an object with at most {bound} "
                              f"properties, but got an object with {size} properties instead.", param=param,
                              code="object_above_max_properties")
    noun = "array" if rule == "maxItems" else "string"
    return InvalidRequest(f"Invalid '{param}': {noun} too long. Expected {'an' if noun == 'array' else 'a'} {noun} "
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


def _bounded(schema: Schema, bounds: dict[str, Schema]) -> Schema:
    """`schema` with each bound added to its parameter, marked with the parameter's kind of
    number (OpenAI words an integer's bound and a decimal's apart)."""
    for name, bound in bounds.items():
        if (declared := schema["properties"].get(name)) is not None:
            integer = any(node.get("type") == "integer" for node in [declared, *declared.get("anyOf", [])])
            schema["properties"][name] = {"allOf": [declared, bound | {_KIND: "integer" if integer else "decimal"}]}
    return schema


def _as_openai_requires(definition: Schema) -> Schema:
    """`definition` with the keys OpenAI requires, and allows, where they differ from the SDK's."""
    if "properties" in definition:
        definition["properties"] |= _ALSO_ALLOWED.get(frozenset(definition["properties"]), {})
    for value in _type_values(definition) or []:
        required = set(definition.get("required", [])) | _ALSO_REQUIRED.get(value, set())
        definition["required"] = sorted(required - _NOT_REQUIRED.get(value, set()))
    return definition


def _build(typed_dict: Any, bounds: dict[str, Schema], extra: dict[str, Schema] | None = None) -> RequestSchema:
    raw = TypeAdapter(typed_dict).json_schema()
    definitions = raw.pop("$defs", {})
    tightened_definitions = {name: _as_openai_requires(_tighten(d, definitions)) for name, d in definitions.items()}
    schema = _tighten(raw, definitions)
    schema["properties"] |= extra or {}
    schema.pop("required", None)  # which keys a body must have, and in what order they are asked for, is the caller's
    return RequestSchema(_bounded(schema, bounds) | {"$defs": tightened_definitions})


_STREAM = {"stream": {"type": ["boolean", "null"]}}


@cache
def responses_schema() -> RequestSchema:
    """`POST /v1/responses`."""
    return _build(response_create_params.ResponseCreateParamsBase, BOUNDS["responses"], _STREAM)


@cache
def chat_schema() -> RequestSchema:
    """`POST /v1/chat/completions`."""
    return _build(completion_create_params.CompletionCreateParamsBase, BOUNDS["chat"], _STREAM)


@cache
def conversation_schemas() -> dict[str, RequestSchema]:
    """The Conversations API's bodies: `create`, `update`, `add_items`."""
    return {"create": _build(conversation_create_params.ConversationCreateParams, BOUNDS["conversations"]),
            "update": _build(conversation_update_params.ConversationUpdateParams, BOUNDS["conversations"]),
            "add_items": _build(item_create_params.ItemCreateParams, BOUNDS["conversations"])}
