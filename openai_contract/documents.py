"""Reading a file into a value, bounded: the YAML and JSON documents the tool and the gateway read
(scenarios, goldens, baselines, captures, scripts, profiles, configs) come from people and
programs it does not trust.

A document is refused with a `DocumentError`, one line saying why (and at which line of the file
when that is known), when
- the file holds more bytes than its format allows (`MAX_YAML_BYTES`, `MAX_JSON_BYTES`: its size
  is checked before it is read, and the bytes actually read are counted too);
- it is not UTF-8, or not valid YAML or JSON (a YAML tag that would build a Python object is not
  valid: only the safe loaders are used);
- it nests deeper than `MAX_DEPTH`, counted through YAML aliases;
- a YAML anchor holds an alias of itself (`a: &r [*r]`), which no finite value is;
- its YAML aliases, expanded, stand for more than `MAX_VALUES` values: a "billion laughs" file
  of 683 bytes (nine lines of nine aliases of the line before) stands for 9^9, 387 million,
  strings, and whatever walks the value would walk all of them.

`extent` measures a value, or a YAML file's node graph, without expanding it: each distinct node
is visited once (an alias is the same object as its anchor, so its measure is remembered by
identity), iteratively, so a recursive anchor or a deep value never exhausts Python's stack: a
billion laughs is refused in well under a millisecond. JSON has no aliases: its number of values
is bounded by its size, so only its depth is measured.

Bounds, measured on the repository's files: a built-in scenario holds at most 526 values and
nests at most 11 levels, in at most 6.5 KB (a profile or config less); the largest capture is
31 KB and OpenAI's largest recording 1.2 MB (a stream carrying images), and none nests deeper
than 13 levels. A capture holds a request body, which the gateway takes up to 16 MiB
(`request_body`) and 100 levels deep (`strict_json`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 2**20
"""A YAML file (scenario, script, profile, config): the largest real one is 6.5 KB. libyaml
parses a dense MiB in about a second (longer than Python's `json` takes for 32)."""
MAX_JSON_BYTES = 32 * 2**20
"""A JSON file (golden, capture, baseline, results, probe answers, cache): a capture holds a
request of up to 16 MiB and an answer that may carry images; the largest real one is 1.2 MB."""
MAX_DEPTH = 128
"""How deep a document may nest: a captured request may nest 100 levels below its envelope, and
the checks that walk a document recurse, so this stays far from Python's recursion limit."""
MAX_VALUES = 100_000
"""How many values (mappings, lists and scalars, keys included) a YAML document may stand for with
its aliases expanded: about 190 times the largest scenario; validating a scenario that size
takes under a second, where a billion laughs would take hours."""
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it (four to eight times faster), building plain values only."""


class DocumentError(ValueError):
    """A document refused: `problem` says why in one line, `line` (1-based) where when known.
    Its text names no file; the reader that knows the file puts its name in front."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {problem}" if line is not None else problem)
        self.problem = problem
        self.line = line


@dataclass(frozen=True)
class Extent:
    """How many values a document stands for (aliases expanded) and how deep it nests (a scalar: 0)."""

    values: int
    depth: int


class Unbounded(DocumentError):
    """Raised by `extent` at the first node past a bound, or that holds itself: `node` is where."""

    def __init__(self, problem: str, node: Any) -> None:
        super().__init__(problem)
        self.node = node


_OPEN = (-1, -1)
"""What `extent` remembers of a node it is walking inside of: met again, it holds itself."""
_Opened = tuple[list[Any], int]
"""A collection opened: the collections directly inside it, and how many scalars."""


def _value_children(value: Any) -> _Opened | None:
    """A mapping's or list's collections and scalars (a mapping's keys count); None for a scalar."""
    if isinstance(value, dict):
        inner = [child for child in value.values() if isinstance(child, dict | list)]
        return inner, 2 * len(value) - len(inner)
    if isinstance(value, list):
        inner = [child for child in value if isinstance(child, dict | list)]
        return inner, len(value) - len(inner)
    return None


def _node_children(node: yaml.Node) -> _Opened | None:
    """A YAML collection node's collection nodes and scalars (a mapping's keys count); None for a scalar."""
    kind = type(node)
    if kind is yaml.MappingNode:
        inner = [part for pair in node.value for part in pair if type(part) is not yaml.ScalarNode]
        return inner, 2 * len(node.value) - len(inner)
    if kind is yaml.SequenceNode:
        inner = [part for part in node.value if type(part) is not yaml.ScalarNode]
        return inner, len(node.value) - len(inner)
    return None


def extent(root: Any, children: Callable[[Any], _Opened | None] = _value_children,
           max_values: int | None = None, max_depth: int | None = None) -> Extent:
    """The extent of `root`, whose collections `children` opens (plain values by default); raises
    `Unbounded` at the first node past `max_values` or `max_depth`, or that holds itself.
    Time and memory linear in the distinct nodes, without recursion: a depth-first walk that
    remembers each finished node's extent by identity (`_OPEN` while it is on the path)."""
    opened = children(root)
    if opened is None:
        return Extent(1, 0)
    most_depth = max_depth or sys.maxsize
    known: dict[int, tuple[int, int]] = {id(root): _OPEN}
    # The path from the root, one entry per level: the node, its collections not yet walked,
    # the values it stands for so far, and the depth of its deepest child so far.
    path, pending, values, deepest = [root], [iter(opened[0])], [1 + opened[1]], [0]
    while True:
        for child in pending[-1]:
            seen = known.get(id(child))
            if seen is _OPEN:
                raise Unbounded("an alias refers to the node that holds it (a recursive anchor)", child)
            if seen is None:
                if len(path) >= most_depth:
                    raise Unbounded(f"nests deeper than {max_depth} levels", child)
                inner, scalars = children(child) or ([], 0)
                if inner:
                    known[id(child)] = _OPEN
                    path.append(child)
                    pending.append(iter(inner))
                    values.append(1 + scalars)
                    deepest.append(0)
                    break
                seen = known[id(child)] = (1 + scalars, 1)  # a collection of scalars: no need to descend
            values[-1] += seen[0]
            deepest[-1] = max(deepest[-1], seen[1])
        else:
            node, total, depth = path.pop(), values.pop(), deepest.pop() + 1
            pending.pop()
            if max_values is not None and total > max_values:
                raise Unbounded(f"holds more than {max_values:,} values with its aliases expanded", node)
            if depth > most_depth:
                raise Unbounded(f"nests deeper than {max_depth} levels once its aliases are expanded", node)
            if not path:
                return Extent(total, depth)
            known[id(node)] = (total, depth)
            values[-1] += total
            deepest[-1] = max(deepest[-1], depth)


def nesting_depth(value: Any) -> int:
    """How many mappings and lists deep `value` nests (a scalar: 0), without recursion."""
    return extent(value).depth


def read_text(path: Path, max_bytes: int, kind: str) -> str:
    """The UTF-8 text of `path`, refused before it is read when larger than `max_bytes` (and when
    more than that is read: a pipe or a growing file has no honest size). `OSError` as `open`
    raises it; `DocumentError` for the size and the encoding. `kind` names the format ("YAML")."""
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentError(f"is {size:,} bytes, more than the {max_bytes:,} a {kind} file may hold")
    with path.open("rb") as file:
        raw = file.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise DocumentError(f"holds more than the {max_bytes:,} bytes a {kind} file may hold")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(f"is not UTF-8: byte 0x{raw[error.start]:02x} at offset {error.start} "
                            f"({error.reason})") from None


def parse_yaml(text: str, loader: type[yaml.SafeLoader] = SAFE_LOADER) -> Any:
    """The value of the YAML document `text`, read with `loader` (a safe loader class: it builds
    plain values only) once its node graph is within the bounds; `DocumentError` otherwise."""
    reader = loader(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None
        try:
            extent(node, _node_children, MAX_VALUES, MAX_DEPTH)
        except Unbounded as bound:  # said again with its line
            raise DocumentError(bound.problem, bound.node.start_mark.line + 1) from None
        return reader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or " ".join(str(error).split())
        raise DocumentError(f"not valid YAML: {problem}",
                            mark.line + 1 if mark is not None else None) from None
    except RecursionError:  # the pure-Python parser recurses as deep as the document nests
        raise DocumentError(f"nests deeper than {MAX_DEPTH} levels") from None
    finally:
        reader.dispose()


def parse_json(text: str) -> Any:
    """The value of the JSON document `text` (as `json.loads` reads it) within `MAX_DEPTH`;
    `DocumentError` otherwise."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise DocumentError(f"nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise DocumentError(f"not valid JSON: {error.msg} (column {error.colno})", error.lineno) from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise DocumentError(f"not readable JSON: {error}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH:  # else it cannot nest that deep
        extent(value, max_depth=MAX_DEPTH)
    return value


def read_yaml(path: Path, loader: type[yaml.SafeLoader] = SAFE_LOADER) -> Any:
    """The value of the YAML file `path`, bounded (`read_text`, `parse_yaml`)."""
    return parse_yaml(read_text(path, MAX_YAML_BYTES, "YAML"), loader)


def read_json(path: Path) -> Any:
    """The value of the JSON file `path`, bounded (`read_text`, `parse_json`)."""
    return parse_json(read_text(path, MAX_JSON_BYTES, "JSON"))
