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

import httpx2
import pytest
from openai import OpenAI
from scripted_runs import scripted, upstream_requests
from websockets.sync.client import ClientConnection, connect

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.openai_contract.request_body import MAX_BODY_BYTES
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.websocket import MAX_ACTIVE, MAX_LANES

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
    while (stored := httpx2.get(f"{stack.reference_url}/v1/responses/{response_id}").json()).get("status") != \
            "cancelled":  # stored once the run has ended
        assert time.monotonic() < deadline, f"the response is still {stored}"
        time.sleep(0.05)


def _text(terminal: dict[str, Any]) -> str:
    """The answer's text, from its terminal frame."""
    return terminal["response"]["output"][0]["content"][0]["text"]


def _create(socket: ClientConnection, **fields: Any) -> None:
    socket.send(json.dumps({"type": "response.create", "model": "m"} | fields))


def test_lanes_run_side_by_side_and_their_events_echo_the_lane(stack: Stack, socket: ClientConnection) -> None:
    """A slow response on one lane does not hold up another lane's; a lane's events say which."""
    slow, fast = scripted(stack, [{"text": "slow", "delay": 30}]), scripted(stack, [{"text": "fast"}])
    _create(socket, input=f"a {run_marker(slow, 0)}", stream_id="agent_1")
    assert json.loads(socket.recv(timeout=DEADLINE_S))["stream_id"] == "agent_1"  # it has begun
    _create(socket, input=f"b {run_marker(fast, 0)}", stream_id="agent_2")
    frames = until_terminal(socket)
    on_lane_2 = [frame for frame in frames if frame.get("stream_id") == "agent_2"]
    assert on_lane_2[-1]["type"] == "response.completed" and _text(on_lane_2[-1]) == "fast"
    assert [frame["sequence_number"] for frame in on_lane_2] == list(range(len(on_lane_2)))


def test_creates_on_one_lane_are_answered_in_order(stack: Stack, socket: ClientConnection) -> None:
    one, two = scripted(stack, [{"text": "one"}]), scripted(stack, [{"text": "two"}])
    _create(socket, input=f"1 {run_marker(one, 0)}")
    _create(socket, input=f"2 {run_marker(two, 0)}")
    first, second = until_terminal(socket), until_terminal(socket)
    assert (_text(first[-1]), _text(second[-1])) == ("one", "two")
    assert first[0]["response"]["id"] != second[0]["response"]["id"] and second[0]["sequence_number"] == 0


def test_a_flood_of_creates_is_refused_past_the_limit_and_the_connection_stays_usable(
        stack: Stack, socket: ClientConnection) -> None:
    """One create runs (slowly), fifteen wait; the seventeenth gets an error frame; the
    connection still answers."""
    run = scripted(stack, [{"text": "slow", "delay": 30}])
    _create(socket, input=f"hold {run_marker(run, 0)}")
    assert json.loads(socket.recv(timeout=DEADLINE_S))["type"] == "response.created"
    for _ in range(MAX_ACTIVE - 1):
        _create(socket, input="waits")
    _create(socket, input="one too many")
    refused = next(frame for frame in iter(lambda: json.loads(socket.recv(timeout=DEADLINE_S)), None)
                   if frame["type"] == "error")  # after the running response's own frames
    assert (refused["type"], refused["status"], refused["error"]["code"]) == ("error", 400,
                                                                             "too_many_active_responses")
    socket.send('{"type": "response.cancel"}')
    assert json.loads(socket.recv(timeout=DEADLINE_S))["error"]["param"] == "type"


def test_a_lane_name_is_checked_and_lanes_are_limited(stack: Stack, socket: ClientConnection) -> None:
    _create(socket, input="x", stream_id="not a name!")
    [bad] = until_terminal(socket)
    assert (bad["error"]["code"], bad["error"]["param"], bad["stream_id"]) == (
        "invalid_stream_id", "stream_id", "not a name!")
    for lane in range(MAX_LANES):  # warm-ups: no model turn
        _create(socket, input="x", stream_id=f"lane_{lane}", generate=False, store=False)
        assert until_terminal(socket)[-1]["type"] == "response.completed"
    _create(socket, input="x", stream_id="one_lane_too_many", generate=False, store=False)
    [limit] = until_terminal(socket)
    assert (limit["error"]["code"], limit["error"]["param"], limit["stream_id"]) == (
        "websocket_stream_limit_reached", "stream_id", "one_lane_too_many")


def test_a_warm_up_asks_no_model_and_its_id_is_continued(stack: Stack, socket: ClientConnection) -> None:
    run = scripted(stack, [{"text": "Seven."}])
    _create(socket, input="Remember the number 7.", generate=False, store=False)
    warm_up = until_terminal(socket)
    assert [frame["type"] for frame in warm_up] == ["response.created", "response.in_progress",
                                                    "response.completed"]
    assert warm_up[-1]["response"]["output"] == []
    _create(socket, input=f"Which number? {run_marker(run, 0)}", previous_response_id=warm_up[0]["response"]["id"],
            store=False)
    assert until_terminal(socket)[-1]["type"] == "response.completed"
    [asked] = upstream_requests(stack, run)  # the warm-up asked nothing; this turn sees its input
    assert asked["item_types"] == ["message", "message"]


def test_a_frame_larger_than_a_body_may_be_gets_an_error_frame(stack: Stack, socket: ClientConnection) -> None:
    socket.send(json.dumps({"type": "response.create", "model": "m", "input": "x" * MAX_BODY_BYTES}))
    [error] = until_terminal(socket)
    assert (error["status"], error["error"]["code"]) == (413, "request_too_large")
    socket.send('{"type": "response.cancel"}')
    assert json.loads(socket.recv(timeout=DEADLINE_S))["error"]["param"] == "type"
