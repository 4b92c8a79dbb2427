"""Compaction and token counts in the reference gateway, driven with the official `openai` SDK:
`POST /v1/responses/compact` (stateless, over a `previous_response_id` chain, over a window that
starts with a compaction item), a compaction item read back as input (what the model then
reads), `context_management` on create (streamed and not), a sealed item refused once changed
and opened after a restart, and `POST /v1/responses/input_tokens` against the counts OpenAI
recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openai import BadRequestError, OpenAI
from scripted_runs import scripted, upstream_requests

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.compaction import SUMMARY_PREFIX

LONG_INPUT = " ".join(f"Note {number}: the meeting moved to room {number}." for number in range(120))
"""About 1,450 tokens: past the smallest `compact_threshold` OpenAI takes (1,000)."""


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="k", max_retries=0)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _summaries(stack: Stack, run: str, turn: int) -> list[str]:
    """The developer messages (summaries) the model read in a turn of the run."""
    body = upstream_requests(stack, run)[turn]["body"]
    return [item["content"] for item in body["input"] if item.get("role") == "developer"]


def test_compact_keeps_the_user_messages_and_seals_the_rest(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "They greeted each other."}])
    compacted = client.responses.compact(model="parity-model", instructions="Summarize very briefly", input=[
        _user(f"Hello! {run_marker(run, 0)}"), {"role": "assistant", "content": "Hello! How can I help?"}])
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    assert compacted.output[0].role == "user" and compacted.output[0].content[0].type == "input_text"
    assert compacted.output[1].id.startswith("cmp_") and compacted.output[1].encrypted_content.startswith("gAAAAA")
    assert "They greeted" not in compacted.output[1].encrypted_content  # sealed, not encoded
    assert compacted.usage.total_tokens == compacted.usage.input_tokens + compacted.usage.output_tokens
    summary_turn = upstream_requests(stack, run)[0]["body"]
    assert [item.get("role") for item in summary_turn["input"]] == ["developer", "user", "assistant"]


def test_compact_walks_the_chain_and_folds_an_earlier_compaction_in(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "4"}], [{"text": "Asked 2+2 and 3+3."}], [{"text": "6"}],
                   [{"text": "Asked 2+2, 3+3, 4+4."}])
    first = client.responses.create(model="parity-model", input=f"What is 2+2? {run_marker(run, 0)}")
    compacted = client.responses.compact(model="parity-model", previous_response_id=first.id,
                                         input=[_user(f"And 3+3? {run_marker(run, 1)}")])
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    window = [compacted.output[-1].model_dump(exclude_none=True), _user(f"And 4+4? {run_marker(run, 2)}")]
    later = client.responses.create(model="parity-model", input=window)
    again = client.responses.compact(model="parity-model", previous_response_id=later.id, input=[])
    assert [item.type for item in again.output] == ["message", "compaction"]  # only what came after the summary
    assert again.output[0].content[0].text.startswith("And 4+4?")
    assert again.output[-1].id != compacted.output[-1].id
    assert _summaries(stack, run, 3) == [f"{SUMMARY_PREFIX}Asked 2+2 and 3+3."]  # the earlier summary, folded in


def test_a_compaction_item_as_input_is_what_the_model_reads_of_the_past(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "Asked about Paris."}], [{"text": "Yes."}])
    compacted = client.responses.compact(model="parity-model", input=[_user(f"Paris? {run_marker(run, 0)}")])
    item = compacted.output[-1].model_dump(exclude_none=True)
    answer = client.responses.create(model="parity-model", input=[item, _user(f"Still there? {run_marker(run, 1)}")])
    assert answer.status == "completed"
    assert _summaries(stack, run, 1) == [f"{SUMMARY_PREFIX}Asked about Paris."]


def test_a_changed_compaction_item_is_refused_as_openai_refuses_it(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "Summary."}])
    item = client.responses.compact(model="parity-model", input=f"Hi {run_marker(run, 0)}").output[-1]
    token = item.encrypted_content
    changed = token[:-8] + ("A" if token[-8] != "A" else "B") + token[-7:]
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="parity-model", input=[{"type": "compaction", "encrypted_content": changed},
                                                             _user("Go on.")])
    error = refused.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"], error["type"]) == ("invalid_encrypted_content", None,
                                                               "invalid_request_error")
    assert error["message"] == f"The encrypted content {changed[:4]}...{changed[-4:]} could not be verified."


def test_a_sealed_item_opens_after_a_restart_and_not_on_another_gateway(stack: Stack, tmp_path: Path) -> None:
    def gateway(store: Path) -> ServerThread:
        return ServerThread(build_gateway_app(reference_config(stack.upstream_url or "",
                                                               store_path=str(store)))).start()

    run = scripted(stack, [{"text": "Summary."}], [{"text": "Again."}])
    first = gateway(tmp_path / "gateway.db")
    try:
        item = httpx2.post(f"{first.url}/v1/responses/compact", json={
            "model": "m", "input": f"Hi {run_marker(run, 0)}"}).json()["output"][-1]
    finally:
        first.stop()
    replay = {"model": "m", "input": [item, _user(f"Go on {run_marker(run, 1)}")]}
    for store, status in ((tmp_path / "gateway.db", 200), (tmp_path / "another.db", 400)):
        restarted = gateway(store)
        try:
            assert httpx2.post(f"{restarted.url}/v1/responses", json=replay).status_code == status
        finally:
            restarted.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_context_management_ends_a_response_with_a_compaction_item(stack: Stack, client: OpenAI,
                                                                   stream: bool) -> None:
    run = scripted(stack, [{"text": "Noted."}, {"text": "Rooms of 120 notes."}], [{"text": "Room 7."}])
    request: dict[str, Any] = {"model": "parity-model", "input": f"{LONG_INPUT} {run_marker(run, 0)}",
                               "context_management": [{"type": "compaction", "compact_threshold": 1000}]}
    if stream:
        events = list(client.responses.create(stream=True, **request))
        items = [(event.type, event.item.type) for event in events if event.type.startswith("response.output_item")]
        assert items[-2:] == [("response.output_item.added", "compaction"), ("response.output_item.done", "compaction")]
        response = events[-1].response
    else:
        response = client.responses.create(**request)
    assert [item.type for item in response.output] == ["message", "compaction"]
    assert response.output[0].content[0].text == "Noted."
    later = client.responses.create(model="parity-model", previous_response_id=response.id,
                                    input=f"Which room? {run_marker(run, 1)}")
    assert later.output_text == "Room 7."  # the turn after the summary: the summary holds the turns before it
    assert _summaries(stack, run, 2) == [f"{SUMMARY_PREFIX}Rooms of 120 notes."]  # the compacted window
    read = [item.get("role") for item in upstream_requests(stack, run)[2]["body"]["input"]]
    assert read == ["user", "developer", "user"]  # the answer "Noted." was folded into the summary


def test_below_its_threshold_a_response_is_not_compacted(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "Short."}])
    response = client.responses.create(model="parity-model", input=f"Hi {run_marker(run, 0)}",
                                       context_management=[{"type": "compaction", "compact_threshold": 1000}])
    assert [item.type for item in response.output] == ["message"]
    assert len(upstream_requests(stack, run)) == 1


WEATHER = {"type": "function", "name": "get_weather", "description": "Get the weather for a location",
           "strict": False, "parameters": {"type": "object", "additionalProperties": False,
                                           "properties": {"location": {"type": "string"}}}}


@pytest.mark.parametrize(("request_fields", "openai_counted"), [
    ({"input": [_user("The quick brown fox jumps over the lazy dog.")]}, 18),
    ({"input": [_user("")], "instructions": "Follow the system instructions."}, 16),
    ({"input": [_user("What is the weather in Paris?")], "tools": [WEATHER], "tool_choice": "required"}, 51),
])
def test_input_tokens_counts_as_openai_counted(client: OpenAI, request_fields: dict[str, Any],
                                               openai_counted: int) -> None:
    """The counts OpenAI answered for these requests (gpt-4.1-mini, recorded by pydantic-ai)."""
    counted = client.responses.input_tokens.count(model="gpt-4.1-mini", **request_fields)
    assert (counted.object, counted.input_tokens) == ("response.input_tokens", openai_counted)


def test_input_tokens_counts_a_chain_with_its_new_input(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "Four."}])
    first = client.responses.create(model="parity-model", input=f"What is 2+2? {run_marker(run, 0)}")
    alone = client.responses.input_tokens.count(input="And 3+3?").input_tokens
    chained = client.responses.input_tokens.count(previous_response_id=first.id, input="And 3+3?").input_tokens
    assert chained > alone + 3


@pytest.mark.parametrize(("path", "body", "code", "param"), [
    ("/v1/responses/compact", {"input": "x"}, "missing_required_parameter", "model"),
    ("/v1/responses/compact", {"model": "m", "input": "x", "store": True}, "unknown_parameter", "store"),
    ("/v1/responses/input_tokens", {"input": "x", "stream": True}, "unknown_parameter", "stream"),
    ("/v1/responses/input_tokens", {"input": "x", "previous_response_id": "resp_1", "conversation": "conv_1"},
     "mutually_exclusive_parameters", None),
    ("/v1/responses/input_tokens", {"previous_response_id": "resp_nowhere"}, "previous_response_not_found",
     "previous_response_id"),
])
def test_what_openai_refuses_there_is_refused(stack: Stack, path: str, body: dict[str, Any], code: str,
                                              param: str | None) -> None:
    answer = httpx2.post(f"{stack.reference_url}{path}", content=json.dumps(body))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)
