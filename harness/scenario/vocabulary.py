"""OpenAI's names, read from the installed `openai` SDK's types: output and input item types
and each one's fields and statuses, stream event types, Response fields and statuses,
incomplete reasons, chat finish reasons; plus the few names real OpenAI traffic uses that
the SDK does not declare yet. Scenario validation checks every name a scenario uses against
these, so a typo is an error before anything runs, never an expectation that silently holds;
the schema checks use them to tell SDK lag from a target's own inventions.

Importing the SDK's types takes most of a second, so the names are read from it once and kept
in a cache file per SDK version (`json_cache`), as the SDK's schemas are: validating scenarios
then imports no SDK.
"""

from __future__ import annotations

import typing
from functools import cache
from pathlib import Path
from typing import Any

from ...openai_contract.json_cache import load_or_build, sdk_cache_file

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


def _members(union: Any) -> list[Any]:
    """The pydantic models a union of the SDK holds."""
    from pydantic import BaseModel

    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        return _members(args[0])
    return [arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)]


def _type_values(model: Any) -> list[str]:
    return _literals(model.model_fields["type"].annotation)


def derive_names() -> dict[str, Any]:
    """The names the installed SDK declares, as JSON (sorted lists): item types with each one's
    fields and statuses, event types, Response fields and statuses, incomplete and chat finish
    reasons."""
    from openai.types.chat import ChatCompletion
    from openai.types.responses import (Response, ResponseInputItem, ResponseOutputItem, ResponseStatus,
                                        ResponseStreamEvent)
    from openai.types.responses.response import IncompleteDetails

    items: dict[str, list[Any]] = {}
    for model in [*_members(ResponseOutputItem), *_members(ResponseInputItem)]:
        for value in _type_values(model):
            if model not in items.setdefault(value, []):
                items[value].append(model)
    choice = typing.get_args(ChatCompletion.model_fields["choices"].annotation)[0]
    return {
        "output_item_types": sorted({value for model in _members(ResponseOutputItem) for value in _type_values(model)}),
        "item_fields": {kind: sorted({name for model in models for name in model.model_fields})
                        for kind, models in items.items()},
        "item_statuses": {kind: sorted({value for model in models if "status" in model.model_fields
                                        for value in _literals(model.model_fields["status"].annotation)})
                          for kind, models in items.items()},
        "event_types": sorted({value for model in _members(ResponseStreamEvent) for value in _type_values(model)}),
        "response_fields": sorted(Response.model_fields),
        "response_statuses": sorted(_literals(ResponseStatus)),
        "incomplete_reasons": sorted(_literals(IncompleteDetails.model_fields["reason"].annotation)),
        "chat_finish_reasons": sorted(_literals(choice.model_fields["finish_reason"].annotation)),
    }


def names_cache_file() -> Path:
    """Where the names of the installed SDK, as this module reads them, are kept."""
    return sdk_cache_file("sdk-names", __file__)


def _complete(value: Any) -> bool:
    lists = ("output_item_types", "event_types", "response_fields", "response_statuses", "incomplete_reasons",
             "chat_finish_reasons")
    return isinstance(value, dict) and all(isinstance(value.get(key), list) for key in lists) and \
        all(isinstance(value.get(key), dict) for key in ("item_fields", "item_statuses"))


@cache
def _names() -> dict[str, Any]:
    """`derive_names()`, read from the cache file when it holds them, else derived and saved there."""
    return load_or_build(names_cache_file(), derive_names, _complete)


@cache
def output_item_types() -> frozenset[str]:
    """Item types a Response's `output` may hold."""
    return frozenset(_names()["output_item_types"])


@cache
def input_item_types() -> frozenset[str]:
    """Item types a request's `input` (or a stored list of items) may hold, output ones included."""
    return frozenset(_names()["item_fields"])


@cache
def sdk_event_types() -> frozenset[str]:
    """Every stream event type the installed SDK declares."""
    return frozenset(_names()["event_types"])


def event_types() -> frozenset[str]:
    """Every stream event type OpenAI sends: the SDK's, and those it does not declare yet."""
    return sdk_event_types() | EVENT_TYPES_BEYOND_THE_SDK


@cache
def item_fields(item_type: str) -> frozenset[str]:
    """The fields an item of this type may carry (empty for a type the SDK does not know)."""
    return frozenset(_names()["item_fields"].get(item_type, []))


@cache
def item_statuses(item_type: str) -> frozenset[str]:
    """The `status` values an item of this type may take (empty when it has no closed set)."""
    return frozenset(_names()["item_statuses"].get(item_type, []))


RESPONSE_FIELDS_BEYOND_THE_SDK = frozenset({"store", "billing", "presence_penalty", "frequency_penalty"})
"""Fields real OpenAI Response objects carry that the SDK's `Response` model does not declare:
every recorded Response echoes `store`; those recorded from late 2025 on also carry `billing`,
`presence_penalty` and `frequency_penalty`."""


@cache
def response_fields() -> frozenset[str]:
    return frozenset(_names()["response_fields"]) | RESPONSE_FIELDS_BEYOND_THE_SDK


@cache
def response_statuses() -> frozenset[str]:
    return frozenset(_names()["response_statuses"])


@cache
def incomplete_reasons() -> frozenset[str]:
    return frozenset(_names()["incomplete_reasons"])


@cache
def chat_finish_reasons() -> frozenset[str]:
    return frozenset(_names()["chat_finish_reasons"])
