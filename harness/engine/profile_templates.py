"""How target profiles' templates are rendered. A profile starts a command by design, but its
templates are still read from a file: they reach only the variables the harness hands them,
and their work is bounded.

- A Jinja sandbox (`ImmutableSandboxedEnvironment`): no attribute starting with `_`, no Python
  internals, nothing mutated.
- Only what profiles need: `{{ expressions }}`, `{% if %}`, and `{% for %}` over a mapping
  the harness gives (`mcp.items()`, `.keys()`, `.values()`), one level deep; calls only to
  those; the filters in `FILTERS`. No `set`, macros, includes, `~`, slices or list literals,
  so a loop runs a few times (once per MCP fixture) and no value outlives its expression.
- Arithmetic bounded: integers within ±2**64, a string built by `+` or `*` at most
  `MAX_BUILT_CHARS`, no `%` formatting; and the rendered text at most `MAX_RENDERED_CHARS`.

A template outside these rules raises `jinja2.sandbox.SecurityError` naming what it used.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

MAX_BUILT_CHARS = 64 * 1024
MAX_RENDERED_CHARS = 1024 * 1024
MAX_INTEGER = 2**64
FILTERS = ("default", "int", "length", "lower", "string", "tojson", "trim", "upper")
"""Filters whose work is linear in what they are given."""
MAPPING_METHODS = ("items", "keys", "values")
_ALLOWED = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.For, nodes.Name, nodes.Const,
            nodes.Getattr, nodes.Getitem, nodes.Call, nodes.Filter, nodes.Test, nodes.Compare, nodes.Operand,
            nodes.And, nodes.Or, nodes.Not, nodes.Neg, nodes.Pos, nodes.CondExpr, nodes.BinExpr)
_SHOWN = {nodes.Assign: "`{% set %}`", nodes.AssignBlock: "`{% set %}`", nodes.Macro: "macros",
          nodes.CallBlock: "`{% call %}`", nodes.Include: "`{% include %}`", nodes.Import: "`{% import %}`",
          nodes.FromImport: "`{% from %}`", nodes.Extends: "`{% extends %}`", nodes.Block: "`{% block %}`",
          nodes.FilterBlock: "`{% filter %}`", nodes.With: "`{% with %}`", nodes.Concat: "`~`",
          nodes.Slice: "slices", nodes.List: "list literals", nodes.Dict: "dict literals",
          nodes.Tuple: "tuple literals", nodes.Keyword: "keyword arguments"}


class _ProfileEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def is_safe_callable(self, obj: Any) -> bool:
        """Only a mapping's `items`, `keys` and `values`."""
        owner = getattr(obj, "__self__", None)
        return isinstance(owner, Mapping) and getattr(obj, "__name__", None) in MAPPING_METHODS

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """The operator, refused where its result could be unbounded (checked before it is
        computed)."""
        if _number(left) and _number(right):
            too_large = SecurityError(f"`{left} {operator} {right}` is larger than a profile template may compute")
            if isinstance(left, int) and isinstance(right, int) and _costly(operator, left, right):
                raise too_large
            result = super().call_binop(context, operator, left, right)
            if isinstance(result, int) and abs(result) > MAX_INTEGER:
                raise too_large
            return result
        if operator == "+" and isinstance(left, str) and isinstance(right, str):
            size = len(left) + len(right)
        elif operator == "*" and isinstance(left, str) and _integer(right):
            size = len(left) * max(right, 0)
        elif operator == "*" and _integer(left) and isinstance(right, str):
            size = len(right) * max(left, 0)
        else:
            raise SecurityError(f"`{operator}` on {type(left).__name__} and {type(right).__name__} is not allowed in a "
                                "profile template")
        if size > MAX_BUILT_CHARS:
            raise SecurityError(f"`{operator}` would build a string of {size} characters; a profile template builds "
                                f"at most {MAX_BUILT_CHARS}")
        return super().call_binop(context, operator, left, right)


def _costly(operator: str, left: int, right: int) -> bool:
    """Whether `left operator right` on integers could take long to compute (its result would
    be refused anyway)."""
    bits = MAX_INTEGER.bit_length()
    if operator == "*":
        return left.bit_length() + right.bit_length() > 2 * bits
    return operator == "**" and abs(left) > 1 and right > bits


def _number(value: Any) -> bool:
    return isinstance(value, (int, float))


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_ENV = _ProfileEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters = {name: _ENV.filters[name] for name in FILTERS}
_ENV.globals.clear()


def _check(node: nodes.Node, in_loop: bool = False) -> None:
    """Refuse what a profile template may not use (see the module's docstring)."""
    if isinstance(node, nodes.Tuple) and node.ctx == "store":
        return
    if not isinstance(node, _ALLOWED):
        shown = next((text for kind, text in _SHOWN.items() if isinstance(node, kind)), f"`{type(node).__name__}`")
        raise SecurityError(f"{shown} not allowed in a profile template (line {node.lineno})")
    if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
        raise SecurityError(f"`.{node.attr}`: a name starting with `_` is not allowed (line {node.lineno})")
    if isinstance(node, nodes.Filter) and node.name not in FILTERS:
        raise SecurityError(f"the filter `{node.name}` is not allowed in a profile template (line {node.lineno}; "
                            f"allowed: {', '.join(FILTERS)})")
    if isinstance(node, nodes.Call) and not (isinstance(node.node, nodes.Getattr) and node.node.attr in
                                             MAPPING_METHODS and not node.args and not node.kwargs):
        raise SecurityError(f"a profile template calls only `.items()`, `.keys()` and `.values()` (line {node.lineno})")
    if isinstance(node, nodes.For):
        if in_loop or node.recursive:
            raise SecurityError(f"a loop inside a loop is not allowed in a profile template (line {node.lineno})")
        if not _is_mapping_view(node.iter):
            raise SecurityError(f"a profile template loops only over a variable's `.items()`, `.keys()` or "
                                f"`.values()` (line {node.lineno})")
        for child in node.iter_child_nodes():
            _check(child, in_loop=True)
        return
    for child in node.iter_child_nodes():
        _check(child, in_loop)


def _is_mapping_view(node: nodes.Node) -> bool:
    """`name.items()`, `name.attr["key"].keys()` ...: a call (checked to be one of
    `MAPPING_METHODS`) on a variable, so a loop runs over what the harness gave, not over
    what the template built."""
    if not isinstance(node, nodes.Call) or not isinstance(node.node, nodes.Getattr):
        return False
    node = node.node.node
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Const):
            return False
        node = node.node
    return isinstance(node, nodes.Name)


@lru_cache(maxsize=256)
def _compiled(source: str) -> jinja2.Template:
    tree = _ENV.parse(source)
    _check(tree)
    return _ENV.from_string(tree)


def render_template(source: str, context: Mapping[str, Any]) -> str:
    """`source` rendered with `context`; `jinja2.TemplateError` (a `SecurityError` for what
    the rules refuse), `ArithmeticError`, `TypeError` or `ValueError` when it cannot be."""
    size = 0
    pieces = []
    for piece in _compiled(source).generate(context):
        size += len(piece)
        if size > MAX_RENDERED_CHARS:
            raise SecurityError(f"the rendered text would be longer than {MAX_RENDERED_CHARS} characters")
        pieces.append(piece)
    return "".join(pieces)
