"""The reference gateway's loop runs `web_search` through its provider, against the search
fixture: the model (scripted upstream) calls the tool as a function and cites a page as a
markdown link; the client gets OpenAI's `web_search_call` items and phases, `url_citation`
annotations spanning the link, `action.sources` with `include`; a search that fails is a failed
item the model is told about; a replayed search is never run again; the chat surface offers it
from configuration and annotates as OpenAI's chat API does."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from openai.types.responses import ResponseFunctionWebSearch

from responses_parity.fixtures.upstream.script import new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.judge.grammar import check_stream
from responses_parity.harness.wire.sse import parse_sse
from responses_parity.reference_impl import build_gateway_app

from scripted_runs import scripted, upstream_requests

PAGE = {"url": "https://weather.example.org/paris", "title": "Paris weather", "snippet": "Sunny, 21 degrees."}
OTHER = {"url": "https://news.example.org/x", "title": "Unrelated", "snippet": "Not cited."}


def searched_for(stack: Stack, steps_of: Any) -> tuple[str, str]:
    """A run whose query (unique to it: searches carry no run token) finds PAGE and OTHER; the
    model's steps are `steps_of(query)`. Returns (run, query)."""
    run = new_run_token()
    query = f"weather in Paris {run}"
    httpx2.put(f"{stack.search_url}/__parity/runs/{run}", json={query: [PAGE, OTHER]}).raise_for_status()
    return scripted(stack, *steps_of(query), run=run), query


def one_search(query: str) -> list[list[dict[str, Any]]]:
    return [[{"call": {"tool": "web_search", "arguments": {"query": query}}},
             {"text": f"It is sunny ([Paris weather]({PAGE['url']}))."}]]


def searches(stack: Stack, run: str) -> list[dict[str, Any]]:
    return httpx2.get(f"{stack.search_url}/__parity/runs/{run}/searches").json()["searches"]


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


def test_the_sdk_gets_a_web_search_call_and_a_url_citation(stack: Stack, client: OpenAI) -> None:
    run, query = searched_for(stack, one_search)
    response = client.responses.create(
        model="m", input=f"Weather? {run_marker(run, 0)}", include=["web_search_call.action.sources"],
        tools=[{"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}])
    call, message = response.output
    assert isinstance(call, ResponseFunctionWebSearch) and call.status == "completed" and call.id.startswith("ws_")
    assert call.action.model_dump(exclude_none=True) == {
        "type": "search", "query": query,
        "sources": [{"type": "url", "url": PAGE["url"]}, {"type": "url", "url": OTHER["url"]}]}
    text = message.content[0]
    link = f"([Paris weather]({PAGE['url']}))"  # the parentheses around the link are cited too (as OpenAI's)
    start = text.text.index(link)
    assert [a.model_dump() for a in text.annotations] == [{"type": "url_citation", "start_index": start,
                                                           "end_index": start + len(link), "title": PAGE["title"],
                                                           "url": PAGE["url"]}]
    assert response.tool_usage is not None and response.tool_usage.web_search.num_requests == 1
    [search] = searches(stack, run)
    assert (search["query"], search["max_results"], search["allowed_domains"]) == (query, 5, ["example.org"])
    output = upstream_requests(stack, run)[1]["tool_outputs"][0]
    assert PAGE["url"] in output and PAGE["snippet"] in output and "[title](url)" in output


def test_without_include_the_action_has_no_sources(stack: Stack, client: OpenAI) -> None:
    run, query = searched_for(stack, one_search)
    response = client.responses.create(model="m", input=f"Weather? {run_marker(run, 0)}",
                                       tools=[{"type": "web_search_preview"}])
    assert response.output[0].action.model_dump(exclude_none=True) == {"type": "search", "query": query}
    assert response.model_dump()["tools"][0]["type"] == "web_search_preview"


def test_the_stream_follows_openais_order_and_the_harness_grammar(stack: Stack) -> None:
    run, _ = searched_for(stack, one_search)
    body = {"model": "m", "input": f"Weather? {run_marker(run, 0)}", "stream": True,
            "tools": [{"type": "web_search"}]}
    events = parse_sse(httpx2.post(f"{stack.reference_url}/v1/responses", json=body, timeout=30).text)
    assert [f.message for f in check_stream(events)] == []
    types = [event.type for event in events]
    assert types[2:7] == ["response.output_item.added", "response.web_search_call.in_progress",
                          "response.web_search_call.searching", "response.web_search_call.completed",
                          "response.output_item.done"]
    assert events[2].payload is not None and events[2].payload["item"]["action"] == {"type": "search"}
    assert events[0].payload is not None and events[0].payload["response"]["tools"] == [{  # as OpenAI echoes it
        "type": "web_search", "filters": None, "search_context_size": "medium",
        "user_location": {"type": "approximate", "city": None, "country": "US", "region": None, "timezone": None}}]
    annotated = types.index("response.output_text.annotation.added")
    assert annotated < types.index("response.output_text.done")


def test_a_failed_search_is_a_failed_item_and_the_model_is_told(stack: Stack) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or "", nowhere))).start()
    try:
        run = scripted(stack, [{"call": {"tool": "web_search", "arguments": {"query": "q"}}},
                               {"text": "I could not search."}])
        response = OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0).responses.create(
            model="m", input=f"Weather? {run_marker(run, 0)}", tools=[{"type": "web_search"}])
    finally:
        server.stop()
    assert response.status == "completed" and response.output[0].status == "failed"
    told = upstream_requests(stack, run)[1]["tool_outputs"][0]
    assert told.startswith("The web search failed: ") and "could not be reached" in told


def test_web_search_without_a_provider_is_refused_naming_the_tool(stack: Stack) -> None:
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()
    try:
        answer = httpx2.post(f"{server.url}/v1/responses", timeout=30, json={
            "model": "m", "input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "web_search"}]})
    finally:
        server.stop()
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tools[1]"


def test_a_search_is_not_run_again_through_previous_response_id(stack: Stack, client: OpenAI) -> None:
    run, _ = searched_for(stack, lambda query: [*one_search(query), [{"text": "Still sunny."}]])
    tools = [{"type": "web_search"}]
    first = client.responses.create(model="m", input=f"Weather? {run_marker(run, 0)}", tools=tools)
    second = client.responses.create(model="m", input="Sure?", previous_response_id=first.id, tools=tools)
    assert [item.type for item in second.output] == ["message"]
    assert len(searches(stack, run)) == 1
    assert PAGE["snippet"] in upstream_requests(stack, run)[-1]["tool_outputs"][0]


def test_a_search_in_a_conversation_reads_again_as_the_model_read_it(stack: Stack, client: OpenAI) -> None:
    """A conversation keeps the pages (listings show only `{type, url}` sources, and only with
    `include`); the next turn reads the same output, and nothing is searched again."""
    run, _ = searched_for(stack, lambda query: [*one_search(query), [{"text": "Still sunny."}]])
    conversation = client.conversations.create()
    tools = [{"type": "web_search"}]
    client.responses.create(model="m", input=f"Weather? {run_marker(run, 0)}", tools=tools,
                            conversation=conversation.id)
    plain = [item for item in client.conversations.items.list(conversation.id) if item.type == "web_search_call"]
    assert [item.action.model_dump(exclude_none=True).get("sources") for item in plain] == [None]
    included = client.conversations.items.list(conversation.id, include=["web_search_call.action.sources"])
    assert [item.model_dump()["action"]["sources"] for item in included if item.type == "web_search_call"] == [
        [{"type": "url", "url": PAGE["url"]}, {"type": "url", "url": OTHER["url"]}]]
    second = client.responses.create(model="m", input="Sure?", tools=tools, conversation=conversation.id)
    assert [item.type for item in second.output] == ["message"]
    assert len(searches(stack, run)) == 1
    first_answer, replayed = upstream_requests(stack, run)[1:]
    assert replayed["tool_outputs"] == first_answer["tool_outputs"] and OTHER["snippet"] in replayed["tool_outputs"][0]


@pytest.fixture
def chat_gateway(stack: Stack) -> Iterator[str]:
    config = reference_config(stack.upstream_url or "", stack.search_url, chat_hosted_tools=({"type": "web_search"},))
    server = ServerThread(build_gateway_app(config)).start()
    try:
        yield server.url
    finally:
        server.stop()


def test_a_chat_answer_carries_url_citations_as_openais_chat_api(stack: Stack, chat_gateway: str) -> None:
    run, _ = searched_for(stack, one_search)
    completion = OpenAI(base_url=f"{chat_gateway}/v1", api_key="k", max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"Weather? {run_marker(run, 0)}"}])
    message = completion.choices[0].message
    link = f"([Paris weather]({PAGE['url']}))"  # the parentheses around the link are cited too
    start = (message.content or "").index(link)
    assert [a.model_dump() for a in message.annotations or []] == [{"type": "url_citation", "url_citation": {
        "start_index": start, "end_index": start + len(link), "title": PAGE["title"], "url": PAGE["url"]}}]
