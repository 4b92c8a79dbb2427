"""Which keys OpenAI accepts on input items and tools, read from the installed `openai` SDK.

The SDK's request TypedDicts are generated from OpenAI's spec, so `unknown_parameter` and
`missing_required_parameter` follow OpenAI as the SDK updates, not a list kept by hand.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from functools import cache

from openai.types.responses import response_create_params, response_input_item_param, tool_param

_TYPE_LITERAL = re.compile(r"Literal\[['\"]([^'\"]+)['\"]\]")


@dataclass(frozen=True)
class Shape:
    allowed: frozenset[str]
    required: frozenset[str]


def _annotation_text(annotation: object) -> str:
    return getattr(annotation, "__forward_arg__", annotation if isinstance(annotation, str) else repr(annotation))


def _shapes_of(union: object) -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for typed_dict in typing.get_args(union):
        annotations = {k: _annotation_text(v) for k, v in typed_dict.__annotations__.items()}
        match = _TYPE_LITERAL.search(annotations.get("type", ""))
        if not match:
            continue
        required = frozenset(k for k, text in annotations.items() if text.startswith("Required["))
        allowed = frozenset(annotations)
        if (known := shapes.get(match[1])) is not None:
            allowed, required = known.allowed | allowed, known.required & required
        shapes[match[1]] = Shape(allowed, required - {"type"})
    return shapes


@cache
def input_item_shapes() -> dict[str, Shape]:
    """Input item type -> its keys (`message` merges the SDK's three message shapes)."""
    return _shapes_of(response_input_item_param.ResponseInputItemParam)


@cache
def tool_shapes() -> dict[str, Shape]:
    return _shapes_of(tool_param.ToolParam)


@cache
def create_params() -> frozenset[str]:
    """Every top-level key `POST /v1/responses` accepts."""
    return frozenset(response_create_params.ResponseCreateParamsStreaming.__annotations__)
