"""The reference gateway's Response carries what OpenAI's newest recorded Responses carry (Aug
2026): every top-level field, with OpenAI's values where the request leaves them open; text,
reasoning and function tools echoed as OpenAI echoes them. The official SDK, validating
strictly, accepts it. Streamed, it carries what OpenAI's streams carry: the tier asked for until
the end, no billing, `obfuscation` on deltas, function call events without the name, and reasoning
items with an empty `content`. Any text of the model's survives being written, even one no UTF-8
can hold."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from openai.types.responses import Response

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.stack import Stack

from scripted_runs import upstream_requests

NEWEST_OPENAI_FIELDS = frozenset({
    "background", "billing", "completed_at", "created_at", "error", "frequency_penalty", "id", "incomplete_details",
    "instructions", "max_output_tokens", "max_tool_calls", "metadata", "model", "moderation", "object", "output",
    "parallel_tool_calls", "presence_penalty", "previous_response_id", "prompt_cache_key", "prompt_cache_retention",
    "reasoning", "safety_identifier", "service_tier", "status", "store", "temperature", "text", "tool_choice",
    "tool_usage", "tools", "top_logprobs", "top_p", "truncation", "usage", "user",
})
"""The top-level fields every Response recorded from OpenAI in August 2026 has."""


def create(stack: Stack, **fields: Any) -> dict[str, Any]:
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Hi."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    body = {"model": "m", "input": f"Hello {run_marker(run, 0)}"} | fields
    answer = httpx2.post(f"{stack.reference_url}/v1/responses", json=body, timeout=30)
    answer.raise_for_status()
    return answer.json()


def test_every_field_of_openais_newest_responses_with_its_default(stack: Stack) -> None:
    response = create(stack)
    assert set(response) >= NEWEST_OPENAI_FIELDS, sorted(NEWEST_OPENAI_FIELDS - set(response))
    assert {key: response[key] for key in ("billing", "frequency_penalty", "presence_penalty", "moderation",
                                           "prompt_cache_retention", "service_tier", "truncation")} == {
        "billing": {"payer": "developer"}, "frequency_penalty": 0.0, "presence_penalty": 0.0, "moderation": None,
        "prompt_cache_retention": None, "service_tier": "default", "truncation": "disabled"}
    assert response["tool_usage"]["web_search"] == {"num_requests": 0}
    assert response["usage"]["input_tokens_details"] == {"cache_write_tokens": 0, "cached_tokens": 0}


def test_the_strict_sdk_accepts_it(stack: Stack) -> None:
    client = OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0,
                    _strict_response_validation=True)
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Hi."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    assert isinstance(client.responses.create(model="m", input=f"Hello {run_marker(run, 0)}"), Response)


@pytest.mark.parametrize(("sent", "echoed"), [
    ({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
     {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
      "additionalProperties": False, "required": ["a", "b"]}),
    ({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
     {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
      "additionalProperties": False}),
])
def test_a_function_without_strict_is_echoed_strict(stack: Stack, sent: dict[str, Any], echoed: dict[str, Any]) -> None:
    [tool] = create(stack, tools=[{"type": "function", "name": "f", "parameters": sent}])["tools"]
    assert (tool["strict"], tool["parameters"]) == (True, echoed)
    [loose] = create(stack, tools=[{"type": "function", "name": "f", "parameters": sent, "strict": False}])["tools"]
    assert (loose["strict"], loose["parameters"]) == (False, sent)
    assert tool["output_schema"] is None  # echoed as null when not sent, as OpenAI's since July 2026
    [typed] = create(stack, tools=[{"type": "function", "name": "f", "parameters": sent,
                                    "output_schema": sent}])["tools"]
    assert typed["output_schema"] == sent


def test_reasoning_and_text_are_echoed_as_openai_echoes_them(stack: Stack) -> None:
    response = create(stack, reasoning={"summary": "auto"},
                      text={"format": {"type": "json_schema", "name": "N", "schema": {"type": "object"}}})
    assert response["reasoning"] == {"effort": None, "summary": "detailed"}
    assert response["text"] == {"format": {"type": "json_schema", "description": None, "name": "N",
                                           "schema": {"type": "object"}}, "verbosity": "medium"}


def streamed(stack: Stack, turn: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[turn]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    client = OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)
    with client.responses.create(model="m", input=f"Hello {run_marker(run, 0)}", stream=True, **fields) as events:
        return [event.model_dump(exclude_unset=True) for event in events]


def test_a_stream_carries_the_tier_asked_for_until_it_ends_and_no_billing(stack: Stack) -> None:
    responses = {event["type"]: event["response"] for event in streamed(stack, {"text": "Hi."}) if "response" in event}
    assert {kind: response["service_tier"] for kind, response in responses.items()} == {
        "response.created": "auto", "response.in_progress": "auto", "response.completed": "default"}
    assert not any("billing" in response or "conversation" in response for response in responses.values())
    assert "conversation" not in create(stack)


def test_a_function_calls_arguments_done_event_has_no_name(stack: Stack) -> None:
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]
    [done] = [event for event in streamed(stack, {"call": {"tool": "f", "arguments": {}}}, tools=tools)
              if event["type"] == "response.function_call_arguments.done"]
    assert "name" not in done and done["arguments"] == "{}"


def test_deltas_carry_obfuscation_unless_the_stream_options_turn_it_off(stack: Stack) -> None:
    deltas = [event for event in streamed(stack, {"text": "Hello there, how are you?"})
              if event["type"].endswith(".delta")]
    assert deltas and all(isinstance(delta["obfuscation"], str) and delta["obfuscation"] for delta in deltas)
    plain = [event for event in streamed(stack, {"text": "Hi."}, stream_options={"include_obfuscation": False})
             if event["type"].endswith(".delta")]
    assert plain and not any("obfuscation" in delta for delta in plain)


def test_a_reasoning_item_has_an_empty_content_as_openais_of_2026(stack: Stack) -> None:
    events = streamed(stack, {"reasoning": "7 times 13.", "text": "No."}, reasoning={"summary": "auto"})
    items = [event["item"] for event in events if event["type"].startswith("response.output_item.")
             and event["item"]["type"] == "reasoning"]
    assert [item["content"] for item in items] == [[], []]  # added and done
    final = next(event["response"] for event in events if event["type"] == "response.completed")
    assert final["output"][0]["content"] == [] and final["output"][0]["summary"][0]["text"] == "7 times 13."


HALF_A_PAIR = "Half \ud83d of a pair."
"""Text no UTF-8 can hold: half a surrogate pair."""


def _half_a_pair_scripted(stack: Stack, script: dict[str, Any]) -> str:
    """A run of `script`, sent JSON-escaped (httpx's `json=` writes UTF-8, which cannot hold it)."""
    run = new_run_token()
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", content=json.dumps(script),
               headers={"content-type": "application/json"}).raise_for_status()
    return run


def test_text_no_utf8_can_hold_is_answered_and_stored_escaped(stack: Stack) -> None:
    """Half a surrogate pair (a model's stream may split one across two events) is text no UTF-8
    can hold. The response is still stored and read back: every response the gateway writes,
    as every event of its streams, escapes what is not ASCII, so any text survives."""
    run = _half_a_pair_scripted(stack, {"steps": [[{"text": HALF_A_PAIR}]]})
    body = {"model": "m", "input": f"Hello {run_marker(run, 0)}", "stream": True}
    with httpx2.stream("POST", f"{stack.reference_url}/v1/responses", json=body, timeout=30) as answer:
        events = [json.loads(line[len("data: "):]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed", events[-1]
    response_id = events[-1]["response"]["id"]
    stored = httpx2.get(f"{stack.reference_url}/v1/responses/{response_id}", timeout=30)
    assert stored.status_code == 200, stored.text
    assert stored.content.isascii()
    assert stored.json()["output"][0]["content"][0]["text"] == HALF_A_PAIR


def test_text_no_utf8_can_hold_goes_back_to_the_model_in_a_continuation(stack: Stack) -> None:
    """The model's text held half a surrogate pair: the JSON answer holds it, and continuing the
    response sends it back to the model, escaped as JSON allows, where encoding the request
    as UTF-8 failed it with a 500 (and the scripted upstream's JSON answer failed likewise)."""
    run = _half_a_pair_scripted(stack, {"steps": [[{"text": HALF_A_PAIR}], [{"text": "Understood."}]],
                                        "chain_of": [0, 0]})
    first = httpx2.post(f"{stack.reference_url}/v1/responses", timeout=30,
                        json={"model": "m", "input": f"Hello {run_marker(run, 0)}"})
    assert first.status_code == 200, first.text
    assert first.json()["output"][0]["content"][0]["text"] == HALF_A_PAIR
    second = httpx2.post(f"{stack.reference_url}/v1/responses", timeout=30,
                         json={"model": "m", "input": f"Again {run_marker(run, 1)}",
                               "previous_response_id": first.json()["id"]})
    assert second.status_code == 200, second.text
    assert second.json()["output"][0]["content"][0]["text"] == "Understood."
    sent = upstream_requests(stack, run)[-1]["body"]["input"]
    assert {"type": "message", "role": "assistant", "content": HALF_A_PAIR} in sent


def test_a_conversation_lists_text_no_utf8_can_hold(stack: Stack) -> None:
    """The model's answer, added to a conversation, held half a surrogate pair: listing the
    conversation's items answers it escaped, as the gateway's every JSON answer now is (a
    client's own input may not hold one: refused with a 400, as OpenAI's parser refuses it),
    where Starlette's JSON answer failed with a 500."""
    run = _half_a_pair_scripted(stack, {"steps": [[{"text": HALF_A_PAIR}]]})
    conversation = httpx2.post(f"{stack.reference_url}/v1/conversations", json={}, timeout=30).json()["id"]
    created = httpx2.post(f"{stack.reference_url}/v1/responses", timeout=30,
                          json={"model": "m", "input": f"Hello {run_marker(run, 0)}", "conversation": conversation})
    assert created.status_code == 200, created.text
    listed = httpx2.get(f"{stack.reference_url}/v1/conversations/{conversation}/items", timeout=30)
    assert listed.status_code == 200, listed.text
    assert listed.content.isascii()
    answers = [item["content"][0]["text"] for item in listed.json()["data"] if item["role"] == "assistant"]
    assert answers == [HALF_A_PAIR]
