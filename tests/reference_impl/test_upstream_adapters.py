"""The reference gateway keeps every contract whichever upstream adapter it is configured with:
Responses replaying the transcript (the default, run by the scenario tests), Responses chained
upstream with previous_response_id, Chat Completions, and Anthropic Messages."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.harness.engine.session import Session
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.loader import units_of
from responses_parity.harness.scenario.model import MODES
from responses_parity.reference_impl.upstream.anthropic_messages import AnthropicMessagesAdapter
from responses_parity.reference_impl.upstream.chat_completions import ChatCompletionsAdapter
from responses_parity.reference_impl.upstream.items import Message, ToolSpec, TurnRequest

CHAT_CANNOT_CARRY = {
    "reasoning-summary": "Chat Completions has no standard way to carry a reasoning summary",
    "reasoning-encrypted-content": "the same: no reasoning item comes back to carry encrypted_content",
    "structured-output": "the model request carries text.format as Chat's response_format, so the scenario's "
                         "Responses-shaped upstream.request cannot hold (the translation is unit-tested)",
}
ANTHROPIC_CANNOT_CARRY = {
    "structured-output": "Anthropic Messages has no json_schema output format to translate text.format to",
    "reasoning-summary": "the scripted model's summary has no Anthropic Messages form",
    "reasoning-encrypted-content": "the same: no reasoning item comes back to carry encrypted_content",
    "tool-choice": "Anthropic has no allowed_tools choice: the adapter narrows the offered tools instead, so the "
                   "scenario's Responses-shaped tool_choice assertion cannot hold (the narrowing is unit-tested)",
    "chat-passthrough": "a chat request cannot pass through to an Anthropic upstream unchanged; it is translated",
}


@pytest.mark.parametrize(("config", "excluded"), [
    ({"upstream_chaining": "previous_response_id"}, {}),
    ({"upstream_wire": "chat"}, CHAT_CANNOT_CARRY),
    ({"upstream_wire": "anthropic"}, ANTHROPIC_CANNOT_CARRY),
], ids=["responses-chained", "chat", "anthropic"])
def test_every_built_in_scenario_passes(config: dict[str, Any], excluded: dict[str, str]) -> None:
    scenarios = [s for s in load([builtin_scenarios_dir()]).scenarios if s.scenario.id not in excluded]
    with Stack(mcp_names=FIXTURE_SERVERS, gateway_config=config) as stack:
        assert stack.reference_url is not None
        results = Session(Target("reference", stack.reference_url), stack).run(units_of(scenarios, MODES), jobs=6)
    failures = [f"{r.scenario.id} [{r.mode}] {step.step_id}: {problem}" for r in results if r.outcome != "pass"
                for step in r.steps
                for problem in [*([f"could not run: {step.error}"] if step.error else []),
                                *(finding.message for finding in step.findings if finding.fails)]]
    assert not failures, "\n".join(failures)
    assert {r.scenario.id for r in results} == {s.scenario.id for s in scenarios}


def test_the_anthropic_adapter_narrows_tools_for_allowed_tools() -> None:
    allowed = [{"type": "function", "name": "add"}, {"type": "function", "name": "echo"}]
    turn = TurnRequest(model="m", instructions="Be brief.", transcript=(Message("user", "hi"),),
                       tools=(ToolSpec("add", None, None), ToolSpec("echo", None, None), ToolSpec("fail", None, None)),
                       tool_choice={"type": "allowed_tools", "mode": "required", "tools": allowed},
                       parallel_tool_calls=False, stream=False)
    body = AnthropicMessagesAdapter(None, "http://127.0.0.1:1/v1", None).payload(turn)  # type: ignore[arg-type]
    assert [tool["name"] for tool in body["tools"]] == ["add", "echo"]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": [{"type": "text",
                                                                                              "text": "hi"}]}]


def test_the_chat_adapter_sends_text_format_as_response_format() -> None:
    schema = {"type": "object", "properties": {"word": {"type": "string"}}}
    text = {"format": {"type": "json_schema", "name": "Greeting", "schema": schema, "strict": True}}
    turn = TurnRequest(model="m", instructions=None, transcript=(Message("user", "hi"),), tools=(), tool_choice=None,
                       parallel_tool_calls=True, stream=False, sampling={"text": text})
    body = ChatCompletionsAdapter(None, "http://127.0.0.1:1/v1", None).payload(turn)  # type: ignore[arg-type]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "Greeting", "schema": schema,
                                                                              "strict": True}}
    plain = TurnRequest(model="m", instructions=None, transcript=(Message("user", "hi"),), tools=(), tool_choice=None,
                        parallel_tool_calls=True, stream=False, sampling={"text": {"format": {"type": "text"}}})
    assert "response_format" not in ChatCompletionsAdapter(None, "http://x/v1", None).payload(plain)  # type: ignore[arg-type]


@pytest.mark.parametrize("arguments", ["not json", '{"x": NaN}', "[1, 2]"])
def test_function_call_arguments_an_anthropic_model_cannot_take_are_a_400_naming_the_call(arguments: str) -> None:
    """OpenAI's function call `arguments` is any string; Anthropic's `tool_use.input` is an
    object. A client's call whose arguments are no JSON object is refused in OpenAI's envelope,
    as the model's API would refuse it (it was a 500, a bug); one that is goes through."""
    def create(call_arguments: str) -> httpx2.Response:
        body = {"model": "m", "input": [
            {"type": "message", "role": "user", "content": "add these"},
            {"type": "function_call", "call_id": "call_sum", "name": "add", "arguments": call_arguments},
            {"type": "function_call_output", "call_id": "call_sum", "output": "3"}]}
        return httpx2.post(f"{stack.reference_url}/v1/responses", json=body, timeout=30)

    with Stack(gateway_config={"upstream_wire": "anthropic"}) as stack:
        refused, taken = create(arguments), create('{"a": 1, "b": 2}')
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == {
        "message": "The arguments of function call 'call_sum' are not a JSON object, which an Anthropic model's "
                   "tool_use input must be.", "type": "invalid_request_error", "param": None, "code": None}
    assert taken.status_code == 200, taken.text
