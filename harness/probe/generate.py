"""Probes generated from OpenAI's request descriptions, over every endpoint family the reference
gateway serves (`surfaces.py`): each is a valid request with one defect, named by a stable id
(`responses.temperature.out_of_range.high`), the field it targets, the kind of defect, and
whether OpenAI's description refuses it (`refused`).

JSON bodies are described by `openai_contract.request_schema` (the one the reference gateway
validates with). Each is walked per field, top-level and nested (each `type` of a tool, of an
input item, of `text.format`; objects such as `reasoning` and `metadata`; array items; map
values), to a bounded depth: a nested defect sits in an otherwise valid object (the smallest
instance the description accepts). Query parameters are probed from the SDK's types of them;
bad ids go to every path that has one (each id in turn); uploads are probed part by part
(`forms.py`). Conflicting parameters are listed by hand, as the description does not state
them. Generation is deterministic; `select` picks a seeded subset.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from jsonschema import Draft202012Validator

from ..engine.targets import RawBody
from .forms import form_cases
from .surfaces import BodySurface, Route, body_surfaces, filled, routes, slots, surface_named

Schema = dict[str, Any]
Place = Callable[[Any], dict[str, Any]]
"""The base body with a value put at one field."""

DEFECTS = ("missing_required", "wrong_type", "null", "out_of_range", "unknown_enum", "unknown_field", "empty",
           "undersized", "oversized", "pattern", "malformed", "duplicate", "conflict", "bad_id")
MAX_DEPTH = 4
"""How deep nested objects are walked (`input[message].content[input_text].text` is 3)."""
UNKNOWN_VALUE = "parity_probe_unknown"
UNKNOWN_KEY = "parity_probe_unknown_field"
MAX_OVERSIZED = 2**20
"""The longest string a probe sends: OpenAI's larger bounds (10 MiB of a tool's output, 70 MB of
a file's data) are not probed, as each such probe would cost the run that much memory and
transfer; a gateway's own limit on a body's size is tested apart."""
PATTERN_MISS = "parity probe: not/this!"
"""A string no pattern of OpenAI's (identifiers, `tunnel_...`) matches."""
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
    """The endpoint family (`responses`, `responses.stored`, `vector_stores.search`, ...)."""
    method: str
    endpoint: str
    """The API the request goes to: `responses`, `chat`, `conversations`, `files`, `vector_stores`."""
    suffix: str
    """What follows the API's path (`/{response_id}/cancel`, `?limit=0`), or ''; placeholders
    in it name the objects `objects.py` creates."""
    field: str
    """The field the defect is at, as OpenAI names it in `param` (`tools[0].name`, `limit`), or
    the path template (`GET /v1/responses/{id}`)."""
    defect: str
    body: Any = None
    """A JSON body (placeholders as its strings), a `RawBody` (an upload), or None."""
    refuses: Callable[[Any], bool] = field(default=lambda body: False, compare=False, repr=False)
    """Whether OpenAI's description refuses a body (`refused` asks it of this one's)."""

    @cached_property
    def refused(self) -> bool:
        """Whether OpenAI's description of the request refuses it (its schema and documented
        bounds). A probe it does not refuse may still be refused for the state it names (an
        unknown id) or for a limit of the gateway. Asked when needed: checking every body
        against the description takes a while."""
        return self.refuses(self.body)

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
        body = self.body.described() if isinstance(self.body, RawBody) else self.body
        return {"id": self.id, "surface": self.surface, "method": self.method, "endpoint": self.endpoint,
                "suffix": self.suffix, "field": self.field, "defect": self.defect, "body": body,
                "refused": self.refused}


def _known(refused: bool) -> Callable[[Any], bool]:
    """What a probe whose refusal is known when it is made answers `refuses`."""
    return lambda body: refused


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

    surface: BodySurface
    definitions: Schema
    probes: dict[str, Probe] = field(default_factory=dict)

    def add(self, site: _Site, defect: str, body: dict[str, Any], kind: str = "") -> None:
        surface = self.surface
        probe_id = ".".join((surface.name, *site.name, defect, *([kind] if kind else [])))
        if probe_id not in self.probes:
            self.probes[probe_id] = Probe(probe_id, surface.family, "POST", surface.endpoint, surface.suffix,
                                          site.param, defect, body, surface.refuses)

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
            return instance | {"type": key} if key and isinstance(instance, dict) else instance
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
            self.undersized(variant, site)
        for kind, empty in (("string", ""), ("array", []), ("object", {})):
            if kind in kinds and not (kind == "string" and any(_literals(variant) for variant in variants)):
                self.add(site, "empty", site.place(empty), kind)
        if depth < MAX_DEPTH:
            for variant in variants:
                self.nested(variant, site, depth)

    def oversized(self, variant: Schema, site: _Site) -> None:
        """Values above the variant's bounds on size."""
        place = site.place
        if variant.get("maxLength", MAX_OVERSIZED) < MAX_OVERSIZED:
            self.add(site, "oversized", place("x" * (variant["maxLength"] + 1)), "length")
        if "maxItems" in variant and (item := self.sample(variant.get("items", {}))) is not _NOTHING:
            self.add(site, "oversized", place([item] * (variant["maxItems"] + 1)), "items")
        if "maxProperties" in variant:
            self.add(site, "oversized", place({f"k{i}": "v" for i in range(variant["maxProperties"] + 1)}),
                     "properties")
        if (key_bound := variant.get("propertyNames", {}).get("maxLength")) is not None:
            self.add(site, "oversized", place({"k" * (key_bound + 1): "v"}), "key")
        if isinstance(values := variant.get("additionalProperties"), dict):
            for bound in (value["maxLength"] for value in self.variants(values) if "maxLength" in value):
                self.add(site, "oversized", place({"k": "v" * (bound + 1)}), "value")

    def undersized(self, variant: Schema, site: _Site) -> None:
        """Values below the variant's bounds on size (an empty one is `empty`'s), and a string
        its pattern does not match."""
        if variant.get("minLength", 0) > 1:
            self.add(site, "undersized", site.place("x" * (variant["minLength"] - 1)), "length")
        if variant.get("minItems", 0) > 1 and (item := self.sample(variant.get("items", {}))) is not _NOTHING:
            self.add(site, "undersized", site.place([item] * (variant["minItems"] - 1)), "items")
        if "pattern" in variant and not re.search(variant["pattern"], PATTERN_MISS):
            self.add(site, "pattern", site.place(PATTERN_MISS))

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
                    self.object_defects(member, instance | {"type": key} if key else instance, site.member(key),
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


def body_probes(surface: BodySurface, model: str, text: str) -> list[Probe]:
    """Every generated probe of one body, in walk order."""
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

        walk.value_defects(node, top.field(key, put), MAX_DEPTH if key in surface.shallow else 0)
    return list(walk.probes.values())


def conflict_probes(model: str, text: str) -> list[Probe]:
    """Bodies each field of which is valid but whose fields do not go together, with whether
    OpenAI is known to refuse them: the contract notes (§4.2) record its answer for
    `previous_response_id` with `conversation`, which its description also rules out in words;
    the others are this gateway's reading. `stream` with `background` is no conflict (OpenAI
    streams background responses, recorded)."""
    base = {"model": model, "input": text}
    function = {"type": "function", "name": "parity_tool", "parameters": {"type": "object", "properties": {}}}
    mcp = {"type": "mcp", "server_label": "parity", "server_url": LOOPBACK_URL, "require_approval": "never"}
    cases = [
        ("previous_response_id+conversation", "previous_response_id",
         {"previous_response_id": "{response_id}", "conversation": "{conversation_id}"}, True),
        ("background+store_false", "background", {"background": True, "store": False}, False),
        ("tool_choice_without_tool", "tool_choice", {"tool_choice": {"type": "function", "name": "parity_tool"}},
         False),
        ("tool_choice_required_without_tools", "tool_choice", {"tool_choice": "required"}, False),
        ("duplicate_function_names", "tools", {"tools": [function, function]}, False),
        ("duplicate_mcp_server_labels", "tools", {"tools": [mcp, mcp]}, False),
        ("text_format_json_schema_without_schema", "text.format",
         {"text": {"format": {"type": "json_schema", "name": "parity", "schema": {}}}}, False),
    ]
    return [Probe(f"responses.conflict.{name}", "responses", "POST", "responses", "", param, "conflict", base | extra,
                  _known(refused)) for name, param, extra, refused in cases]


_PREFIXES = {"responses": "resp", "conversations": "conv", "files": "file", "vector_stores": "vs", "item": "msg",
             "file": "file", "batch": "vsfb"}
_BAD_IDS = (("unknown", "{prefix}_0000000000000000000000000000000000000000parity"),
            ("wrong_prefix", "msg_0000000000000000000000000000000000000000parity"),
            ("malformed", "not an id!"), ("oversized", "{prefix}_" + "0" * 2000))


def _route_body(route: Route, model: str, text: str) -> dict[str, Any] | None:
    return surface_named(route.body).base(model, text) if route.body else None


def id_probes(model: str, text: str) -> list[Probe]:
    """Bad ids on every path that has one (each of its ids in turn, the others naming real
    objects), and in the body fields that name a stored object."""
    probes = []
    for route in routes():
        for slot in slots(route):
            outer = slot == "id"
            prefix = _PREFIXES[route.endpoint if outer else slot]
            for kind, pattern in _BAD_IDS:
                bad = quote(pattern.format(prefix=prefix), safe="")
                name = ".".join(part for part in route.template.split("/") if part)
                probe_id = f"{route.endpoint}.{route.method.lower()}.{name}.bad_id." + (kind if outer else
                                                                                         f"{slot}.{kind}")
                probes.append(Probe(probe_id, route.family, route.method, route.endpoint,
                                    filled(route, {slot: bad}), route.route, "bad_id",
                                    _route_body(route, model, text)))
    base = {"model": model, "input": text}
    for field_name, prefix in (("previous_response_id", "resp"), ("conversation", "conv")):
        for kind, pattern in _BAD_IDS:
            probes.append(Probe(f"responses.{field_name}.bad_id.{kind}", "responses", "POST", "responses", "",
                                field_name, "bad_id", base | {field_name: pattern.format(prefix=prefix)}))
    return probes


_QUERY_VALUES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "integer": (("wrong_type", "", "parity"), ("wrong_type", "decimal", "1.5"), ("empty", "", ""),
                ("oversized", "digits", "9" * 5000)),
    "boolean": (("wrong_type", "", "parity"), ("empty", "", "")),
    "enum": (("unknown_enum", "", "parity_probe_unknown"), ("empty", "", "")),
    "array": (("unknown_enum", "", "parity_probe_unknown"), ("empty", "", "")),
    "string": (("oversized", "", "x" * 4000),),
}
"""The bad values of a query parameter by its kind: (defect, kind of it, value)."""


def query_probes() -> list[Probe]:
    """Bad values of each query parameter of each route (its ids naming real objects), an
    unknown parameter, and a list's `limit` just outside its range."""
    probes = []
    for route in routes():
        if not route.query:
            continue
        path = filled(route)
        name = ".".join(["", *(part for part in route.template.split("/") if part)]) if route.template else ""
        stem = f"{route.endpoint}.{route.method.lower()}{name}.query"
        cases = [(parameter, defect, kind, value) for parameter in route.query
                 for defect, kind, value in _QUERY_VALUES[parameter.kind]]
        cases += [(parameter, "out_of_range", side, str(bound + step)) for parameter in route.query
                  if parameter.range for side, bound, step in (("low", parameter.range[0], -1),
                                                               ("high", parameter.range[1], 1))]
        for parameter, defect, kind, value in cases:
            key = f"{parameter.name}[]" if parameter.kind == "array" else parameter.name
            probes.append(Probe(".".join((stem, parameter.name, defect, *([kind] if kind else []))), route.family,
                                route.method, route.endpoint, f"{path}?{urlencode({key: value})}", parameter.name,
                                defect, None, _known(parameter.refuses(value))))
        probes.append(Probe(f"{stem}.parity_probe_unknown.unknown_field", route.family, route.method, route.endpoint,
                            f"{path}?parity_probe_unknown=1", "parity_probe_unknown", "unknown_field", None))
    return probes


def form_probes() -> list[Probe]:
    """Uploads with one defect each (`forms.py`)."""
    return [Probe(f"files.create.{suffix}", "files", "POST", "files", "", field_name, defect, body,
                  _known(refused)) for suffix, field_name, defect, body, refused in form_cases()]


@lru_cache(maxsize=4)
def all_probes(model: str, text: str) -> tuple[Probe, ...]:
    """Every probe, sorted by id; `model` and `text` (the input) make the base requests."""
    probes = [*(p for surface in body_surfaces() for p in body_probes(surface, model, text)),
              *conflict_probes(model, text), *id_probes(model, text), *query_probes(), *form_probes()]
    return tuple(sorted(probes, key=lambda probe: probe.id))


def select(probes: tuple[Probe, ...], seed: int | None, count: int | None) -> list[Probe]:
    """`count` probes chosen by `seed` (the same ones every time for one seed and one set), in
    id order; all of them when `count` is None or not smaller."""
    if count is None or count >= len(probes):
        return list(probes)
    chosen = random.Random(seed).sample(range(len(probes)), count)
    return [probes[index] for index in sorted(chosen)]
