"""The reference gateway's loop runs its hosted tools. `file_search` over its own vector stores:
the official `openai` SDK uploads a file, builds a vector store and asks with the tool, streamed
and not; the model (scripted upstream) calls the tool as a function and cites with
`<|file-ID|>`, and the client gets OpenAI's items, events and `file_citation` annotations.
Hosted calls share `max_tool_calls` with MCP calls, and replayed hosted items (through
`previous_response_id`, a conversation, or stateless input) reach the model without a new search."""

from __future__ import annotations

import io
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from openai.types.responses import ResponseFileSearchToolCall, ResponseOutputMessage

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.judge.grammar import check_stream
from responses_parity.harness.wire.sse import parse_sse

from scripted_runs import scripted, upstream_requests

PARIS = b"Paris is the capital of France. It is known for the Eiffel Tower.\n"


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


@pytest.fixture
def paris_store(client: OpenAI) -> tuple[str, str]:
    """A vector store holding one uploaded file about Paris: (store id, file id)."""
    uploaded = client.files.create(file=("paris.txt", io.BytesIO(PARIS)), purpose="assistants")
    store = client.vector_stores.create(name="geography", file_ids=[uploaded.id])
    return store.id, uploaded.id


def turns(file_id: str) -> list[dict[str, Any]]:
    return [{"call": {"tool": "file_search", "arguments": {"queries": ["capital of France"]}}},
            {"text": f"The capital of France is Paris<|{file_id}|>."}]


def test_the_sdk_runs_file_search_with_results_and_a_citation(stack: Stack, client: OpenAI,
                                                               paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id))
    response = client.responses.create(
        model="m", input=f"What is the capital of France? {run_marker(run, 0)}",
        tools=[{"type": "file_search", "vector_store_ids": [store_id]}], include=["file_search_call.results"])
    call, message = response.output
    assert isinstance(call, ResponseFileSearchToolCall) and isinstance(message, ResponseOutputMessage)
    assert call.status == "completed" and call.queries == ["capital of France"] and call.id.startswith("fs_")
    assert call.results is not None and len(call.results) == 1
    hit = call.results[0]
    assert (hit.file_id, hit.filename, hit.text) == (file_id, "paris.txt", PARIS.decode().strip())
    assert hit.score is not None and 0 <= hit.score < 1
    text = message.content[0]
    assert text.type == "output_text" and text.text == "The capital of France is Paris."
    assert [a.model_dump() for a in text.annotations] == [
        {"type": "file_citation", "file_id": file_id, "filename": "paris.txt", "index": 30}]
    assert response.tools[0].model_dump() == {
        "type": "file_search", "vector_store_ids": [store_id], "filters": None, "max_num_results": 20,
        "ranking_options": {"ranker": "auto", "score_threshold": 0.0, "hybrid_search": None}}
    model_call, answer = upstream_requests(stack, run)
    assert "file_search" in model_call["offered_tools"]
    assert f"<|{file_id}|>" in answer["tool_outputs"][0] and "Eiffel Tower" in answer["tool_outputs"][0]


def test_the_sdk_streams_file_search_in_openais_order(stack: Stack, client: OpenAI,
                                                      paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id))
    with client.responses.stream(model="m", input=f"Capital of France? {run_marker(run, 0)}",
                                 tools=[{"type": "file_search", "vector_store_ids": [store_id]}]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [event.type for event in events]
    call_events = types[types.index("response.output_item.added"):types.index("response.output_item.done") + 1]
    assert call_events == ["response.output_item.added", "response.file_search_call.in_progress",
                           "response.file_search_call.searching", "response.file_search_call.completed",
                           "response.output_item.done"]
    added = events[types.index("response.output_item.added")]
    assert added.item.model_dump(exclude={"id"}) == {"type": "file_search_call", "status": "in_progress",
                                                     "queries": [], "results": None}
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "The capital of France is Paris." and "<|" not in deltas
    annotation_added = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert [(e.annotation_index, e.annotation.index) for e in annotation_added] == [(0, 30)]
    assert types.index("response.output_text.annotation.added") < types.index("response.output_text.done")
    call = final.output[0]
    assert isinstance(call, ResponseFileSearchToolCall) and call.results is None
    assert final.output[1].content[0].annotations[0].file_id == file_id


def test_the_stream_keeps_the_harness_grammar(stack: Stack, paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id))
    body = {"model": "m", "input": f"Capital? {run_marker(run, 0)}", "stream": True,
            "tools": [{"type": "file_search", "vector_store_ids": [store_id]}]}
    answer = httpx2.post(f"{stack.reference_url}/v1/responses", json=body, timeout=30)
    events = parse_sse(answer.text)
    assert [f.message for f in check_stream(events)] == []
    assert [e.type for e in events].count("response.output_text.annotation.added") == 1


def test_a_file_search_is_not_run_again_through_previous_response_id(stack: Stack, client: OpenAI,
                                                                     paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id), [{"text": "Still Paris."}])
    tools = [{"type": "file_search", "vector_store_ids": [store_id]}]
    first = client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}", tools=tools)
    client.vector_stores.files.delete(file_id, vector_store_id=store_id)  # a search now would find nothing
    second = client.responses.create(model="m", input="And again?", previous_response_id=first.id, tools=tools)
    assert [item.type for item in second.output] == ["message"]
    replayed = upstream_requests(stack, run)[-1]
    assert replayed["item_types"].count("function_call") == 1
    assert "Eiffel Tower" in replayed["tool_outputs"][0]


def test_stateless_input_carrying_a_file_search_call_is_replayed_from_its_results(
        stack: Stack, client: OpenAI, paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id))
    first = client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}", store=False,
                                    tools=[{"type": "file_search", "vector_store_ids": [store_id]}],
                                    include=["file_search_call.results"])
    again = scripted(stack, [{"text": "Paris, as found."}] * 4)  # the upstream counts the replayed turns too
    replayed = [item.model_dump(exclude_none=True) for item in first.output]
    assert replayed[0]["results"][0]["vector_store_id"] == store_id  # OpenAI's output has it, the SDK's input lacks it
    items = [{"role": "user", "content": f"Capital? {run_marker(again, 0)}"}, *replayed,
             {"role": "user", "content": "Sure?"}]
    answer = client.responses.create(model="m", input=items, store=False)
    assert answer.output[-1].content[0].text == "Paris, as found."
    seen = upstream_requests(stack, again)[-1]
    original = upstream_requests(stack, run)[1]["tool_outputs"][0]
    assert seen["tool_outputs"] == [original]


@pytest.mark.parametrize("result", [{"text": "Paris is in France."}, {}, {"file_id": "file-x", "score": 0.5}])
def test_a_replayed_file_search_result_may_lack_any_key_as_openais_description_allows(
        stack: Stack, client: OpenAI, result: dict[str, Any]) -> None:
    run = scripted(stack, [{"text": "Read."}] * 2)
    call = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["capital"],
            "results": [result]}
    answer = client.responses.create(model="m", input=[{"role": "user", "content": f"Q {run_marker(run, 0)}"},
                                                       call], store=False)
    assert answer.output[-1].content[0].text == "Read."
    read = upstream_requests(stack, run)[-1]["tool_outputs"][0]
    assert "[1]" in read and all(str(value) in read for key, value in result.items() if key != "score")


@pytest.mark.parametrize(("tool", "param"), [
    ({"type": "file_search", "vector_store_ids": ["vs_missing"]}, "tools[0].vector_store_ids[0]"),
    ({"type": "file_search", "vector_store_ids": [], "filters": {"type": "eq", "key": 3, "value": 1}},
     "tools[0].filters.key"),
    ({"type": "file_search", "vector_store_ids": [], "ranking_options": {"score_threshold": 2}},
     "tools[0].ranking_options.score_threshold"),
    ({"type": "file_search", "vector_store_ids": [], "max_num_results": 51}, "tools[0].max_num_results"),
])
def test_a_file_search_tool_the_gateway_cannot_run_is_refused_naming_the_param(
        stack: Stack, tool: dict[str, Any], param: str) -> None:
    answer = httpx2.post(f"{stack.reference_url}/v1/responses",
                         json={"model": "m", "input": "x", "tools": [tool], "stream": True}, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["param"] == param


def test_tool_choice_naming_file_search_forces_its_function_then_relaxes(stack: Stack, client: OpenAI,
                                                                         paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id))
    client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}", tool_choice={"type": "file_search"},
                            tools=[{"type": "file_search", "vector_store_ids": [store_id]}])
    first, second = upstream_requests(stack, run)
    assert first["tool_choice"] == {"type": "function", "name": "file_search"}
    assert second["tool_choice"] == "auto"


def test_a_client_function_keeps_the_name_file_search(stack: Stack, client: OpenAI,
                                                      paris_store: tuple[str, str]) -> None:
    store_id, _ = paris_store
    run = scripted(stack, [{"call": {"tool": "hosted_file_search", "arguments": {"queries": ["France"]}}},
                           {"text": "done"}])
    mine = {"type": "function", "name": "file_search", "parameters": {"type": "object", "properties": {}}}
    response = client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}",
                                       tools=[mine, {"type": "file_search", "vector_store_ids": [store_id]}])
    assert [item.type for item in response.output] == ["file_search_call", "message"]
    assert upstream_requests(stack, run)[0]["offered_tools"] == ["file_search", "hosted_file_search"]


def test_file_search_calls_count_against_max_tool_calls(stack: Stack, client: OpenAI,
                                                        paris_store: tuple[str, str]) -> None:
    store_id, _ = paris_store
    search = {"tool": "file_search", "arguments": {"queries": ["Paris"]}}
    run = scripted(stack, [{"calls": [search, search]}, {"text": "one search only"}])
    response = client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}", max_tool_calls=1,
                                       tools=[{"type": "file_search", "vector_store_ids": [store_id]}])
    assert [item.type for item in response.output] == ["file_search_call", "message"]
    final_turn = upstream_requests(stack, run)[-1]
    assert final_turn["offered_tools"] == [] and len(final_turn["tool_outputs"]) == 1


def test_invalid_arguments_fail_the_call_and_tell_the_model(stack: Stack, client: OpenAI,
                                                           paris_store: tuple[str, str]) -> None:
    store_id, _ = paris_store
    run = scripted(stack, [{"call": {"tool": "file_search", "arguments": {"queries": "not a list"}}},
                           {"text": "sorry"}])
    response = client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}",
                                       tools=[{"type": "file_search", "vector_store_ids": [store_id]}])
    assert response.output[0].status == "failed"
    told = upstream_requests(stack, run)[1]["tool_outputs"][0]
    assert told.startswith("The file search failed: invalid arguments for tool 'file_search'")


def test_tool_choice_naming_a_built_in_tool_the_request_lacks_is_refused(stack: Stack) -> None:
    answer = httpx2.post(f"{stack.reference_url}/v1/responses", timeout=30,
                         json={"model": "m", "input": "x", "tool_choice": {"type": "file_search"}})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tool_choice"


def test_a_file_search_in_a_conversation_is_replayed_not_run_again(stack: Stack, client: OpenAI,
                                                                    paris_store: tuple[str, str]) -> None:
    store_id, file_id = paris_store
    run = scripted(stack, turns(file_id), [{"text": "Still Paris."}])
    conversation = client.conversations.create()
    tools = [{"type": "file_search", "vector_store_ids": [store_id]}]
    client.responses.create(model="m", input=f"Capital? {run_marker(run, 0)}", tools=tools,
                            conversation=conversation.id)
    listed = [item for item in client.conversations.items.list(conversation.id, order="asc")
              if item.type == "file_search_call"]
    assert [item.results for item in listed] == [None]  # kept, shown only with include
    included = client.conversations.items.list(conversation.id, include=["file_search_call.results"])
    assert [result.file_id for item in included if item.type == "file_search_call"
            for result in item.results or []] == [file_id]
    client.vector_stores.files.delete(file_id, vector_store_id=store_id)  # a search now would find nothing
    second = client.responses.create(model="m", input="Sure?", tools=tools, conversation=conversation.id)
    assert [item.type for item in second.output] == ["message"]
    first_answer, replayed = upstream_requests(stack, run)[1:]
    assert replayed["item_types"].count("function_call") == 1
    assert replayed["tool_outputs"] == first_answer["tool_outputs"]


def test_hosted_and_mcp_calls_share_the_max_tool_calls_budget(stack: Stack, client: OpenAI,
                                                              paris_store: tuple[str, str]) -> None:
    store_id, _ = paris_store
    search = {"tool": "file_search", "arguments": {"queries": ["Paris"]}}
    run = scripted(stack, [{"calls": [search, {"tool": "add", "arguments": {"a": 2, "b": 3}}, search]},
                           {"text": "two calls ran"}])
    calc = {"type": "mcp", "server_label": "calc", "server_url": stack.mcp["calc"].for_run(run).url,
            "require_approval": "never"}
    response = client.responses.create(model="m", input=f"Both? {run_marker(run, 0)}", max_tool_calls=2,
                                       tools=[{"type": "file_search", "vector_store_ids": [store_id]}, calc])
    assert [item.type for item in response.output] == ["mcp_list_tools", "file_search_call", "mcp_call", "message"]
    assert len(upstream_requests(stack, run)[-1]["tool_outputs"]) == 2


def test_stateless_input_carrying_a_web_search_call_reaches_the_model_as_a_call_and_output(
        stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "As found before."}] * 3)  # the upstream counts the replayed turn too
    searched = {"type": "web_search_call", "id": "ws_0123456789abcdef", "status": "completed",
                "action": {"type": "search", "query": "weather in Paris",
                           "sources": [{"type": "url", "url": "https://example.org/weather"}]}}
    answer = client.responses.create(model="m", store=False, input=[
        {"role": "user", "content": f"Weather? {run_marker(run, 0)}"}, searched, {"role": "user", "content": "And?"}])
    assert answer.output[-1].content[0].text == "As found before."
    seen = upstream_requests(stack, run)[-1]
    assert "function_call" in seen["item_types"]
    assert seen["tool_outputs"] == ["The text of these web results was not kept.\n- https://example.org/weather"]
