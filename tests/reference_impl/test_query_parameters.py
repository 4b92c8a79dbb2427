"""Query parameters are checked as OpenAI's description types them, on every route that takes
them: an `include` value OpenAI does not describe, a boolean or an integer that is not one, is a
400 naming the parameter (each was accepted and ignored)."""

from __future__ import annotations

import httpx2
import pytest

from responses_parity.harness.engine.stack import Stack


@pytest.fixture(scope="module")
def objects(stack: Stack) -> dict[str, str]:
    base = f"{stack.reference_url}/v1"
    response = httpx2.post(f"{base}/responses", json={"model": "m", "input": "hi"}, timeout=30).json()
    conversation = httpx2.post(f"{base}/conversations", json={"items": [{"role": "user", "content": "hi"}]},
                               timeout=30).json()
    item = httpx2.get(f"{base}/conversations/{conversation['id']}/items", timeout=30).json()["data"][0]
    return {"response": response["id"], "conversation": conversation["id"], "item": item["id"]}


ROUTES = ("GET /responses/{response}", "GET /responses/{response}/input_items",
          "GET /conversations/{conversation}/items", "GET /conversations/{conversation}/items/{item}",
          "POST /conversations/{conversation}/items")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("query", [{"include": "bogus"}, {"include[]": "file_search_call.results2"}])
def test_an_include_openai_does_not_describe_is_a_400(stack: Stack, objects: dict[str, str], route: str,
                                                     query: dict[str, str]) -> None:
    method, path = route.split(" ")
    body = {"items": [{"role": "user", "content": "x"}]} if method == "POST" else None
    url = f"{stack.reference_url}/v1{path.format(**objects)}"
    answer = httpx2.request(method, url, params=query, json=body, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "include"
    described = httpx2.request(method, url, params={"include": "file_search_call.results"}, json=body, timeout=30)
    assert described.status_code == 200, described.text


@pytest.mark.parametrize(("query", "param"), [
    ({"starting_after": "abc"}, "starting_after"), ({"starting_after": "9" * 5000}, "starting_after"),
    ({"starting_after": "1.5"}, "starting_after"), ({"include_obfuscation": "maybe"}, "include_obfuscation"),
    ({"stream": "yes"}, "stream"),
])
def test_a_retrieve_query_of_the_wrong_type_is_a_400(stack: Stack, objects: dict[str, str], query: dict[str, str],
                                                    param: str) -> None:
    answer = httpx2.get(f"{stack.reference_url}/v1/responses/{objects['response']}", params=query, timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, "invalid_type") and len(error["message"]) < 200
