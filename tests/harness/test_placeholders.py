"""Placeholders take values from earlier steps, keep types for whole-value placeholders, and
fail with a message naming the place."""

from __future__ import annotations

import pytest

from responses_parity.harness.findings import HarnessError
from responses_parity.harness.placeholders import OutputView, render

CONTEXT = {
    "model": "m",
    "ask": {"response": {"id": "resp_1", "max_output_tokens": 64},
            "output": OutputView([{"type": "mcp_list_tools", "id": "mcpl_1"},
                                  {"type": "function_call", "call_id": "call_9", "id": "fc_1"}])},
}


def test_a_whole_value_placeholder_keeps_its_type() -> None:
    assert render("{{ ask.response.max_output_tokens }}", CONTEXT, "x") == 64
    assert render("{{ask.output.function_call}}", CONTEXT, "x") == {"type": "function_call", "call_id": "call_9",
                                                                    "id": "fc_1"}


def test_text_with_placeholders_is_a_string() -> None:
    assert render("id={{ask.response.id}}, model={{model}}", CONTEXT, "x") == "id=resp_1, model=m"
    assert render("{{model}}/{{ask.response.id}}", CONTEXT, "x") == "m/resp_1"


def test_output_by_type_and_by_position() -> None:
    assert render({"a": ["{{ask.output.function_call.call_id}}", "{{ask.output[0].id}}"]}, CONTEXT, "x") == \
        {"a": ["call_9", "mcpl_1"]}


def test_an_unresolvable_placeholder_names_the_place() -> None:
    with pytest.raises(HarnessError, match=r"steps\[1\].request.input: cannot resolve .*mcp_call"):
        render("{{ask.output.mcp_call.id}}", CONTEXT, "steps[1].request.input")


def test_a_field_an_earlier_answer_lacked_is_unresolvable_at_once() -> None:
    """A gateway whose answer had no `id` must not leave an undefined value in the next request."""
    lacking = {"ask": {"response": {"object": "response"}}}
    with pytest.raises(HarnessError, match=r"steps\[1\].request.previous_response_id: cannot resolve .*'id'"):
        render({"previous_response_id": "{{ask.response.id}}"}, lacking, "steps[1].request")


def test_a_placeholder_that_gives_a_value_of_the_wrong_type_could_not_run(run_scenario) -> None:  # type: ignore[no-untyped-def]
    result = run_scenario("""
id: wrong-type
title: a number where text is expected
evidence: {contract: "4.1", unrecorded: true}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
  - id: again
    method: GET
    path: "{{responses_path}}/resp_nope"
    expect: {error: {message_contains: "{{ask.status}}"}}
""")
    assert result.outcome == "could_not_run"
    assert "steps[1] (again).expect.error.message_contains: a placeholder gave 200" in result.steps[-1].error
