"""A fixed budget of hostile requests against the reference gateway over HTTP, per endpoint
family: none gets a 5xx, every 4xx is OpenAI's envelope, nothing OpenAI's description refuses is
accepted (`request_mutations.verdict`). JSON bodies are mutated from seeds OpenAI accepts; the
stored-response routes get query strings of any values; uploads get forms of any parts.
tests/benchmarks/request_fuzz.py runs a large budget on the Responses surface;
tests/harness/test_probe_full_set.py (CI) every generated probe."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from request_mutations import (FAMILIES, answered, form_refused, forms, probed_gateway, queries, query_refused,
                               surface_bodies, verdict)

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.probe.forms import FORM, multipart
from responses_parity.harness.probe.objects import create_objects, fill, filled_body
from responses_parity.harness.probe.surfaces import BodySurface, Route, filled, routes

BUDGET = 60
"""Requests per family: a few seconds each."""
SETTINGS = settings(max_examples=BUDGET, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
QUERIED = [route for route in routes() if route.query]


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> Iterator[ServerThread]:
    server = probed_gateway(stack.upstream_url or "", stack.search_url)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def objects(gateway: ServerThread) -> dict[str, str]:
    """The objects requests name (a stored response, a vector store, ...), made on the gateway."""
    async def made() -> dict[str, str]:
        async with httpx2.AsyncClient(timeout=30) as http:
            return await create_objects(http, Target("reference", gateway.url), "Hi")

    return asyncio.run(made())


@pytest.fixture(scope="module")
def client(gateway: ServerThread) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"{gateway.url}/v1", timeout=30) as http:
        yield http


def _path(surface: BodySurface, objects: dict[str, str]) -> str:
    endpoint = "chat/completions" if surface.endpoint == "chat" else surface.endpoint
    return f"/{endpoint}{fill(surface.suffix, objects)}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
@SETTINGS
@given(data=st.data())
def test_a_hostile_body_is_answered_as_openai_would(client: httpx2.Client, objects: dict[str, str], family: str,
                                                   data: st.DataObject) -> None:
    surface, body = data.draw(surface_bodies(family))
    sent = filled_body(body, objects)
    answer = client.post(_path(surface, objects), json=sent)
    assert verdict(surface.refuses(sent), answer) is None, (surface.name, sent)


@SETTINGS
@given(data=st.data())
def test_a_hostile_query_is_answered_as_openai_would(client: httpx2.Client, objects: dict[str, str],
                                                    data: st.DataObject) -> None:
    route: Route = data.draw(st.sampled_from(QUERIED))
    query: dict[str, Any] = data.draw(queries(route.query))
    body = {"items": [{"role": "user", "content": "x"}]} if route.method == "POST" else None
    answer = client.request(route.method, f"/{route.endpoint}{fill(filled(route), objects)}", params=query, json=body)
    assert verdict(query_refused(route.query, query), answer) is None, (route.route, query)


@SETTINGS
@given(parts=forms())
def test_a_hostile_upload_is_answered_as_openai_would(client: httpx2.Client, parts: list[Any]) -> None:
    answer = client.post("/files", content=multipart(parts), headers={"content-type": FORM})
    assert verdict(form_refused(parts), answer) is None, parts
    if answer.status_code < 300:
        assert answered(answer).body == "json" and answer.json()["object"] == "file"
