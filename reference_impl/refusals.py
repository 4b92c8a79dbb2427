"""OpenAI's 400s as the gateway raises them: the violations of OpenAI's request description
(`openai_contract.violations`, `openai_contract.request_schema`) turned into `InvalidRequest`
at the gateway's edge, their wording left to the contract."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..openai_contract import request_schema, violations
from ..openai_contract.request_schema import RequestSchema
from .errors import InvalidRequest


def missing(param: str) -> InvalidRequest:
    return InvalidRequest.of(violations.missing(param))


def invalid_type(param: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest.of(violations.invalid_type(param, expected, value))


def invalid_value(param: str, value: Any, supported: Iterable[Any], *,
                  reported_at: str | None = None) -> InvalidRequest:
    return InvalidRequest.of(violations.invalid_value(param, value, supported, reported_at=reported_at))


def unknown(param: str, key: str, known: Iterable[str]) -> InvalidRequest:
    return InvalidRequest.of(violations.unknown(param, key, known))


@dataclass(frozen=True)
class BodyCheck:
    """One body's description as the gateway checks it: its first violation as the 400 it raises."""

    description: RequestSchema

    @property
    def parameters(self) -> frozenset[str]:
        return self.description.parameters

    @property
    def required(self) -> tuple[str, ...]:
        return self.description.required

    def first_violation(self, body: dict[str, Any]) -> InvalidRequest | None:
        """OpenAI's 400 for the first part of `body` that breaks the description, or None."""
        found = self.description.first_violation(body)
        return None if found is None else InvalidRequest.of(found)


@cache
def responses_schema() -> BodyCheck:
    return BodyCheck(request_schema.responses_schema())


@cache
def compact_schema() -> BodyCheck:
    return BodyCheck(request_schema.compact_schema())


@cache
def input_tokens_schema() -> BodyCheck:
    return BodyCheck(request_schema.input_tokens_schema())


@cache
def chat_schema() -> BodyCheck:
    return BodyCheck(request_schema.chat_schema())


@cache
def conversation_schemas() -> dict[str, BodyCheck]:
    return {name: BodyCheck(schema) for name, schema in request_schema.conversation_schemas().items()}


@cache
def vector_store_schemas() -> dict[str, BodyCheck]:
    return {name: BodyCheck(schema) for name, schema in request_schema.vector_store_schemas().items()}
