"""The one strict JSON reader: what it refuses, with the rule and the words both the reference
gateway's 400 and the harness's defect use, and what it keeps."""

from __future__ import annotations

import json

import pytest

from responses_parity.harness.wire.decode import Unreadable, read_json
from responses_parity.openai_contract.strict_json import MAX_DEPTH, NotStrictJson, loads


def nested(levels: int) -> str:
    return '{"a": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


@pytest.mark.parametrize(("text", "rule", "message"), [
    ('{"a": 1\n "b": 2}', "json", "is not JSON (Expecting ',' delimiter at line 2 column 2)"),
    ('{"t": NaN}', "number", "has the number NaN, which JSON does not allow"),
    ('[Infinity]', "number", "has the number Infinity, which JSON does not allow"),
    ('[-Infinity]', "number", "has the number -Infinity, which JSON does not allow"),
    ('{"t": 1e400}', "number", "has the number 1e400, too large for a double"),
    ('{"t": -1.7976931348623159e308}', "number", "has the number -1.7976931348623159e308, too large for a double"),
    ('[' + "9" * 5000 + ']', "number", "has an integer of more than 4,300 digits"),
    (nested(MAX_DEPTH + 1), "depth", f"nests deeper than {MAX_DEPTH} levels"),
    ("[" * 100_000 + "]" * 100_000, "depth", f"nests deeper than {MAX_DEPTH} levels"),
    ('{"text": "caf\\ud800"}', "encoding", "has a string with a lone UTF-16 surrogate, which is not text"),
    ('{"\\udfff": 1}', "encoding", "has a string with a lone UTF-16 surrogate, which is not text"),
    ('["\\ude00\\ud83d"]', "encoding", "has a string with a lone UTF-16 surrogate, which is not text"),
])
def test_what_is_not_strict_json_is_refused_saying_why(text: str, rule: str, message: str) -> None:
    with pytest.raises(NotStrictJson) as refused:
        loads(text)
    assert (refused.value.rule, refused.value.message) == (rule, message)
    with pytest.raises(Unreadable) as unreadable:  # the harness's reader of answers says the same
        read_json(text)
    assert (unreadable.value.defect.rule, unreadable.value.defect.message) == (rule, message)


@pytest.mark.parametrize(("text", "value"), [
    (nested(MAX_DEPTH), json.loads(nested(MAX_DEPTH))),
    ('{"t": 1.7976931348623157e308, "u": 1e-400}', {"t": 1.7976931348623157e308, "u": 0.0}),
    # a surrogate pair is one character; an escaped backslash before "ud800" is no escape of a surrogate
    ('["\\ud83d\\ude00", "\\\\ud800"]', ["\U0001f600", "\\ud800"]),
    ('{"a": 1, "a": 2}', {"a": 2}),  # a name given twice keeps its last value, as json has it
])
def test_what_is_strict_json_is_read_as_json_reads_it(text: str, value: object) -> None:
    assert loads(text) == value == read_json(text)
