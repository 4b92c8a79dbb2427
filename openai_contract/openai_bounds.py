"""OpenAI's documented bounds on request bodies (`maxLength`, `minItems`, `minimum`, `pattern`,
...), as data the project ships: `openai_bounds.json`, extracted from OpenAI's OpenAPI
description, which the project does not ship. The request schema (`request_schema.py`) adds them
to the bodies the `openai` SDK describes, where the SDK's types carry no bounds.

Regenerate it from a newer description, which records its name, version, SHA-256 and the date:

    python -m responses_parity.openai_contract.openai_bounds path/to/openai-openapi.yaml

A bound sits at a path in the body: `.name` a property, `[]` an array's items, `{type}` the
member of a union whose `type` is that value, `.*` each value of a map, `.<key>` each key of a
map (`tools[]{function}.name`, `metadata.<key>`). Each body is walked from its operation's
request schema, `$ref`, `allOf`, `anyOf` and `oneOf` resolved, a component not entered again
inside itself (the recursive filters).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

Schema = dict[str, Any]

BOUNDS_FILE = Path(__file__).with_name("openai_bounds.json")
KEYWORDS = ("minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minimum", "maximum",
            "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minProperties", "maxProperties")
"""The JSON Schema keywords that bound a value (its type and its enum the SDK carries already)."""
BODIES: dict[str, tuple[str, str]] = {
    "responses": ("post", "/responses"),
    "responses.compact": ("post", "/responses/compact"),
    "responses.input_tokens": ("post", "/responses/input_tokens"),
    "chat": ("post", "/chat/completions"),
    "conversations.create": ("post", "/conversations"),
    "conversations.update": ("post", "/conversations/{conversation_id}"),
    "conversations.add_items": ("post", "/conversations/{conversation_id}/items"),
    "files.create": ("post", "/files"),
    "vector_stores.create": ("post", "/vector_stores"),
    "vector_stores.update": ("post", "/vector_stores/{vector_store_id}"),
    "vector_stores.files.create": ("post", "/vector_stores/{vector_store_id}/files"),
    "vector_stores.files.update": ("post", "/vector_stores/{vector_store_id}/files/{file_id}"),
    "vector_stores.file_batches.create": ("post", "/vector_stores/{vector_store_id}/file_batches"),
    "vector_stores.search": ("post", "/vector_stores/{vector_store_id}/search"),
}
"""Every request body of the endpoint families the reference gateway serves, by name."""
SEGMENT = re.compile(r"\[\]|\{[^{}]*\}|\.?(?:<key>|\*|[^.\[\]{}<>*]+)")


def segments(path: str) -> list[str]:
    """A bound's path cut into its parts: `tools[]{function}.name` -> `[]`, `{function}`, `name`."""
    parts = SEGMENT.findall(path)
    if "".join(parts) != path:
        raise ValueError(f"not a bound path: {path!r}")
    return [part.lstrip(".") for part in parts]


# Reading the bounds the project ships

@cache
def shipped() -> dict[str, Any]:
    """The shipped document: `source` (where and when the bounds were extracted) and `bodies`."""
    document: dict[str, Any] = json.loads(BOUNDS_FILE.read_text())
    return document


def bounds(body: str) -> dict[str, Schema]:
    """The bounds of one body (a name of `BODIES`), by path."""
    found: dict[str, Schema] = shipped()["bodies"][body]
    return found


# Extracting them from OpenAI's OpenAPI description

def _member_type(node: Schema, components: Schema) -> str | None:
    """The one `type` value an object member of a union declares, or None."""
    node = _resolved(node, components)
    declared = _resolved((node.get("properties") or {}).get("type") or {}, components)
    values = declared.get("enum") or ([declared["const"]] if "const" in declared else [])
    return values[0] if len(values) == 1 else None


def _resolved(node: Schema, components: Schema) -> Schema:
    while "$ref" in node:
        node = components[node["$ref"].rsplit("/", 1)[1]]
    return node


def _walk(node: Schema, path: str, within: tuple[str, ...], components: Schema) -> Iterator[tuple[str, Schema]]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        if name not in within:
            yield from _walk(components[name], path, (*within, name), components)
        return
    if found := {key: node[key] for key in KEYWORDS if key in node}:
        yield path, found
    for member in node.get("allOf", []):
        yield from _walk(member, path, within, components)
    for member in [*node.get("anyOf", []), *node.get("oneOf", [])]:
        kind = _member_type(member, components) if "$ref" in member or "properties" in member else None
        yield from _walk(member, path + (f"{{{kind}}}" if kind else ""), within, components)
    for key, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{key}" if path else key, within, components)
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}.*", within, components)
    if isinstance(node.get("propertyNames"), dict):
        yield from _walk(node["propertyNames"], f"{path}.<key>", within, components)
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]", within, components)


def body_bounds(spec: Schema, method: str, route: str) -> dict[str, Schema]:
    """The bounds of one operation's request body, by path (in walk order). Where members of a
    union put different bounds at one path, the loosest holds (a value one member takes is not
    refused)."""
    content = spec["paths"][route][method]["requestBody"]["content"]
    schema = next(iter(content.values()))["schema"]
    found: dict[str, Schema] = {}
    for path, bound in _walk(schema, "", (), spec["components"]["schemas"]):
        kept = found.setdefault(path, {})
        for key, value in bound.items():
            kept[key] = _looser(key, kept[key], value) if key in kept else value
    return found


def _looser(keyword: str, one: Any, other: Any) -> Any:
    if one == other:
        return one
    if keyword.startswith(("min", "exclusiveMin")):
        return min(one, other)
    if keyword.startswith(("max", "exclusiveMax")):
        return max(one, other)
    raise ValueError(f"two members of a union bound one path with different {keyword}: {one!r} and {other!r}")


def extract(spec: Schema) -> dict[str, dict[str, Schema]]:
    """Every body's bounds, by body name."""
    return {name: body_bounds(spec, method, route) for name, (method, route) in BODIES.items()}


def document(openapi: Path) -> dict[str, Any]:
    """The document `openai_bounds.json` holds, extracted from the description at `openapi`."""
    import yaml  # only to regenerate: nothing reads the OpenAPI file at run time

    raw = openapi.read_bytes()
    spec = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {"source": {"file": openapi.name, "title": spec["info"]["title"], "version": spec["info"]["version"],
                       "sha256": hashlib.sha256(raw).hexdigest(), "extracted_on": datetime.now(UTC).date().isoformat(),
                       "regenerate": f"python -m {__spec__.name} PATH/openai-openapi.yaml"},
            "bodies": extract(spec)}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: python -m {__spec__.name} PATH/openai-openapi.yaml", file=sys.stderr)
        return 2
    written = document(Path(argv[0]))
    BOUNDS_FILE.write_text(json.dumps(written, indent=1) + "\n")
    counts = ", ".join(f"{name} {len(found)}" for name, found in written["bodies"].items())
    print(f"wrote {BOUNDS_FILE} from {argv[0]} (version {written['source']['version']}): bounds per body: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
