"""A fixed budget of hostile request bodies against the reference gateway over HTTP: none gets
a 5xx, every 4xx is OpenAI's envelope, nothing OpenAI refuses is accepted
(`request_mutations.verdict`). tests/benchmarks/request_fuzz.py runs a large budget."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from request_mutations import mutated_bodies, no_reach_gateway, verdict

from responses_parity.harness.stack import ServerThread, Stack

BUDGET = 150


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> Iterator[ServerThread]:
    server = no_reach_gateway(stack.upstream_url or "")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(gateway: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        yield http


@settings(max_examples=BUDGET, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=mutated_bodies())
def test_a_hostile_body_is_answered_as_openai_would(client: httpx.Client, body: dict[str, Any]) -> None:
    answer = client.post("/v1/responses", json=body)
    assert verdict(body, answer) is None
