"""OpenAI's names, read from the installed `openai` SDK's types: output and input item types
and each one's fields and statuses, stream event types, Response fields and statuses,
incomplete reasons, chat finish reasons; plus the few names real OpenAI traffic uses that
the SDK does not declare yet. Scenario validation checks every name a scenario uses against
these, so a typo is an error before anything runs, never an expectation that silently holds;
the schema checks use them to tell SDK lag from a target's own inventions.
"""

from __future__ import annotations

import typing
from functools import cache
from typing import Any

from openai.types.chat import ChatCompletion
from openai.types.responses import (
    Response, ResponseInputItem, ResponseOutputItem, ResponseStatus, ResponseStreamEvent,
)
from openai.types.responses.response import IncompleteDetails
from pydantic import BaseModel

__all__ = ["EVENT_TYPES_BEYOND_THE_SDK", "RESPONSE_FIELDS_BEYOND_THE_SDK", "chat_finish_reasons", "event_types",
           "incomplete_reasons", "input_item_types", "item_fields", "item_statuses", "output_item_types",
           "response_fields", "response_statuses", "sdk_event_types"]

EVENT_TYPES_BEYOND_THE_SDK = frozenset({"response.apply_patch_call_operation_diff.delta",
                                        "response.apply_patch_call_operation_diff.done"})
"""Event types real OpenAI streams carry that the installed SDK does not declare yet: an
`apply_patch` call's diff streams as `.delta` events ending in a `.done` with the whole diff."""


def _literals(annotation: Any) -> list[Any]:
    """The values of every `Literal` inside a type annotation."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in _literals(arg)]


def _members(union: Any) -> list[type[BaseModel]]:
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        return _members(args[0])
    return [arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)]


@cache
def _items_by_type() -> dict[str, list[type[BaseModel]]]:
    """Every item model (output and input), by the `type` values it takes."""
    models: dict[str, list[type[BaseModel]]] = {}
    for model in [*_members(ResponseOutputItem), *_members(ResponseInputItem)]:
        for value in _literals(model.model_fields["type"].annotation):
            if model not in models.setdefault(value, []):
                models[value].append(model)
    return models


@cache
def output_item_types() -> frozenset[str]:
    """Item types a Response's `output` may hold."""
    return frozenset(value for model in _members(ResponseOutputItem)
                     for value in _literals(model.model_fields["type"].annotation))


@cache
def input_item_types() -> frozenset[str]:
    """Item types a request's `input` (or a stored list of items) may hold, output ones included."""
    return frozenset(_items_by_type())


@cache
def sdk_event_types() -> frozenset[str]:
    """Every stream event type the installed SDK declares."""
    return frozenset(value for model in _members(ResponseStreamEvent)
                     for value in _literals(model.model_fields["type"].annotation))


def event_types() -> frozenset[str]:
    """Every stream event type OpenAI sends: the SDK's, and those it does not declare yet."""
    return sdk_event_types() | EVENT_TYPES_BEYOND_THE_SDK


@cache
def item_fields(item_type: str) -> frozenset[str]:
    """The fields an item of this type may carry (empty for a type the SDK does not know)."""
    return frozenset(name for model in _items_by_type().get(item_type, []) for name in model.model_fields)


@cache
def item_statuses(item_type: str) -> frozenset[str]:
    """The `status` values an item of this type may take (empty when it has no closed set)."""
    return frozenset(value for model in _items_by_type().get(item_type, [])
                     if "status" in model.model_fields
                     for value in _literals(model.model_fields["status"].annotation))


RESPONSE_FIELDS_BEYOND_THE_SDK = frozenset({"store", "billing", "presence_penalty", "frequency_penalty"})
"""Fields real OpenAI Response objects carry that the SDK's `Response` model does not declare:
every recorded Response echoes `store`; those recorded from late 2025 on also carry `billing`,
`presence_penalty` and `frequency_penalty`."""


@cache
def response_fields() -> frozenset[str]:
    return frozenset(Response.model_fields) | RESPONSE_FIELDS_BEYOND_THE_SDK


@cache
def response_statuses() -> frozenset[str]:
    return frozenset(_literals(ResponseStatus))


@cache
def incomplete_reasons() -> frozenset[str]:
    return frozenset(_literals(IncompleteDetails.model_fields["reason"].annotation))


@cache
def chat_finish_reasons() -> frozenset[str]:
    choice = typing.get_args(ChatCompletion.model_fields["choices"].annotation)[0]
    return frozenset(_literals(choice.model_fields["finish_reason"].annotation))
