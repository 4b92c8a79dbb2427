"""Both surfaces refuse what OpenAI refuses, from one description of the request bodies (the
`openai` SDK's request types, tightened as OpenAI enforces them): every part named by its
`param` path, with OpenAI's code, never a 500 and never accepted."""

from __future__ import annotations

from typing import Any

import pytest

from responses_parity.reference_impl.chat.request import validate_chat
from responses_parity.reference_impl.errors import InvalidRequest
from responses_parity.reference_impl.validation import validate_create

MCP = {"type": "mcp", "server_label": "calc", "server_url": "https://mcp.example.org/mcp"}
FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}


def responses(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "Hi"} | fields


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "Hi"}]} | fields


@pytest.mark.parametrize(("body", "code", "param"), [
    # once answered with a plain-text 500
    (responses(input=[{"type": ["message"], "role": "user", "content": "x"}]), "invalid_type", "input[0].type"),
    (responses(tools=[{"type": ["mcp"]}]), "invalid_type", "tools[0].type"),
    (responses(tools=[MCP | {"server_label": ["calc"]}]), "invalid_type", "tools[0].server_label"),
    (responses(tools=[FUNCTION | {"name": {"n": 1}}]), "invalid_type", "tools[0].name"),
    (responses(tools=[MCP | {"require_approval": {"never": "all"}}]), "invalid_type",
     "tools[0].require_approval.never"),
    (responses(tools=[MCP | {"allowed_tools": {"tool_names": 5}}]), "invalid_type",
     "tools[0].allowed_tools.tool_names"),
    # once accepted, although OpenAI refuses it
    (responses(service_tier="bogus"), "invalid_value", "service_tier"),
    (responses(safety_identifier=5), "invalid_type", "safety_identifier"),
    (responses(prompt_cache_key=["k"]), "invalid_type", "prompt_cache_key"),
    (responses(prompt={"variables": {}}), "missing_required_parameter", "prompt.id"),
    (responses(stream_options="x"), "invalid_type", "stream_options"),
    (responses(stream_options={"include_usage": True}), "unknown_parameter", "stream_options.include_usage"),
    (responses(reasoning={"effort": "huge"}), "invalid_value", "reasoning.effort"),
    (responses(text={"format": {"type": "json_schema", "schema": {}}}), "missing_required_parameter",
     "text.format.name"),
    (responses(text={"zzz": 1}), "unknown_parameter", "text.zzz"),
    (responses(include=["bogus"]), "invalid_value", "include[0]"),
    (responses(metadata={"k" * 65: "v"}), "string_above_max_length", "metadata"),
    (responses(metadata={"k": "v" * 513}), "string_above_max_length", "metadata.k"),
    (responses(input=[{"role": "user", "content": [{"type": "input_text", "text": 5}]}]), "invalid_type",
     "input[0].content[0].text"),
    (responses(input=[{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]), "invalid_value",
     "input[0].content[0].type"),
    (responses(input=[{"type": "reasoning", "id": "rs_1"}]), "missing_required_parameter", "input[0].summary"),
    (responses(tools=[FUNCTION | {"strict": "yes"}]), "invalid_type", "tools[0].strict"),
    (responses(top_p=1.5), "decimal_above_max_value", "top_p"),
    # once accepted: bounds OpenAI's OpenAPI description states (openai_bounds.json)
    (responses(safety_identifier="x" * 65), "string_above_max_length", "safety_identifier"),
    (responses(context_management=[]), "empty_array", "context_management"),
    (responses(context_management=[{"type": "compaction", "compact_threshold": 999}]), "integer_below_min_value",
     "context_management[0].compact_threshold"),
    (responses(input=[{"type": "function_call_output", "call_id": "", "output": "x"}]), "empty_string",
     "input[0].call_id"),
    (responses(input=[{"type": "function_call_output", "call_id": "c" * 65, "output": "x"}]),
     "string_above_max_length", "input[0].call_id"),
    (responses(tools=[MCP | {"tunnel_id": "tunnel_X"}]), "invalid_value", "tools[0].tunnel_id"),
])
def test_the_responses_surface_refuses_what_openai_refuses(body: dict[str, Any], code: str, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate_create(body)
    assert (refused.value.status, refused.value.code, refused.value.param) == (400, code, param), \
        refused.value.message


@pytest.mark.parametrize(("body", "code", "param"), [
    # once answered with a plain-text 500
    (chat(tools=True), "invalid_type", "tools"),
    (chat(stream_options="x"), "invalid_type", "stream_options"),
    (chat(messages=[{"role": "assistant", "tool_calls": [{"id": "c"}]}]), "missing_required_parameter",
     "messages[0].tool_calls[0].type"),
    (chat(tool_choice={"type": "function", "function": "f"}), "invalid_type", "tool_choice.function"),
    # once accepted: the chat surface checked no sampling parameter
    (chat(temperature=3), "decimal_above_max_value", "temperature"),
    (chat(top_p="high"), "invalid_type", "top_p"),
    (chat(presence_penalty=-3), "decimal_below_min_value", "presence_penalty"),
    (chat(messages=[{"role": "wizard", "content": "x"}]), "invalid_value", "messages[0].role"),
    (chat(messages=[{"role": "function", "content": "x"}]), "missing_required_parameter", "messages[0].name"),
    # once accepted: bounds OpenAI's OpenAPI description states (openai_bounds.json)
    (chat(seed=1e308), "integer_above_max_value", "seed"),
    (chat(messages=[]), "empty_array", "messages"),
    (chat(stop=["a", "b", "c", "d", "e"]), "array_above_max_length", "stop"),
    (chat(safety_identifier="x" * 65), "string_above_max_length", "safety_identifier"),
])
def test_the_chat_surface_refuses_what_openai_refuses(body: dict[str, Any], code: str, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate_chat(body)
    assert (refused.value.status, refused.value.code, refused.value.param) == (400, code, param), \
        refused.value.message


@pytest.mark.parametrize("body", [
    responses(),
    responses(input=[{"role": "user", "content": "x"}, {"type": "item_reference", "id": "msg_1"}, {"id": "msg_2"}],
              tools=[MCP | {"require_approval": {"never": {"tool_names": ["add"]}}, "allowed_tools": ["add"]},
                     {"type": "function", "name": "g"}],
              tool_choice={"type": "mcp", "server_label": "calc"}, metadata={"k": "v"}, temperature=0.5,
              text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True}},
              reasoning={"effort": "low", "summary": "auto"}, include=["reasoning.encrypted_content"], stream=True,
              store=True, max_output_tokens=16, max_tool_calls=1, truncation="auto", parallel_tool_calls=False),
    responses(input=[{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                     {"type": "function_call_output", "call_id": "c", "output": "4"},
                     {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}]),
])
def test_what_openai_accepts_passes(body: dict[str, Any]) -> None:
    validate_create(body)


def test_a_chat_request_with_tools_and_sampling_passes() -> None:
    validate_chat(chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                       tool_choice={"type": "function", "function": {"name": "f"}}, temperature=1.5, top_p=0.9,
                       stream=True, stream_options={"include_usage": True}, max_completion_tokens=100))


def test_openais_words_for_the_bounds_its_description_states() -> None:
    with pytest.raises(InvalidRequest) as empty:
        validate_create(responses(context_management=[]))
    assert empty.value.message == ("Invalid 'context_management': empty array. Expected an array with minimum "
                                   "length 1, but got an empty array instead.")
    with pytest.raises(InvalidRequest) as pattern:
        validate_create(responses(tools=[MCP | {"tunnel_id": "tunnel_X"}]))
    assert pattern.value.message == ("Invalid 'tools[0].tunnel_id': string does not match pattern. Expected a string "
                                     "that matches the pattern '^tunnel_[a-z0-9]{32}$'.")
    with pytest.raises(InvalidRequest) as seed:
        validate_chat(chat(seed=1e308))
    assert seed.value.message == ("Invalid 'seed': integer above maximum value. Expected a value <= "
                                  "9223372036854776000, but got 1e+308 instead.")
