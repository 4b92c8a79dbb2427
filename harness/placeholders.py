"""Placeholders in step requests: `{{ask.response.id}}`, `{{ask.output.function_call.call_id}}`,
`{{model}}`, `{{mcp.calc.url}}` ... rendered with Jinja2 (strict: an unknown name is an error).

A string that is exactly one `{{ expression }}` takes the expression's value with its type
(so a number stays a number); any other string is rendered as text. Earlier steps are
reachable by their id: `.response` (the Response object: the JSON body, or the terminal
event's response), `.output` (items; `.output.<type>` is the first item of that type,
`.output[0]` the first item), `.status` (HTTP), `.body` (any JSON body).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import jinja2

from .findings import HarnessError

BUILTIN_NAMES = frozenset({"model", "mcp", "responses_path", "chat_path", "conversations_path", "files_path",
                           "vector_stores_path", "run"})
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
_WHOLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.S)


class OutputView:
    """A response's output items, by position or by type."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self._items = items

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self._items[key]
        return self.__getattr__(key)

    def __getattr__(self, item_type: str) -> dict[str, Any]:
        for item in self._items:
            if item.get("type") == item_type:
                return item
        raise AttributeError(f"no output item of type {item_type!r}")

    def __len__(self) -> int:
        return len(self._items)


def parse_template(text: str) -> jinja2.nodes.Template:
    """A placeholder string's syntax tree, as it will be rendered (raises
    `jinja2.TemplateSyntaxError`)."""
    return _ENV.parse(text)


@cache
def _expression(source: str) -> Callable[..., Any]:
    """`source` compiled once: compiling costs a millisecond, and every unit renders the same
    placeholders again."""
    return _ENV.compile_expression(source, undefined_to_none=False)


@cache
def _template(text: str) -> jinja2.Template:
    return _ENV.from_string(text)


def _render_string(text: str, context: Mapping[str, Any], where: str) -> Any:
    if "{{" not in text and "{%" not in text:
        return text
    try:
        if match := _WHOLE.match(text):
            value = _expression(match["expr"])(**context)
            if isinstance(value, jinja2.Undefined):
                str(value)  # raises, naming what an earlier answer lacked
            return value
        return _template(text).render(**context)
    except (jinja2.TemplateError, AttributeError, IndexError, KeyError, TypeError) as error:
        raise HarnessError(f"{where}: cannot resolve {text!r}: {error}") from error


def render(value: Any, context: Mapping[str, Any], where: str) -> Any:
    """`value` with every placeholder resolved against `context`."""
    if isinstance(value, str):
        return _render_string(value, context, where)
    if isinstance(value, Mapping):
        return {key: render(item, context, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, context, f"{where}[{index}]") for index, item in enumerate(value)]
    return value
