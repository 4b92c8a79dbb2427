"""Requests are refused the way OpenAI refuses them: same status, type, code, param, wording."""

from __future__ import annotations

from typing import Any

import pytest

from responses_parity.reference_impl.errors import InvalidRequest
from responses_parity.reference_impl.validation import validate_create


def refusal(body: Any) -> tuple[str | None, str | None, str]:
    with pytest.raises(InvalidRequest) as caught:
        validate_create(body)
    error = caught.value
    assert error.status == 400 and error.type == "invalid_request_error"
    return error.code, error.param, error.message


@pytest.mark.parametrize(("body", "expected"), [
    ({"input": "x"}, ("missing_required_parameter", "model", "Missing required parameter: 'model'.")),
    ({"model": None, "input": "x"},
     ("invalid_type", "model", "Invalid type for 'model': expected a string, but got null instead.")),
    ({"model": "m"}, ("missing_required_parameter", "input", "Missing required parameter: 'input'.")),
    ({"model": "m", "input": 3}, ("invalid_type", "input", "Invalid type for 'input': expected one of a string or "
                                                           "array of input items, but got an integer instead.")),
    ({"model": "m", "input": "x", "stor": True},
     ("unknown_parameter", "stor", "Unknown parameter: 'stor'. Did you mean 'store'?")),
    ({"model": "m", "input": "x", "max_tool_calls": 0},
     ("integer_below_min_value", "max_tool_calls", "Invalid 'max_tool_calls': integer below minimum value. "
                                                   "Expected a value >= 1, but got 0 instead.")),
    ({"model": "m", "input": "x", "temperature": -1},
     ("decimal_below_min_value", "temperature", "Invalid 'temperature': decimal below minimum value. "
                                                "Expected a value >= 0, but got -1 instead.")),
    ({"model": "m", "input": "x", "max_output_tokens": 15},
     ("integer_below_min_value", "max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. "
                                                      "Expected a value >= 16, but got 15 instead.")),
    ({"model": "m", "input": "x", "truncation": "bogus"},
     ("invalid_value", "truncation", "Invalid value: 'bogus'. Supported values are: 'auto' and 'disabled'.")),
    ({"model": "m", "input": [{"role": "bogus", "content": "x"}]},
     ("invalid_value", "input[0]", "Invalid value: 'bogus'. Supported values are: 'assistant', 'system', "
                                   "'developer', and 'user'.")),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]},
     ("missing_required_parameter", "input[0].call_id", "Missing required parameter: 'input[0].call_id'.")),
    ({"model": "m", "input": [{"type": "message", "role": "user", "content": "x", "bogus": 1}]},
     ("unknown_parameter", "input[0].bogus", "Unknown parameter: 'input[0].bogus'.")),
    ({"model": "m", "input": "x", "tools": [{"type": "function"}]},
     ("missing_required_parameter", "tools[0].name", "Missing required parameter: 'tools[0].name'.")),
    ({"model": "m", "input": "x", "metadata": {str(i): "v" for i in range(17)}},
     ("object_above_max_properties", "metadata", "Invalid 'metadata': too many properties. Expected an object "
                                                 "with at most 16 properties, but got an object with 17 properties "
                                                 "instead.")),
])
def test_openai_shaped_refusals(body: dict, expected: tuple) -> None:
    assert refusal(body) == expected


def test_messages_is_pointed_to_input() -> None:
    code, param, message = refusal({"model": "m", "input": "x", "messages": []})
    assert (code, param) == ("unsupported_parameter", None) and "moved to 'input'" in message


def test_missing_model_comes_before_missing_input_and_unknown_keys() -> None:
    assert refusal({"zzz": 1})[1] == "model"
    assert refusal({"model": "m", "zzz": 1})[1] == "input"


def test_empty_input_needs_a_previous_response_or_conversation() -> None:
    assert refusal({"model": "m", "input": []})[0] == "missing_required_parameter"
    assert validate_create({"model": "m", "input": [], "previous_response_id": "resp_1"}).input_items == []


def test_previous_response_id_and_conversation_are_mutually_exclusive() -> None:
    code, _, _ = refusal({"model": "m", "input": "x", "previous_response_id": "resp_1", "conversation": "conv_1"})
    assert code == "mutually_exclusive_parameters"


def test_a_valid_request_with_an_mcp_tool() -> None:
    request = validate_create({"model": "m", "input": "hi", "tools": [
        {"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:1/mcp", "authorization": "tok",
         "require_approval": {"always": {"tool_names": ["a"]}}}]})
    [tool] = request.mcp_tools
    assert tool.approval.requires_approval("b") and tool.authorization == "tok"
    assert tool.echo()["authorization"] == "<redacted>"
