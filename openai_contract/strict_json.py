"""JSON read strictly and bounded: a request body as the reference gateway takes it, a target's
answer as the harness judges it. One reader, so that what the gateway refuses of a client and
what the harness calls a defect of a target are the same.

Python's `json` accepts what JSON forbids and turns what it cannot hold into something else;
read here, a text is refused with a `NotStrictJson` naming the problem (I-JSON, RFC 7493, is the
profile) when
- it is not JSON's grammar;
- it has `NaN`, `Infinity` or `-Infinity` (no JSON number), or a number too large for a double
  (`1e400`, which `json` reads as infinity: a gateway that took it would send on a body that is
  not JSON, since `json.dumps` writes infinity as `Infinity`), or an integer of more digits than
  Python converts;
- it nests deeper than `MAX_DEPTH`;
- a string holds a lone UTF-16 surrogate (`"\\ud800"`), which is not text and cannot be UTF-8.
A name given twice in an object keeps its last value, as `json` has it (refusing it would take
a call into Python for every object).

What it costs: the standard library's C scanner reads the text, with one call into Python for
each number with a fraction or an exponent; the walks for depth and surrogates run only when
counts made at the speed of C (`suspicions`) say the text could hold what they look for, so a
plain body is read in one pass and two counts.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from .documents import nesting_depth

MAX_DEPTH = 100
"""How deep a JSON value may nest: a Response request nests about 10 levels, a strict JSON
Schema in it at most about 30; the reference gateway refuses a request deeper than this, and the
harness an answer. The checks that walk a value recurse, and stay far from Python's limit."""
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""Where a lone surrogate could come from: only a `\\uD800`..`\\uDFFF` escape makes one."""
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotStrictJson(ValueError):
    """Why a text is not strict JSON. `rule` names the kind (json, number, depth, encoding);
    `message` says what, of no subject ("nests deeper than 100 levels"), for the reader that
    knows the subject to put in front ("the body", "event 3")."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def _not_a_json_number(name: str) -> Any:
    raise NotStrictJson("number", f"has the number {name}, which JSON does not allow")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise NotStrictJson("number", f"has the number {text[:40]}, too large for a double")
    return value


DECODER = json.JSONDecoder(parse_constant=_not_a_json_number, parse_float=_finite)
"""The C scanner with the number checks; a reader that parses a member at a time (the gateway's
`json_body`) calls its `scan_once` and then `check`. Its errors: `json.JSONDecodeError` for the
grammar, `NotStrictJson` for a number, `ValueError` for too many digits, `RecursionError` for a
depth past the interpreter's (`loads` says each as a `NotStrictJson`)."""


def loads(text: str) -> Any:
    """The JSON value of `text`, or a `NotStrictJson` saying why it is not strict JSON."""
    try:
        value = DECODER.decode(text)
    except RecursionError:
        raise too_deep() from None
    except json.JSONDecodeError as error:
        raise NotStrictJson("json", f"is not JSON ({error.msg} at line {error.lineno} column {error.colno})") \
            from None
    except NotStrictJson:
        raise
    except ValueError:  # an integer of more digits than Python converts
        raise NotStrictJson("number", f"has an integer of more than {sys.get_int_max_str_digits():,} digits") \
            from None
    check(value, *suspicions(text))
    return value


def suspicions(text: str) -> tuple[bool, bool]:
    """Whether `text` could nest deeper than `MAX_DEPTH`, and could hold a lone surrogate: counts
    at the speed of C that spare `check` its walks unless the text could hold what they look for."""
    return text.count("[") + text.count("{") > MAX_DEPTH, _MAYBE_SURROGATE.search(text) is not None


def check(value: Any, deep: bool, surrogates: bool) -> None:
    """A `NotStrictJson` for a value nested deeper than `MAX_DEPTH` (if its text could be `deep`)
    or holding a lone surrogate (if its text has `surrogates` escapes)."""
    if deep and nesting_depth(value) > MAX_DEPTH:
        raise too_deep()
    if surrogates and _has_lone_surrogate(value):
        raise NotStrictJson("encoding", "has a string with a lone UTF-16 surrogate, which is not text")


def too_deep() -> NotStrictJson:
    return NotStrictJson("depth", f"nests deeper than {MAX_DEPTH} levels")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string of `value` (a key or a value) holds a UTF-16 surrogate: the JSON decoder
    joins the escapes of a pair into one character, so what is left of one is lone."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            pending.extend(node)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
