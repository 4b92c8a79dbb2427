"""The reference gateway's WebSocket mode (`GET /v1/responses` upgraded), driven by the official
`openai` SDK's `client.responses.connect()` and by a raw socket: responses one after another on
one connection, each numbered from 0; `store: false` continued from the connection; OpenAI's
error frames for what it cannot take, the connection staying usable; the connection's time
limit; and a client that closes the socket cancelling its response."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from scripted_runs import scripted, upstream_requests
from websockets.sync.client import ClientConnection, connect

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.stack import ServerThread, Stack, reference_config
from responses_parity.reference_impl import build_gateway_app

DEADLINE_S = 30.0


def socket_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://", 1) + "/v1/responses"


def until_terminal(socket: ClientConnection) -> list[dict[str, Any]]:
    """The frames of one response: up to its terminal event, or an error frame."""
    frames = []
    while True:
        frames.append(json.loads(socket.recv(timeout=DEADLINE_S)))
        if frames[-1]["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return frames


@pytest.fixture
def socket(stack: Stack) -> Iterator[ClientConnection]:
    with connect(socket_url(stack.reference_url or "")) as opened:
        yield opened


def test_the_sdk_runs_two_responses_on_one_connection_the_second_continuing_a_store_false_one(
        stack: Stack) -> None:
    run = scripted(stack, [{"text": "Hello there."}], [{"text": "Again."}])
    client = OpenAI(base_url=f"{stack.reference_url}/v1", api_key="k", max_retries=0)
    with client.responses.connect() as connection:
        connection.response.create(model="parity-model", input=f"hi {run_marker(run, 0)}", store=False)
        first = [event for event in _until_completed(connection)]
        connection.response.create(model="parity-model", input="again", store=False,
                                   previous_response_id=first[-1].response.id)
        second = [event for event in _until_completed(connection)]
    assert [event.sequence_number for event in first] == list(range(len(first)))
    assert [event.sequence_number for event in second] == list(range(len(second)))  # from 0 again
    assert second[-1].type == "response.completed" and second[-1].response.output_text == "Again."
    assert upstream_requests(stack, run)[1]["item_types"] == ["message", "message", "message"]  # the replayed chain


def _until_completed(connection: Any) -> Iterator[Any]:
    for event in connection:
        yield event
        if event.type in ("response.completed", "response.failed", "response.incomplete", "error"):
            return


@pytest.mark.parametrize(("frame", "code", "param"), [
    ("not json", None, None),
    ('["a list"]', "invalid_type", "body"),
    ('{"type": "response.cancel"}', "invalid_value", "type"),
    ('{"type": "response.create", "model": "m", "input": "x", "top_k": 3}', "unknown_parameter", "top_k"),
    ('{"type": "response.create", "model": "m", "input": "x", "background": true}', "unsupported_value",
     "background"),
    ('{"type": "response.create", "model": "m", "input": "x", "previous_response_id": "resp_nowhere"}',
     "previous_response_not_found", "previous_response_id"),
])
def test_what_a_connection_cannot_take_gets_an_error_frame_and_the_connection_stays_usable(
        stack: Stack, socket: ClientConnection, frame: str, code: str | None, param: str | None) -> None:
    socket.send(frame)
    [error] = until_terminal(socket)
    assert error["type"] == "error" and error["status"] == 400
    assert (error["error"]["type"], error["error"]["code"], error["error"]["param"]) == (
        "invalid_request_error", code, param)
    assert error["error"]["message"]
    run = scripted(stack, [{"text": "still here"}])
    socket.send(json.dumps({"type": "response.create", "model": "m", "input": f"hi {run_marker(run, 0)}"}))
    assert until_terminal(socket)[-1]["type"] == "response.completed"


def test_a_failed_turn_forgets_the_response_it_continued(stack: Stack, socket: ClientConnection) -> None:
    run = scripted(stack, [{"text": "Hi."}])
    socket.send(json.dumps({"type": "response.create", "model": "m", "input": f"hi {run_marker(run, 0)}",
                            "store": False}))
    first = until_terminal(socket)[-1]["response"]["id"]
    unknown_call = {"type": "function_call_output", "call_id": "call_nowhere", "output": "x"}
    for expected_code in (None, "previous_response_not_found"):  # no tool call found; then: forgotten
        socket.send(json.dumps({"type": "response.create", "model": "m", "input": [unknown_call],
                                "previous_response_id": first, "store": False}))
        [error] = until_terminal(socket)
        assert error["type"] == "error" and error["error"]["code"] == expected_code, error


def test_a_connection_ends_at_its_time_limit_saying_so() -> None:
    server = ServerThread(build_gateway_app(reference_config("http://127.0.0.1:9", websocket_max_s=0.2))).start()
    try:
        with connect(socket_url(server.url)) as socket:
            frame = json.loads(socket.recv(timeout=DEADLINE_S))
    finally:
        server.stop()
    assert frame["type"] == "error" and frame["error"]["code"] == "websocket_connection_limit_reached"
    assert frame["error"]["message"].startswith("Responses websocket connection limit reached")


def test_a_client_that_closes_the_socket_cancels_its_response(stack: Stack) -> None:
    run = scripted(stack, [{"text": "slow", "delay": 30}])
    with connect(socket_url(stack.reference_url or "")) as socket:
        socket.send(json.dumps({"type": "response.create", "model": "m", "input": f"hi {run_marker(run, 0)}"}))
        created = json.loads(socket.recv(timeout=DEADLINE_S))
    response_id = created["response"]["id"]
    deadline = time.monotonic() + DEADLINE_S
    while (stored := httpx.get(f"{stack.reference_url}/v1/responses/{response_id}").json()).get("status") != \
            "cancelled":  # stored once the run has ended
        assert time.monotonic() < deadline, f"the response is still {stored}"
        time.sleep(0.05)
