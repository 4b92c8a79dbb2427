"""Bounded documents: a YAML or JSON file is refused, in one line saying why and where, when it is
too large, nests too deep, holds an anchor of itself, or stands for too many values once its
aliases are expanded; the measure walks each distinct node once, without recursion."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml

from responses_parity.openai_contract.documents import (MAX_DEPTH, MAX_JSON_BYTES, MAX_VALUES, MAX_YAML_BYTES,
                                                        DocumentError, Extent, Unbounded, extent, nesting_depth,
                                                        parse_json, parse_yaml, read_json, read_text, read_yaml)

LAUGHS = "".join(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
                 for previous, name in zip("abcdefgh", "bcdefghi", strict=True))
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + LAUGHS
"""The "billion laughs": nine lines, each nine aliases of the line before: 9^9 strings."""


def shared_laughs(levels: int) -> list[object]:
    """A plain value like a billion laughs: each level a list of nine references to the one below."""
    value: list[object] = ["lol"] * 9
    for _ in range(levels - 1):
        value = [value] * 9
    return value


def test_a_billion_laughs_is_refused_at_the_line_where_it_grows_too_large() -> None:
    with pytest.raises(DocumentError) as refused:
        parse_yaml(LAUGHS)
    # line 6, f, stands for 9^6 = 531,441 strings: the first line past the bound (e stands for 59,049)
    assert str(refused.value) == f"line 6: holds more than {MAX_VALUES:,} values with its aliases expanded"
    assert refused.value.line == 6


def test_a_shared_value_is_measured_from_its_distinct_nodes() -> None:
    # 30 levels of nine: 9^30 strings, 31 levels deep, counted exactly from 30 lists
    opened: list[int] = []

    def children(value: object) -> tuple[list[object], int] | None:
        opened.append(id(value))
        if not isinstance(value, list):
            return None
        inner = [child for child in value if isinstance(child, list)]
        return inner, len(value) - len(inner)

    measured = extent(shared_laughs(30), children)
    assert measured == Extent(sum(9**level for level in range(31)), 30)
    assert len(opened) == 30 and len(set(opened)) == 30


def test_values_count_keys_and_aliases_as_the_values_they_stand_for() -> None:
    text = "a: &a [1, 2, 3]\nb: [*a, *a]\n"
    # the mapping, its 2 keys, a (a list and 3 values), b (a list and twice a)
    assert extent(parse_yaml(text)) == Extent(1 + 2 + 4 + (1 + 4 + 4), 3)


@pytest.mark.parametrize(("text", "line"), [
    ("id: x\ninput: &r [*r]\n", 2),
    ("id: x\nnested:\n  mapping: &m {key: [1, *m]}\n", 3),
    ("base: &m\n  <<: *m\n  key: 1\n", 1),
])
def test_a_recursive_anchor_is_refused_naming_its_line(text: str, line: int) -> None:
    with pytest.raises(DocumentError) as refused:
        parse_yaml(text)
    assert str(refused.value) == f"line {line}: an alias refers to the node that holds it (a recursive anchor)"


def test_a_value_that_holds_itself_is_refused_not_walked_forever() -> None:
    loop: list[object] = [1]
    loop.append({"again": loop})
    with pytest.raises(Unbounded, match="holds it"):
        nesting_depth(loop)


def test_depth_is_bounded_and_counted_through_aliases() -> None:
    half = MAX_DEPTH // 2 + 1
    text = f"a: &a {'[' * half}1{']' * half}\nb: {'[' * half}*a{']' * half}\n"
    with pytest.raises(DocumentError, match=f"nests deeper than {MAX_DEPTH} levels once its aliases are expanded"):
        parse_yaml(text)
    plain = f"x: {'[' * (MAX_DEPTH + 1)}{']' * (MAX_DEPTH + 1)}\n"
    with pytest.raises(DocumentError) as refused:
        parse_yaml(plain)
    assert str(refused.value) == f"line 1: nests deeper than {MAX_DEPTH} levels"
    assert nesting_depth(parse_yaml(f"x: {'[' * (MAX_DEPTH - 1)}{']' * (MAX_DEPTH - 1)}\n")) == MAX_DEPTH


def test_the_pure_python_parser_recursing_too_deep_is_a_document_error() -> None:
    with pytest.raises(DocumentError, match=f"nests deeper than {MAX_DEPTH} levels"):
        parse_yaml("[" * 5000 + "]" * 5000, yaml.SafeLoader)


@pytest.mark.parametrize(("text", "says"), [
    ("a: !!python/object/apply:os.system [echo hi]\n",
     "line 1: not valid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("steps: [\n", "line 2: not valid YAML: did not find expected node content"),
    ("\0", "not valid YAML: unacceptable character #x0000: control characters are not allowed in \"<unicode "
           "string>\", position 0"),
])
def test_what_is_not_yaml_is_one_line_naming_the_line(text: str, says: str) -> None:
    with pytest.raises(DocumentError) as refused:
        parse_yaml(text)
    assert str(refused.value) == says


def test_the_loader_class_is_the_callers() -> None:
    class OnlyStrings(yaml.SafeLoader):
        pass

    OnlyStrings.yaml_implicit_resolvers = {}
    assert parse_yaml("a: 1\nb: yes\n", OnlyStrings) == {"a": "1", "b": "yes"}
    assert parse_yaml("a: 1\nb: yes\n") == {"a": 1, "b": True}
    assert parse_yaml("") is None


@pytest.mark.parametrize(("text", "says"), [
    ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_DEPTH} levels"),
    ('{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", f"nests deeper than {MAX_DEPTH} levels"),
    ('{\n  "a": 1\n  "b": 2\n}', "line 3: not valid JSON: Expecting ',' delimiter (column 3)"),
    ("1" * 5000, "not readable JSON: Exceeds the limit (4300 digits) for integer string conversion"),
])
def test_what_json_cannot_hold_is_one_line(text: str, says: str) -> None:
    with pytest.raises(DocumentError) as refused:
        parse_json(text)
    assert str(refused.value).startswith(says)
    assert "\n" not in str(refused.value)


def test_json_as_deep_as_the_bound_is_read() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nesting_depth(parse_json(text)) == MAX_DEPTH


def test_nesting_depth_counts_mappings_and_lists() -> None:
    assert [nesting_depth(value) for value in ("x", [], {"a": [{}]}, [1, [2, [3]], {"b": None}])] == [0, 1, 3, 3]


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as file:
        file.truncate(size)
    return path


@pytest.mark.parametrize(("read", "bound", "kind"), [(read_yaml, MAX_YAML_BYTES, "YAML"),
                                                     (read_json, MAX_JSON_BYTES, "JSON")])
def test_a_file_larger_than_its_bound_is_refused_before_it_is_read(tmp_path: Path, read: object, bound: int,
                                                                   kind: str) -> None:
    path = _sparse(tmp_path / "large", bound + 1)
    with pytest.raises(DocumentError) as refused:
        read(path)  # type: ignore[operator]
    assert str(refused.value) == f"is {bound + 1:,} bytes, more than the {bound:,} a {kind} file may hold"


def test_the_bytes_read_are_bounded_when_the_size_is_not_known(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write() -> None:
        try:
            with fifo.open("wb") as sink:
                sink.write(b"x" * 100)
        except BrokenPipeError:
            pass  # the reader stopped reading, as it should

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(DocumentError) as refused:
            read_text(fifo, 10, "YAML")
    finally:
        writer.join()
    assert str(refused.value) == "holds more than the 10 bytes a YAML file may hold"


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("title: café\n".encode("latin-1"))
    with pytest.raises(DocumentError) as refused:
        read_yaml(path)
    assert str(refused.value) == "is not UTF-8: byte 0xe9 at offset 10 (invalid continuation byte)"


def test_a_missing_file_is_the_callers_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")
