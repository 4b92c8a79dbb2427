"""Placeholders in scenario strings: `{{ask.response.id}}`, `{{ask.output.function_call.call_id}}`,
`{{model}}`, `{{mcp.calc.url}}` ... A scenario file is untrusted input, so a placeholder can
reach earlier steps' answers and the built-in names, and nothing else; it runs no code and its
work is bounded. The whole language:

    {{ name.field[0]["key"] }}   a path: a built-in name or an earlier step's id, then `.name`,
                                 `[integer]` and `["string"]` selectors
    {{ upload.body.created_at + 3600 }}
                                 an integer offset (`+ N`, `- N`, N of at most 12 digits), on an
                                 integer value only
    {{ "{{" }}                   a string literal: how a literal `{{` (or `{%`) is written

Names starting with `_`, calls, other operators, filters and `{% %}` statements are errors,
reported by `parse` (validation and rendering share it). A path selects only in dicts, lists
and the harness's own views (`View`), never in the attributes of a Python object. Earlier
steps give `.response` (the Response object: the JSON body, or the terminal event's response),
`.output` (items; `.output.<type>` is the first item of that type, `.output[0]` the first item),
`.status` (HTTP), `.body` (any JSON body) and `.completion` (the chat completion).

A string that is exactly one placeholder (blanks around it aside) takes the value with its type
(a number stays a number); in any other string a string value is inserted as it is, any other
value as compact JSON. What the placeholders of one `render` produce is at most
`MAX_RENDERED_CHARS` characters (a whole value counted by its JSON size).

Hand-written (a regex tokenizer and a loop) rather than with a parsing library: the grammar has
three rules, and a dependency would add a second grammar language to read for no gain.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import HarnessError

BUILTIN_NAMES = frozenset({"model", "mcp", "responses_path", "chat_path", "conversations_path", "files_path",
                           "vector_stores_path", "run"})
MAX_RENDERED_CHARS = 4 * 1024 * 1024
"""What the placeholders of one `render` may produce, in characters."""
MAX_DIGITS = 12
"""The longest integer literal (an offset or an index)."""
MAX_TOKENS = 200
"""The most tokens one placeholder may have (names, selectors, operators)."""
OPEN, OPEN_STATEMENT, CLOSE = "{{", "{%", "}}"
_OPENING = re.compile(r"\{[{%]")
_TOKEN = re.compile(r"""\s*(?:
    (?P<close>\}\})
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<int>[0-9]+)
  | (?P<string>"[^"]*"|'[^']*')
  | (?P<op>\*\*|//|[-+*/%~|(),:.\[\]{}<>=!?])
  | (?P<other>\S)
)""", re.X)
_OPERATORS = {"**": "`**` (a power)", "*": "`*` (a product or a repetition)", "/": "`/`", "//": "`//`",
              "%": "`%`", "~": "`~` (string concatenation)"}
_OFFSET_HINT = "only an integer offset is: `+ N` or `- N`"
_INTEGER_ARGUMENT = re.compile(r"\s*([0-9]{1,12})\s*\)")


class PlaceholderError(ValueError):
    """A string whose placeholders are not the language (the message says where and why)."""


class View(ABC):
    """A value of the harness's own that a placeholder path may select in: the only objects a
    path reaches besides dicts and lists."""

    @abstractmethod
    def select(self, key: str | int) -> Any:
        """The part `key` names; `LookupError` saying what there is instead."""

    @abstractmethod
    def value(self) -> Any:
        """What a placeholder ending on the view gives (JSON data); `LookupError` when it must
        select further."""


class OutputView(View):
    """A response's output items, by position or by type (the first item of that type)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self._items = items
        self._first: dict[Any, dict[str, Any]] = {}
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                self._first.setdefault(item["type"], item)

    def select(self, key: str | int) -> Any:
        if isinstance(key, int):
            if not -len(self._items) <= key < len(self._items):
                raise LookupError(f"has {len(self._items)} output item(s), no [{key}]")
            return self._items[key]
        if key not in self._first:
            raise LookupError(f"has no {key} item (it has: {', '.join(self._first) or 'no items'})")
        return self._first[key]

    def value(self) -> list[dict[str, Any]]:
        return self._items


# -- the language ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Reference:
    """`name.selector...`, optionally `+ offset`."""

    name: str
    selectors: tuple[str | int, ...] = ()
    offset: int | None = None

    def path(self, length: int | None = None) -> str:
        """The path as written (its first `length` selectors)."""
        text = self.name
        for selector in self.selectors[:length]:
            text += f"[{selector}]" if isinstance(selector, int) else \
                f".{selector}" if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", selector) else f"[{selector!r}]"
        return text


Segment = str | Reference
"""Text as it is written, or a placeholder to resolve."""


@dataclass(frozen=True)
class Template:
    segments: tuple[Segment, ...]
    whole: bool
    """Whether the string is exactly one placeholder (blanks around it aside)."""

    @property
    def references(self) -> list[Reference]:
        return [segment for segment in self.segments if isinstance(segment, Reference)]


def has_placeholders(text: str) -> bool:
    """Whether `text` is more than text: it holds `{{` or `{%`."""
    return OPEN in text or OPEN_STATEMENT in text


@dataclass
class _Tokens:
    """The tokens of the placeholder whose `{{` ends at `position`, read up to its `}}`."""

    text: str
    position: int

    def read(self) -> list[tuple[str, str]]:
        """(kind, text) of each token, the closing `}}` last; `PlaceholderError` for the first
        construct outside the language, or past `MAX_TOKENS`."""
        start = self.position - len(OPEN)
        tokens: list[tuple[str, str]] = []
        while not tokens or tokens[-1][0] != "close":
            match = _TOKEN.match(self.text, self.position)
            if match is None:
                raise PlaceholderError(f"the `{{{{` at character {start} is never closed by `}}}}`")
            if len(tokens) == MAX_TOKENS:
                raise PlaceholderError(f"the placeholder at character {start} is longer than {MAX_TOKENS} names, "
                                       "selectors and operators")
            kind = match.lastgroup or "other"
            self.position = match.end()
            tokens.append((kind, match[kind]))
            self._refuse_forbidden(tokens)
        return tokens

    def _refuse_forbidden(self, tokens: list[tuple[str, str]]) -> None:
        """Refuse the token just read if it is outside the language, naming it: a `_name`, a
        call, an operator."""
        kind, value = tokens[-1]
        if kind == "name" and value.startswith("_"):
            raise PlaceholderError(f"{_code(value)}: a name starting with `_` is not allowed")
        if kind == "other" and value in "\"'":
            raise PlaceholderError(f"a string opened with {value} is never closed")
        if value == "(":
            if len(tokens) < 2 or tokens[-2][0] != "name":
                raise PlaceholderError("parentheses are not allowed")
            raise PlaceholderError(self._call_problem(tokens))
        if value == "|":
            raise PlaceholderError("filters (`|`) are not allowed")
        if kind == "op" and value in _OPERATORS:
            raise PlaceholderError(f"{_OPERATORS[value]} is not allowed; {_OFFSET_HINT}")

    def _call_problem(self, tokens: list[tuple[str, str]]) -> str:
        """Why the call just opened is refused, with its selector form for `path(integer)`."""
        start = len(tokens) - 2
        while start >= 2 and tokens[start - 1][1] == "." and tokens[start - 2][0] == "name":
            start -= 2
        called = "".join(value for _, value in tokens[start:-1])
        if argument := _INTEGER_ARGUMENT.match(self.text, self.position):
            return f"{_code(f'{called}({argument[1]})')}: a call is not allowed; write " \
                   f"{_code(f'{called}[{argument[1]}]')}"
        return f"{_code(called + '(...)')}: a call is not allowed"


@lru_cache(maxsize=4096)
def parse(text: str) -> Template:
    """The placeholders of `text`; `PlaceholderError` for anything outside the language."""
    segments: list[Segment] = []
    position = 0
    while (match := _OPENING.search(text, position)) is not None:
        if match.start() > position:
            segments.append(text[position:match.start()])
        if match[0] == OPEN_STATEMENT:
            raise PlaceholderError("`{%` starts a statement, and placeholders have none (a literal `{%` is "
                                   "written `{{ \"{%\" }}`)")
        tokens = _Tokens(text, match.end())
        segments.append(_expression(tokens.read()))
        position = tokens.position
    if position < len(text):
        segments.append(text[position:])
    whole = sum(isinstance(s, Reference) for s in segments) == 1 and \
        all(isinstance(s, Reference) or not s.strip() for s in segments)
    return Template(tuple(_merged(segments)), whole)


def _merged(segments: list[Segment]) -> Iterator[Segment]:
    """Neighbouring texts as one."""
    texts: list[str] = []
    for segment in segments:
        if isinstance(segment, str):
            texts.append(segment)
            continue
        if texts:
            yield "".join(texts)
            texts.clear()
        yield segment
    if texts:
        yield "".join(texts)


def _expression(tokens: list[tuple[str, str]]) -> Segment:
    """One placeholder's tokens (the closing `}}` last, none forbidden) as a literal's text or a
    `Reference`."""
    kind, value = tokens[0]
    if kind == "close":
        raise PlaceholderError("`{{ }}` is empty: a placeholder names a value")
    if kind == "string":
        if tokens[1][0] != "close":
            raise PlaceholderError(f"{_shown(tokens[1])} after a string: string concatenation is not allowed")
        return value[1:-1]
    if kind != "name":
        raise PlaceholderError(f"a placeholder starts with a name (a built-in or an earlier step), not "
                               f"{_shown(tokens[0])}")
    selectors: list[str | int] = []
    index = 1
    while True:
        kind, value = tokens[index]
        if value == ".":
            if tokens[index + 1][0] != "name":
                raise PlaceholderError(f"`.` is followed by a name, not {_shown(tokens[index + 1])}")
            selectors.append(tokens[index + 1][1])
            index += 2
        elif value == "[":
            selector, index = _subscript(tokens, index + 1)
            selectors.append(selector)
        else:
            break
    offset = None
    if value in ("+", "-"):
        offset, index = _offset(tokens, index)
    if tokens[index][0] != "close":
        raise PlaceholderError(f"unexpected {_shown(tokens[index])} (a placeholder ends with `}}}}`)")
    return Reference(tokens[0][1], tuple(selectors), offset)


def _subscript(tokens: list[tuple[str, str]], index: int) -> tuple[str | int, int]:
    """The selector inside `[...]` starting at `index`, and the index after its `]`."""
    kind, value = tokens[index]
    negative = value == "-"
    if negative:
        index += 1
        kind, value = tokens[index]
    if kind == "int":
        selector: str | int = -_integer(value) if negative else _integer(value)
    elif kind == "string" and not negative:
        selector = value[1:-1]
    else:
        raise PlaceholderError(f"`[` takes an integer or a quoted string, not {_shown(tokens[index])}")
    if tokens[index + 1][1] != "]":
        raise PlaceholderError(f"{_code('[' + value)} is closed by `]`, not {_shown(tokens[index + 1])}")
    return selector, index + 2


def _offset(tokens: list[tuple[str, str]], index: int) -> tuple[int, int]:
    sign, (kind, value) = tokens[index][1], tokens[index + 1]
    if kind == "string":
        raise PlaceholderError(f"{_code(f'{sign} {value}')}: string concatenation is not allowed; {_OFFSET_HINT}")
    if kind != "int":
        raise PlaceholderError(f"`{sign}` takes an integer literal, not {_shown(tokens[index + 1])}; "
                               f"{_OFFSET_HINT}")
    return (_integer(value) if sign == "+" else -_integer(value)), index + 2


def _integer(digits: str) -> int:
    if len(digits) > MAX_DIGITS:
        raise PlaceholderError(f"the integer {digits[:MAX_DIGITS]}... is longer than {MAX_DIGITS} digits")
    return int(digits)


def _shown(token: tuple[str, str]) -> str:
    return "the end `}}`" if token[0] == "close" else _code(token[1])


def _code(text: str, limit: int = 60) -> str:
    """`text` in backquotes, a long one cut (a message stays one short line)."""
    return f"`{text}`" if len(text) <= limit else f"`{text[:limit]}...`"


def escaped(value: Any) -> Any:
    """`value` with every `{{` and `{%` in its strings written as a literal, so rendering it
    gives it back as it is (for text a scenario copies from elsewhere)."""
    if isinstance(value, str):
        return _OPENING.sub(lambda match: f'{OPEN} "{match[0]}" {CLOSE}', value)
    if isinstance(value, dict):
        return {key: escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [escaped(item) for item in value]
    return value


# -- rendering -------------------------------------------------------------------------------

@dataclass
class _Budget:
    """What the placeholders of one `render` may still produce, in characters."""

    left: int = MAX_RENDERED_CHARS

    def spend(self, value: Any, shown: str) -> None:
        """Count `value`'s JSON size; `HarnessError` past the budget, or when it holds a view
        (a placeholder that names no data)."""
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                self.left -= len(item) + 2
            elif isinstance(item, dict):
                self.left -= 2 + sum(len(str(key)) + 4 for key in item)
                stack += item.values()
            elif isinstance(item, list):
                self.left -= 2 + len(item)
                stack += item
            elif item is None or isinstance(item, bool):
                self.left -= 5
            elif isinstance(item, (int, float)):
                self.left -= len(repr(item))
            else:
                raise HarnessError(f"{shown} holds more than data: name a field of it")
            if self.left < 0:
                raise HarnessError(f"{shown}: the placeholders of this field would produce more than "
                                   f"{MAX_RENDERED_CHARS} characters")


def _resolve(reference: Reference, context: Mapping[str, Any]) -> Any:
    if reference.name not in context:
        raise LookupError(f"{reference.name!r} is neither an earlier step nor a built-in name")
    value = context[reference.name]
    for length, key in enumerate(reference.selectors):
        value = _select(value, key, reference.path(length))
    if isinstance(value, View):
        try:
            value = value.value()
        except LookupError as error:
            raise LookupError(f"{reference.path()} {error}") from None
    if reference.offset is not None:
        if type(value) is not int:
            raise LookupError(f"`{'+' if reference.offset >= 0 else '-'} {abs(reference.offset)}` applies to an "
                              f"integer, and {reference.path()} is {_kind(value)}")
        value += reference.offset
    return value


def _select(value: Any, key: str | int, shown: str) -> Any:
    """`value[key]` where a placeholder may look: dicts by name, lists by position, views."""
    if isinstance(value, View):
        try:
            return value.select(key)
        except LookupError as error:
            raise LookupError(f"{shown} {error}") from None
    if isinstance(value, dict) and isinstance(key, str):
        if key not in value:
            raise LookupError(f"{shown} has no {key!r}")
        return value[key]
    if isinstance(value, list) and isinstance(key, int):
        if not -len(value) <= key < len(value):
            raise LookupError(f"{shown} has {len(value)} item(s): no [{key}]")
        return value[key]
    wanted = f"[{key}]" if isinstance(key, int) else repr(key)
    raise LookupError(f"{shown} is {_kind(value)}: it has no {wanted}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "an object"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), "not data")


def _as_text(value: Any) -> str:
    """How a value reads inside text: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Unresolvable(HarnessError):
    """A placeholder names what is not there (an earlier answer that lacks it, say)."""

    def __init__(self, message: str, step: str | None) -> None:
        super().__init__(message)
        self.step = step
        """The earlier step whose answer lacked it; None when it reads no step's answer."""


def _render_string(text: str, context: Mapping[str, Any], where: str, budget: _Budget) -> Any:
    if not has_placeholders(text):
        return text
    reading: Reference | None = None
    try:
        template = parse(text)
        if template.whole:
            (reading,) = template.references
            value = _resolve(reading, context)
            budget.spend(value, f"{where}: {reading.path()}")
            return value
        parts = []
        for segment in template.segments:
            if isinstance(segment, str):
                parts.append(segment)
                continue
            reading = segment
            value = _resolve(segment, context)
            budget.spend(value, f"{where}: {segment.path()}")
            parts.append(_as_text(value))
        return "".join(parts)
    except (PlaceholderError, LookupError) as error:
        step = reading.name if isinstance(error, LookupError) and reading and reading.name in context and \
            reading.name not in BUILTIN_NAMES else None
        raise Unresolvable(f"{where}: cannot resolve {quoted(text)}: {error}", step) from error


def quoted(text: str, limit: int = 160) -> str:
    """`text` as a message shows it: quoted, a long one cut."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def render(value: Any, context: Mapping[str, Any], where: str) -> Any:
    """`value` with every placeholder resolved against `context`; `HarnessError` naming the
    field for a placeholder outside the language or one that cannot be resolved."""
    return _render(value, context, where, _Budget())


def _render(value: Any, context: Mapping[str, Any], where: str, budget: _Budget) -> Any:
    if isinstance(value, str):
        return _render_string(value, context, where, budget)
    if isinstance(value, Mapping):
        return {key: _render(item, context, f"{where}.{key}", budget) for key, item in value.items()}
    if isinstance(value, list):
        return [_render(item, context, f"{where}[{index}]", budget) for index, item in enumerate(value)]
    return value


__all__ = ["BUILTIN_NAMES", "MAX_RENDERED_CHARS", "OutputView", "PlaceholderError", "Reference", "Template",
           "Unresolvable", "View", "escaped", "has_placeholders", "parse", "quoted", "render"]
