"""`parity scenario from-capture` copies what a possibly hostile gateway answered: the scenario
it writes has only the placeholders it chose itself (`{{model}}`, the ids of earlier answers),
and each copied value renders back to what was captured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from responses_parity.harness.scenario.placeholders import OutputView, parse, render
from responses_parity.harness.traffic.from_capture import scenario_text
from responses_parity.harness.wire.capture import Captured
from responses_parity.harness.wire.exchange import Exchange

EXCHANGES = Path(__file__).parent / "exchanges"
HOSTILE = "{{ ask.body.__class__.__mro__[1].__subclasses__() }} {% for x in y %} {{model}} {{{"
"""What the gateway writes wherever it chooses the text: placeholders and statements of its own."""
RESPONSE_ID = "resp_{{run.token}}"
CALL_ID = "call_{{ 9 ** 999999999 }}"
META = {"path": "/v1/responses", "upstream": "http://127.0.0.1:1", "captured_at": "2026-01-01T00:00:00+00:00"}


def _response(response_id: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": 1, "status": "completed", "model": HOSTILE,
            "output": output, "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "msg_{{model}}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


CAPTURES = [
    Captured(Path("0001-post-v1-responses.json"), Exchange(
        "POST", "http://127.0.0.1:1/v1/responses",
        {"model": "m", "input": "Weather? {{mcp.calc.url}}",
         "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]},
        200, {"content-type": "application/json"},
        _response(RESPONSE_ID, [_message(HOSTILE),
                                {"type": "function_call", "id": "fc_1", "call_id": CALL_ID, "name": "get_weather",
                                 "arguments": json.dumps({"city": HOSTILE}), "status": "completed"}]),
        meta=META)),
    Captured(Path("0002-post-v1-responses.json"), Exchange(
        "POST", "http://127.0.0.1:1/v1/responses",
        {"model": "m", "previous_response_id": RESPONSE_ID,
         "input": [{"type": "function_call_output", "call_id": CALL_ID, "output": HOSTILE}]},
        200, {"content-type": "application/json"}, _response("resp_2", [_message(HOSTILE)]), meta=META)),
]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_a_hostile_capture_gives_a_scenario_with_only_the_drafts_own_placeholders() -> None:
    scenario = yaml.safe_load(scenario_text(CAPTURES, "hostile"))
    used = {reference.path() for text in _strings(scenario) for reference in parse(text).references}
    assert used == {"model", "step1.response.id", "step1.output[1].call_id"}
    second = scenario["steps"][1]["request"]
    assert second["previous_response_id"] == "{{step1.response.id}}"
    assert second["input"][0]["call_id"] == "{{step1.output[1].call_id}}"


def test_each_copied_value_renders_back_to_what_was_captured() -> None:
    scenario = yaml.safe_load(scenario_text(CAPTURES, "hostile"))
    answer = CAPTURES[0].exchange.body
    context = {"model": "m", "step1": {"response": answer, "output": OutputView(answer["output"])}}
    first, second = (render(step, context, f"steps[{n}]") for n, step in enumerate(scenario["steps"]))
    assert first["request"]["input"] == "Weather? {{mcp.calc.url}}"
    assert first["model"] == [{"text": HOSTILE}, {"call": {"tool": "get_weather", "arguments": {"city": HOSTILE}}}]
    assert second["request"]["previous_response_id"] == RESPONSE_ID
    assert second["request"]["input"] == [{"type": "function_call_output", "call_id": CALL_ID, "output": HOSTILE}]
    assert second["model"] == [{"text": HOSTILE}]


def test_a_captured_server_url_cannot_break_out_of_the_review_notes() -> None:
    """The notes at the top name each MCP server by its URL, which the capture holds: written
    quoted, a line break in it cannot start a line of YAML."""
    url = "http://127.0.0.1:1/mcp\nid: injected\r\x85\u2028steps: []\n#"
    request = {"model": "m", "input": "2+3?", "tools": [{"type": "mcp", "server_label": "calc", "server_url": url}]}
    captured = Captured(Path("0001-post-v1-responses.json"), Exchange(
        "POST", "http://127.0.0.1:1/v1/responses", request, 200, {"content-type": "application/json"},
        _response("resp_1", [_message("5")]), meta=META))
    text = scenario_text([captured], "quoted-url")
    lines = text.splitlines()  # at every line break YAML knows, \x85 and \u2028 too
    notes = lines[:lines.index("id: quoted-url")]
    assert notes and all(line.startswith("#") for line in notes)


@pytest.mark.parametrize(("name", "asked", "streamed"), [
    ("stream-text-obfuscation", {}, True),
    ("error-400-model-not-found", {"stream": True}, True),  # a stream asked for, refused in JSON
    ("error-400-model-not-found", {}, False)])
def test_a_capture_is_drafted_in_the_stream_mode_it_was_sent_in(name: str, asked: dict[str, Any],
                                                                  streamed: bool) -> None:
    exchange = Exchange.from_file(json.loads((EXCHANGES / f"{name}.json").read_text()))
    exchange.request_body |= asked
    scenario = yaml.safe_load(scenario_text([Captured(Path(f"0001-{name}.json"), exchange)], name))
    assert scenario["modes"] == ["stream" if streamed else "nonstream"]
    assert scenario["steps"][0]["stream"] is streamed
