"""The schema checks ask jsonschema-rs first and walk jsonschema only when it finds an object
invalid (`judge/schemas.py`): jsonschema-rs must never call valid what jsonschema finds an
error in, or a finding would be lost. Held over every payload of the exchanges the tests keep
(Responses, stream events, chat completions and chunks, error envelopes) and over mutations of
them: a field removed, a value replaced by a value of another JSON type, a field added."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from responses_parity.harness.judge.schemas import Validator, event_validators, validators
from responses_parity.harness.wire.exchange import Exchange

EXCHANGES = Path(__file__).parent / "exchanges"
OTHER_VALUES: list[Any] = [None, "", "x", 0, -1, 1.5, True, [], {}, ["x"], {"type": "x"}, 2**70]
CHAT_COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1754000000, "model": "gpt-4.1-mini",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                 "message": {"role": "assistant", "content": None, "refusal": None, "annotations": [],
                             "tool_calls": [{"id": "call_1", "type": "function",
                                             "function": {"name": "add", "arguments": "{\"a\": 2}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
    "service_tier": "default", "system_fingerprint": "fp_1"}
"""The Chat Completions answers (the kept exchanges are all Responses), as OpenAI sends them."""
CHAT_CHUNK = {
    "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1754000000, "model": "gpt-4.1-mini",
    "service_tier": "default", "system_fingerprint": "fp_1", "usage": None,
    "choices": [{"index": 0, "finish_reason": None, "logprobs": None,
                 "delta": {"content": "Hi", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                            "function": {"name": "add", "arguments": ""}}]}}]}


def _payloads() -> list[tuple[str, Validator, Any]]:
    """(where, validator, payload) of every checkable object in the kept exchanges."""
    kinds, events = validators(), event_validators()
    found: list[tuple[str, Validator, Any]] = []
    for path in sorted(EXCHANGES.glob("*.json")):
        exchange = Exchange.from_file(json.loads(path.read_text()))
        body = exchange.body
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            found.append((f"{path.name} error", kinds["error"], body["error"]))
        elif isinstance(body, dict) and body.get("object") in ("response", "chat.completion"):
            found.append((f"{path.name} body", kinds[body["object"]], body))
        for position, event in enumerate(exchange.events if exchange.streamed else []):
            payload = event.payload
            if isinstance(payload, dict) and payload.get("object") == "chat.completion.chunk":
                found.append((f"{path.name} chunk {position}", kinds["chat.completion.chunk"], payload))
            elif isinstance(payload, dict) and payload.get("type") in events:
                found.append((f"{path.name} event {position}", events[payload["type"]], payload))
    return [*found, ("chat body", kinds["chat.completion"], CHAT_COMPLETION),
            ("chat chunk", kinds["chat.completion.chunk"], CHAT_CHUNK)]


PAYLOADS = _payloads()


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value` (dict keys and list positions)."""
    inner = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    return [at] + [path for key, item in inner for path in _paths(item, (*at, key))]


def _agree(validator: Validator, payload: Any) -> None:
    if validator.valid(payload):
        assert list(validator.errors(payload)) == [], json.dumps(payload)[:500]


def test_the_kept_exchanges_give_payloads_of_every_kind() -> None:
    kinds = {where.split(" ")[1] for where, _, _ in PAYLOADS}
    assert kinds >= {"body", "event", "error", "chunk"}, kinds


def test_both_agree_on_every_kept_payload() -> None:
    for _, validator, payload in PAYLOADS:
        _agree(validator, payload)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_jsonschema_rs_calls_nothing_valid_that_jsonschema_finds_an_error_in(data: st.DataObject) -> None:
    _, validator, original = data.draw(st.sampled_from(PAYLOADS), label="payload")
    payload = copy.deepcopy(original)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(_paths(payload)[1:] or [()]), label="path")
        if not path:
            break
        parent = payload
        for key in path[:-1]:
            parent = parent[key]
        change = data.draw(st.sampled_from(["remove", "replace", "add"]), label="change")
        if change == "remove":
            del parent[path[-1]]
        elif change == "replace":
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(OTHER_VALUES), label="value"))
        elif isinstance(parent, dict):
            parent["added_" + str(path[-1])] = copy.deepcopy(data.draw(st.sampled_from(OTHER_VALUES), label="value"))
    _agree(validator, payload)
