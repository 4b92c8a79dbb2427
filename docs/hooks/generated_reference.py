"""MkDocs hook: the reference pages' generated parts, made at build time from the code that owns
them, so that they cannot drift. A page asks for one with a line of its own:

- `<!-- generated: scenario schema -->`: a table per object of the scenario JSON Schema (what
  `parity schema` writes), the scenario first, then each object in the order the ones before
  it name them, every type linked to its table.
- `<!-- generated: reference gateway settings -->`: the settings file the reference gateway's
  `config.py` documents.

A marker no generator answers fails the build."""

from __future__ import annotations

import json
import re
from typing import Any

from responses_parity.harness.scenario.model import scenario_json_schema
from responses_parity.reference_impl import config

MARKER = re.compile(r"^<!-- generated: (?P<name>[a-z ]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: no generator for {match[0]!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)


def scenario_schema_tables() -> str:
    """Every object of the scenario schema as a heading, its description and a table of its fields."""
    schema = scenario_json_schema()
    definitions: dict[str, dict[str, Any]] = {"Scenario": schema, **schema["$defs"]}
    order, pending = [], ["Scenario"]
    while pending:
        name = pending.pop(0)
        if name in order:
            continue
        order.append(name)
        pending += re.findall(r'"#/\$defs/(\w+)"', json.dumps(definitions[name]["properties"]))
    return "\n".join(_object_table(name, definitions[name]) for name in order)


def _object_table(name: str, definition: dict[str, Any]) -> str:
    lines = [f"### {name}", ""]
    if name == "Scenario":
        lines += ["A scenario file: one YAML mapping with these fields.", ""]
    elif description := definition.get("description"):
        lines += [" ".join(description.split()), ""]
    required = set(definition.get("required", []))
    lines += ["| field | type | default | what it is |", "|---|---|---|---|"]
    for field, spec in definition.get("properties", {}).items():
        default = "required" if field in required else (
            f"`{json.dumps(spec['default'])}`" if "default" in spec and spec["default"] not in (None, [], {}) else "")
        lines.append(f"| `{field}` | {_type(spec)} | {default} | {_cell(spec.get('description', ''))} |")
    return "\n".join(lines) + "\n"


def _type(spec: dict[str, Any]) -> str:
    """A field's type in words, each object linked to its table; `null` left out (a default says it)."""
    if "$ref" in spec:
        target = spec["$ref"].rsplit("/", 1)[1]
        return f"[{target}](#{target.lower()})"
    if "anyOf" in spec:
        return " or ".join(_type(choice) for choice in spec["anyOf"] if choice.get("type") != "null")
    if "enum" in spec:
        return " or ".join(f"`{json.dumps(value)}`" for value in spec["enum"])
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}" + (" (at least one)" if spec.get("minItems") else "")
    if kind == "object":
        values = spec.get("additionalProperties")
        return f"map of string to {_type(values)}" if isinstance(values, dict) else "object"
    bounds = [f"from {spec['minimum']} to {spec['maximum']}" if "minimum" in spec and "maximum" in spec else
              ", ".join(filter(None, [f"at least {spec['minimum']}" if "minimum" in spec else "",
                                      f"above {spec['exclusiveMinimum']}" if "exclusiveMinimum" in spec else "",
                                      f"at most {spec['maximum']}" if "maximum" in spec else ""])),
              f"matching `{spec['pattern']}`" if "pattern" in spec else "",
              "not empty" if spec.get("minLength") else ""]
    return " ".join([kind, *filter(None, bounds)])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def reference_gateway_settings() -> str:
    """The YAML example of the reference gateway's settings, as its module documents it."""
    [block] = re.findall(r"^```yaml\n.*?^```$", config.__doc__ or "", re.MULTILINE | re.DOTALL)
    return block


GENERATORS = {"scenario schema": scenario_schema_tables, "reference gateway settings": reference_gateway_settings}
