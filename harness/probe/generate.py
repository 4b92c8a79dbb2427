"""Probes generated from OpenAI's request description: each is a valid base request with one
defect, named by a stable id (`responses.temperature.out_of_range.high`), the field it targets
and the kind of defect.

The description is `reference_impl.request_schema` (the one the reference gateway validates
with). It is walked per field, top-level and nested (each `type` of a tool, of an input item,
of `text.format`; objects such as `reasoning` and `metadata`; array items), to a bounded depth:
a nested defect sits in an otherwise valid object (the smallest instance the description
accepts). Conflicting parameters and bad ids on every id path are listed by hand, as the
description does not state them. Generation is deterministic; `select` picks a seeded subset.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from jsonschema import Draft202012Validator

from ...reference_impl.request_schema import RequestSchema, conversation_schemas, responses_schema

Schema = dict[str, Any]
Place = Callable[[Any], dict[str, Any]]
"""The base body with a value put at one field."""

DEFECTS = ("missing_required", "wrong_type", "null", "out_of_range", "unknown_enum", "unknown_field", "empty",
           "oversized", "conflict", "bad_id")
MAX_DEPTH = 4
"""How deep nested objects are walked (`input[message].content[input_text].text` is 3)."""
UNKNOWN_VALUE = "parity_probe_unknown"
UNKNOWN_KEY = "parity_probe_unknown_field"
LOOPBACK_URL = "http://127.0.0.1:9/parity-probe"
"""What a URL field holds in a valid instance: a gateway that connects to it stays on the
machine (the discard port, where nothing listens)."""
_WRONG_VALUES: tuple[tuple[str, Any], ...] = (("string", "parity"), ("integer", 12345), ("boolean", True),
                                             ("array", ["parity"]), ("object", {"parity": 1}))
_NOTHING = object()


@dataclass(frozen=True)
class Probe:
    """One request with one defect."""

    id: str
    surface: str
    """`responses`, `conversations`, or the API an id path belongs to."""
    method: str
    endpoint: str
    """The API the request goes to: `responses`, `conversations`, `files`, `vector_stores`."""
    suffix: str
    """What follows the endpoint's path (`/resp_x/cancel`), or ''."""
    field: str
    """The field the defect is at, as OpenAI names it in `param` (`tools[0].name`), or the
    path template (`GET /v1/responses/{id}`)."""
    defect: str
    body: dict[str, Any] | None = None

    @property
    def group(self) -> str:
        """The field family the report groups by: `responses.tools[i].*`, `responses.temperature`,
        an id path (`GET /v1/responses/{id}`)."""
        if " /" in self.field:
            return self.field
        head, _, rest = self.field.partition(".")
        name, bracket, _ = head.partition("[")
        return f"{self.surface}.{name}" + ("[i]" if bracket else "") + (".*" if rest else "")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "surface": self.surface, "method": self.method, "endpoint": self.endpoint,
                "suffix": self.suffix, "field": self.field, "defect": self.defect, "body": self.body}


@dataclass(frozen=True)
class Surface:
    """A request body the description covers: its API (where it goes), the smallest valid body,
    and the keys a body must have (the description leaves those to the caller)."""

    name: str
    schema: RequestSchema
    base: Callable[[str, str], dict[str, Any]]
    """(model, input text) -> the smallest valid body."""
    required: tuple[str, ...] = ()


def surfaces() -> tuple[Surface, ...]:
    """The bodies probed. Chat Completions is not: the reference gateway passes a chat request
    through to its model unchecked unless it runs MCP servers, so it is no spec for one."""
    return (Surface("responses", responses_schema(), lambda model, text: {"model": model, "input": text},
                    ("model", "input")),
            Surface("conversations", conversation_schemas()["create"], lambda model, text: {}))


@dataclass(frozen=True)
class _Site:
    """Where a value sits: the parts of the probe ids made there, the field as `param` names
    it, and the base body with a value put there."""

    name: tuple[str, ...]
    param: str
    place: Place

    def field(self, key: str, place: Place | None = None) -> _Site:
        """The site of the field `key` of the object here; a value goes there by `place`, a
        probe that changes the whole object (a key left out or added) by this site's."""
        return _Site((*self.name, key), f"{self.param}.{key}" if self.param else key, place or self.place)

    def item(self) -> _Site:
        """The site of an array's first item (the array holding only it)."""
        return _Site((*self.name[:-1], f"{self.name[-1]}[i]"), f"{self.param}[0]", lambda value: self.place([value]))

    def member(self, key: str) -> _Site:
        """The same site, named for the member of a union its `type` picks."""
        return _Site((*self.name[:-1], f"{self.name[-1]}[{key or 'untyped'}]"), self.param, self.place)


def _literals(variant: Schema) -> list[Any]:
    """The values an `enum` or `const` allows."""
    return [*variant.get("enum", []), *([variant["const"]] if "const" in variant else [])]


def _json_type(value: Any) -> str:
    return next(kind for kind in ("null", "boolean", "integer", "number", "string", "array", "object")
                if Draft202012Validator.TYPE_CHECKER.is_type(value, kind))


@dataclass
class _Walk:
    """Probes of one surface, collected by id."""

    surface: Surface
    definitions: Schema
    probes: dict[str, Probe] = field(default_factory=dict)

    def add(self, site: _Site, defect: str, body: dict[str, Any], kind: str = "") -> None:
        probe_id = ".".join((self.surface.name, *site.name, defect, *([kind] if kind else [])))
        self.probes.setdefault(probe_id, Probe(probe_id, self.surface.name, "POST", self.surface.name, "",
                                               site.param, defect, body))

    def resolve(self, node: Schema) -> Schema:
        while "$ref" in node:
            node = self.definitions[node["$ref"].rsplit("/", 1)[1]]
        return node

    # What a node accepts

    def variants(self, node: Schema) -> Iterator[Schema]:
        """The node's alternatives, `$ref`, `anyOf` and `allOf` resolved (bounds are folded
        into each alternative)."""
        node = self.resolve(node)
        if "allOf" in node:
            declared, *bounds = node["allOf"]
            extra = {k: v for bound in bounds for k, v in bound.items()}
            for variant in self.variants(declared):
                yield variant | extra
            return
        if "anyOf" in node and "x-dispatch-by-type" not in node:
            for member in node["anyOf"]:
                yield from self.variants(member)
            return
        yield node

    def types(self, node: Schema) -> set[str]:
        """The JSON types the node accepts."""
        kinds: set[str] = set()
        for variant in self.variants(node):
            declared = variant.get("type")
            kinds |= set(declared) if isinstance(declared, list) else {declared} if declared else set()
            kinds |= {_json_type(value) for value in _literals(variant)}
            if "properties" in variant or "x-dispatch-by-type" in variant:
                kinds.add("object")
        if "number" in kinds:
            kinds.add("integer")
        return kinds

    def sample(self, node: Schema, name: str = "") -> Any:
        """The smallest value the node accepts, or `_NOTHING`."""
        for variant in self.variants(node):
            value = self._sample_variant(variant, name)
            if value is not _NOTHING and value is not None:
                return value
        return _NOTHING

    def _sample_variant(self, variant: Schema, name: str) -> Any:
        if literals := _literals(variant):
            return literals[0]
        if "x-dispatch-by-type" in variant:
            cases = variant["x-dispatch-by-type"]
            key = next(iter(cases))
            instance = self.sample(cases[key])
            return {"type": key} | instance if key and isinstance(instance, dict) else instance
        declared = variant.get("type")
        kind = declared[0] if isinstance(declared, list) else declared
        if "properties" in variant or kind == "object":
            return self._sample_object(variant)
        if kind == "array":
            item = self.sample(variant.get("items", {}))
            return [item] * variant.get("minItems", 0) if item is not _NOTHING else _NOTHING
        if kind == "string":
            return LOOPBACK_URL if "url" in name else "parity"
        if kind in ("integer", "number"):
            return max(1, variant.get("minimum", 1))
        if kind == "boolean":
            return False
        return _NOTHING

    def _sample_object(self, member: Schema) -> Any:
        instance: dict[str, Any] = {}
        for key in member.get("required", []):
            value = self.sample(member["properties"].get(key, {}), key)
            if value is _NOTHING:
                return _NOTHING
            instance[key] = value
        return instance

    # The walk

    def value_defects(self, node: Schema, site: _Site, depth: int) -> None:
        """The defects of the value at `site`, and those nested in it."""
        kinds = self.types(node)
        if not kinds:
            return
        wrong = next(((kind, value) for kind, value in _WRONG_VALUES if kind not in kinds), None)
        if wrong is not None:
            self.add(site, "wrong_type", site.place(wrong[1]))
        if "null" not in kinds:
            self.add(site, "null", site.place(None))
        variants = list(self.variants(node))
        if any(isinstance(value, str) for variant in variants for value in _literals(variant)):
            self.add(site, "unknown_enum", site.place(UNKNOWN_VALUE))
        for variant in variants:
            if "minimum" in variant:
                self.add(site, "out_of_range", site.place(variant["minimum"] - 1), "low")
            if "maximum" in variant:
                self.add(site, "out_of_range", site.place(variant["maximum"] + 1), "high")
            self.oversized(variant, site)
        for kind, empty in (("string", ""), ("array", []), ("object", {})):
            if kind in kinds and not (kind == "string" and any(_literals(variant) for variant in variants)):
                self.add(site, "empty", site.place(empty), kind)
        if depth < MAX_DEPTH:
            for variant in variants:
                self.nested(variant, site, depth)

    def oversized(self, variant: Schema, site: _Site) -> None:
        """Values above the variant's bounds on size."""
        place = site.place
        if "maxLength" in variant:
            self.add(site, "oversized", place("x" * (variant["maxLength"] + 1)), "length")
        if "maxItems" in variant and (item := self.sample(variant.get("items", {}))) is not _NOTHING:
            self.add(site, "oversized", place([item] * (variant["maxItems"] + 1)), "items")
        if "maxProperties" in variant:
            self.add(site, "oversized", place({f"k{i}": "v" for i in range(variant["maxProperties"] + 1)}),
                     "properties")
        if (key_bound := variant.get("propertyNames", {}).get("maxLength")) is not None:
            self.add(site, "oversized", place({"k" * (key_bound + 1): "v"}), "key")
        values = variant.get("additionalProperties")
        if isinstance(values, dict) and "maxLength" in values:
            self.add(site, "oversized", place({"k": "v" * (values["maxLength"] + 1)}), "value")

    def nested(self, variant: Schema, site: _Site, depth: int) -> None:
        """The defects inside an object (each member of a union by `type`) or an array's item."""
        if "x-dispatch-by-type" in variant:
            kind = site.field("type")
            self.add(kind, "unknown_enum", site.place({"type": UNKNOWN_VALUE}))
            if "type" in variant.get("required", []):
                self.add(kind, "missing_required", site.place({}))
            for key, case in variant["x-dispatch-by-type"].items():
                member = next(self.variants(case["anyOf"][0] if "anyOf" in case else case))
                instance = self.sample(member)
                if isinstance(instance, dict):
                    self.object_defects(member, {"type": key} | instance if key else instance, site.member(key),
                                        depth + 1)
        elif "properties" in variant:
            instance = self.sample(variant)
            if isinstance(instance, dict):
                self.object_defects(variant, instance, site, depth + 1)
        elif variant.get("type") == "array" and "items" in variant:
            self.value_defects(variant["items"], site.item(), depth)

    def object_defects(self, member: Schema, instance: dict[str, Any], site: _Site, depth: int) -> None:
        """The defects of each field of a valid `instance` of `member`, one at a time."""
        for key in member.get("required", []):
            if key != "type":
                self.add(site.field(key), "missing_required",
                         site.place({k: v for k, v in instance.items() if k != key}))
        self.add(site.field(UNKNOWN_KEY), "unknown_field", site.place(instance | {UNKNOWN_KEY: "x"}))
        for key, child in member.get("properties", {}).items():
            if key == "type" and "type" in instance:
                continue  # the dispatching level probes `type` once

            def put(value: Any, key: str = key) -> dict[str, Any]:
                return site.place(instance | {key: value})

            self.value_defects(child, site.field(key, put), depth)


def body_probes(surface: Surface, model: str, text: str) -> list[Probe]:
    """Every generated probe of one surface's body, in walk order."""
    schema = surface.schema.schema
    walk = _Walk(surface, schema.get("$defs", {}))
    base = surface.base(model, text)
    top = _Site((), "", lambda value: base)
    for key in surface.required:
        walk.add(top.field(key), "missing_required", {k: v for k, v in base.items() if k != key})
    walk.add(top.field(UNKNOWN_KEY), "unknown_field", base | {UNKNOWN_KEY: "x"})
    for key, node in schema["properties"].items():
        def put(value: Any, key: str = key) -> dict[str, Any]:
            return base | {key: value}

        walk.value_defects(node, top.field(key, put), 0)
    return list(walk.probes.values())


def conflict_probes(model: str, text: str) -> list[Probe]:
    """Bodies each field of which is valid but whose fields do not go together. The contract
    notes (§4.2) record OpenAI's answer for `previous_response_id` with `conversation` only;
    `stream` with `background` is no conflict (OpenAI streams background responses, recorded)."""
    base = {"model": model, "input": text}
    function = {"type": "function", "name": "parity_tool", "parameters": {"type": "object", "properties": {}}}
    mcp = {"type": "mcp", "server_label": "parity", "server_url": LOOPBACK_URL, "require_approval": "never"}
    cases = [
        ("previous_response_id+conversation", "previous_response_id",
         {"previous_response_id": "resp_parityprobe0000", "conversation": "conv_parityprobe0000"}),
        ("background+store_false", "background", {"background": True, "store": False}),
        ("tool_choice_without_tool", "tool_choice", {"tool_choice": {"type": "function", "name": "parity_tool"}}),
        ("tool_choice_required_without_tools", "tool_choice", {"tool_choice": "required"}),
        ("duplicate_function_names", "tools", {"tools": [function, function]}),
        ("duplicate_mcp_server_labels", "tools", {"tools": [mcp, mcp]}),
        ("text_format_json_schema_without_schema", "text.format",
         {"text": {"format": {"type": "json_schema", "name": "parity", "schema": {}}}}),
    ]
    return [Probe(f"responses.conflict.{name}", "responses", "POST", "responses", "", param, "conflict", base | extra)
            for name, param, extra in cases]


_ID_PATHS: tuple[tuple[str, str, str], ...] = (
    ("GET", "responses", "/{id}"), ("DELETE", "responses", "/{id}"), ("GET", "responses", "/{id}/input_items"),
    ("POST", "responses", "/{id}/cancel"),
    ("GET", "conversations", "/{id}"), ("POST", "conversations", "/{id}"), ("DELETE", "conversations", "/{id}"),
    ("GET", "conversations", "/{id}/items"), ("GET", "conversations", "/{id}/items/{item}"),
    ("DELETE", "conversations", "/{id}/items/{item}"),
    ("GET", "files", "/{id}"), ("DELETE", "files", "/{id}"), ("GET", "files", "/{id}/content"),
    ("GET", "vector_stores", "/{id}"), ("DELETE", "vector_stores", "/{id}"), ("GET", "vector_stores", "/{id}/files"),
)
_PREFIXES = {"responses": "resp", "conversations": "conv", "files": "file", "vector_stores": "vs"}
_BAD_IDS = (("unknown", "{prefix}_0000000000000000000000000000000000000000parity"),
            ("wrong_prefix", "msg_0000000000000000000000000000000000000000parity"),
            ("malformed", "not an id!"), ("oversized", "{prefix}_" + "0" * 2000))


def id_probes(model: str, text: str) -> list[Probe]:
    """Bad ids on every id path, and in the body fields that name a stored object."""
    probes = []
    for method, endpoint, template in _ID_PATHS:
        route = f"{method} /v1/{endpoint}{template}"
        for kind, pattern in _BAD_IDS:
            bad = pattern.format(prefix=_PREFIXES[endpoint])
            suffix = template.replace("{id}", quote(bad, safe="")).replace("{item}", "msg_parityprobe0000")
            body = {"metadata": {"parity": "probe"}} if method == "POST" and endpoint == "conversations" else None
            probe_id = f"{endpoint}.{method.lower()}.{template.strip('/').replace('/', '.')}.bad_id.{kind}"
            probes.append(Probe(probe_id, endpoint, method, endpoint, suffix, route, "bad_id", body))
    base = {"model": model, "input": text}
    for field_name, prefix in (("previous_response_id", "resp"), ("conversation", "conv")):
        for kind, pattern in _BAD_IDS:
            probes.append(Probe(f"responses.{field_name}.bad_id.{kind}", "responses", "POST", "responses", "",
                                field_name, "bad_id", base | {field_name: pattern.format(prefix=prefix)}))
    return probes


@lru_cache(maxsize=4)
def all_probes(model: str, text: str) -> tuple[Probe, ...]:
    """Every probe, sorted by id; `model` and `text` (the input) make the base requests."""
    probes = [*(p for surface in surfaces() for p in body_probes(surface, model, text)),
              *conflict_probes(model, text), *id_probes(model, text)]
    return tuple(sorted(probes, key=lambda probe: probe.id))


def select(probes: tuple[Probe, ...], seed: int | None, count: int | None) -> list[Probe]:
    """`count` probes chosen by `seed` (the same ones every time for one seed and one set), in
    id order; all of them when `count` is None or not smaller."""
    if count is None or count >= len(probes):
        return list(probes)
    chosen = random.Random(seed).sample(range(len(probes)), count)
    return [probes[index] for index in sorted(chosen)]
