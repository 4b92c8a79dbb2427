"""The gateway's HTTP client to the model, against a real model server on loopback that misbehaves
on request: the upstream's own errors keep their status and fields; a model that cannot be
reached, answers too slowly, sends no JSON (or JSON with `NaN`, nested past the parser, or of a
shape the gateway cannot read) or no event stream is a 502; a compressed answer is read; the chat
passthrough relays the model's answer as it is, and its error in OpenAI's envelope (a plain-text
500 too)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.reference_impl import GatewayConfig, build_gateway_app
from responses_parity.reference_impl.errors import UpstreamError
from responses_parity.reference_impl.upstream.http import HttpUpstream, UpstreamClient, json_bytes

EVENTS = [{"type": "one", "n": 1}, {"type": "two", "text": "café"}]
RESPONSE = {"id": "resp_up", "object": "response", "created_at": 1, "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "msg_up", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "hi", "annotations": []}]}]}
MALFORMED = {
    "output-a-string": RESPONSE | {"output": "hi"},
    "an-item-a-string": RESPONSE | {"output": ["hi"]},
    "text-a-number": RESPONSE | {"output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}]},
    "call-name-a-number": RESPONSE | {"output": [{"type": "function_call", "call_id": "c", "name": 5,
                                                  "arguments": "{}"}]},
    "call-arguments-an-object": RESPONSE | {"output": [{"type": "function_call", "call_id": "c", "name": "f",
                                                        "arguments": {"a": 1}}]},
    "usage-a-word": RESPONSE | {"usage": {"input_tokens": "many"}},
    "details-a-string": RESPONSE | {"status": "incomplete", "incomplete_details": "long"},
    "a-list": [RESPONSE],
}
"""Model answers that are JSON, but not of the shape the Responses wire format gives what the
gateway reads."""


async def _answer(request: Request) -> Response:
    kind = request.path_params["kind"]
    if kind == "rate-limited":
        return JSONResponse({"error": {"message": "Slow down.", "type": "requests", "code": "rate_limit_exceeded"}},
                        status_code=429)
    if kind == "bad-gateway-page":
        return Response("<html>bad gateway</html>", status_code=502, media_type="text/html")
    if kind == "plain-500":
        return Response("Internal Server Error", status_code=500, media_type="text/plain")
    if kind == "not-an-error":
        return JSONResponse({"detail": [{"loc": ["body"], "msg": "field required"}]}, status_code=422)
    if kind == "full-error":
        return JSONResponse({"error": {"message": "Bad.", "type": "invalid_request_error", "param": "messages",
                                       "code": "invalid_type", "extra": 1}}, status_code=400)
    if kind == "endless-error":
        return StreamingResponse(_endless(), status_code=500, media_type="text/plain")
    if kind == "not-json":
        return Response("surely not json", media_type="application/json")
    if kind == "nan-json":  # Python's own encoder writes this, and its parser reads it
        return Response(json.dumps(RESPONSE | {"usage": {"input_tokens": float("nan")}}), media_type="application/json")
    if kind == "deep-json":
        return Response("[" * 100_000 + "]" * 100_000, media_type="application/json")
    if kind in MALFORMED:
        return Response(json.dumps(MALFORMED[kind]), media_type="application/json")
    if kind == "malformed-events":
        call = {"type": "function_call", "id": "fc_up", "call_id": "call_up", "name": 5, "arguments": "{}"}
        events = [{"type": "response.output_item.added", "output_index": 0, "item": call},
                  {"type": "response.output_item.done", "output_index": 0, "item": call},
                  {"type": "response.completed", "response": RESPONSE | {"output": [call]}}]
        return StreamingResponse(_chunks([f"data: {json.dumps(event)}\n\n" for event in events]),
                                 media_type="text/event-stream")
    if kind == "nan-events":
        frames = [f"data: {json.dumps(event)}\n\n" for event in [*EVENTS, {"type": "three", "n": float("inf")}]]
        return StreamingResponse(_chunks(frames), media_type="text/event-stream; charset=utf-8")
    if kind == "gzipped":
        return Response(gzip.compress(json.dumps({"echo": await request.json()}).encode()),
                        media_type="application/json", headers={"content-encoding": "gzip"})
    if kind == "silent":
        await asyncio.Event().wait()  # until the client goes away
    if kind == "events":
        frames = [f"data: {json.dumps(event)}\n\n" for event in EVENTS] + ["data: [DONE]\n\n", "data: {}\n\n"]
        return StreamingResponse(_chunks(frames), media_type="text/event-stream; charset=utf-8")
    if kind == "json-for-a-stream":
        return JSONResponse({"type": "one"})
    return JSONResponse({"echo": await request.json(), "authorization": request.headers.get("authorization")})


async def _endless() -> AsyncIterator[bytes]:
    """Far more than any reader takes (64 MiB), and no more: older uvicorn and starlette serve a
    client that has gone on, and an endless body would spin for the rest of the test session."""
    for _ in range(1024):
        yield b"x" * 65536


async def _chunks(frames: list[str]) -> AsyncIterator[bytes]:
    for frame in frames:
        encoded = frame.encode()
        yield encoded[:3]  # an event split across reads
        yield encoded[3:]


@pytest.fixture(scope="module")
def model() -> Iterator[str]:
    server = ServerThread(Starlette(routes=[Route("/v1/{kind}", _answer, methods=["POST"]),
                                            Route("/{kind}/chat/completions", _answer, methods=["POST"]),
                                            Route("/{kind}/responses", _answer, methods=["POST"])])).start()
    yield server.url
    server.stop()


async def _post_json(url: str, timeout_s: float = 30.0) -> dict:
    client = UpstreamClient(timeout_s)
    try:
        return await HttpUpstream(client, url, "sk-test-key").post_json(json_bytes({"input": "héllo"}))
    finally:
        await client.close()


async def _post_stream(url: str) -> list[dict]:
    client = UpstreamClient(30.0)
    try:
        return [event async for event in HttpUpstream(client, url, None).post_stream(json_bytes({"stream": True}))]
    finally:
        await client.close()


async def test_a_json_answer_is_read_with_the_key_sent(model: str) -> None:
    assert await _post_json(f"{model}/v1/echo") == {"echo": {"input": "héllo"}, "authorization": "Bearer sk-test-key"}


async def test_a_compressed_answer_is_read(model: str) -> None:
    assert await _post_json(f"{model}/v1/gzipped") == {"echo": {"input": "héllo"}}


async def test_the_upstreams_own_error_keeps_its_status_and_fields(model: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_json(f"{model}/v1/rate-limited")
    assert (raised.value.status, raised.value.message, raised.value.type, raised.value.code) == (
        429, "Slow down.", "requests", "rate_limit_exceeded")


async def test_an_error_page_that_is_not_json_is_named_by_its_status(model: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_json(f"{model}/v1/bad-gateway-page")
    assert (raised.value.status, raised.value.message) == (502, "The upstream model returned HTTP 502.")


@pytest.mark.parametrize(("path", "timeout_s", "says"), [
    ("not-json", 30.0, "The upstream model returned a body that is not JSON."),
    ("nan-json", 30.0, "The upstream model returned a body that is not JSON."),
    ("deep-json", 30.0, "The upstream model returned a body that is not JSON."),
    # The silent model never answers: only its wait is short, never the verdict.
    ("silent", 0.2, "The upstream model could not be reached: "),
])
async def test_a_broken_or_silent_model_is_a_502(model: str, path: str, timeout_s: float, says: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_json(f"{model}/v1/{path}", timeout_s=timeout_s)
    assert raised.value.status == 502 and raised.value.message.startswith(says)


async def test_a_model_nothing_listens_at_is_a_502() -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_json("http://127.0.0.1:9/v1/responses")
    assert raised.value.status == 502 and "could not be reached" in raised.value.message


async def test_a_stream_yields_each_event_up_to_done(model: str) -> None:
    assert await _post_stream(f"{model}/v1/events") == EVENTS


async def test_a_stream_answered_without_an_event_stream_is_a_502(model: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_stream(f"{model}/v1/json-for-a-stream")
    assert raised.value.status == 502 and "stream failed" in raised.value.message


async def test_a_stream_event_with_a_number_json_does_not_have_is_a_502(model: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_stream(f"{model}/v1/nan-events")
    assert (raised.value.status, raised.value.message) == (502, "The upstream model sent an event that is not JSON.")


def test_a_model_answer_with_nan_is_a_502_in_openais_envelope_never_a_500(model: str) -> None:
    """The gateway could write such an answer neither to its store nor to its client as JSON:
    before, the response failed to store (a 500, a bug in the log)."""
    gateway = ServerThread(build_gateway_app(GatewayConfig(upstream_url=f"{model}/nan-json",
                                                           store_path=":memory:"))).start()
    try:
        answer = httpx2.post(f"{gateway.url}/v1/responses", json={"model": "m", "input": "hi"}, timeout=30)
    finally:
        gateway.stop()
    assert answer.status_code == 502, answer.text
    assert answer.json()["error"]["message"] == "The upstream model returned a body that is not JSON."


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_model_answer_of_another_shape_is_a_502_never_a_500_nor_passed_on(model: str, kind: str) -> None:
    """Before, these were 500s (a bug in the log), or a call whose name is a number reached the
    loop, which refused it and asked the model again, without end."""
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]
    config = GatewayConfig(upstream_url=f"{model}/{kind}", store_path=":memory:")
    gateway = ServerThread(build_gateway_app(config)).start()
    try:
        answer = httpx2.post(f"{gateway.url}/v1/responses", json={"model": "m", "input": "hi", "tools": tools},
                             timeout=30)
    finally:
        gateway.stop()
    assert answer.status_code == 502, answer.text
    assert answer.json()["error"]["message"].startswith("The upstream model sent an answer the gateway cannot read")


def test_a_streamed_model_event_of_another_shape_fails_the_response_with_a_502(model: str) -> None:
    gateway = ServerThread(build_gateway_app(GatewayConfig(upstream_url=f"{model}/malformed-events",
                                                           store_path=":memory:"))).start()
    try:
        with httpx2.stream("POST", f"{gateway.url}/v1/responses", json={"model": "m", "input": "hi", "stream": True},
                           timeout=30) as answer:
            events = [json.loads(line.removeprefix("data: ")) for line in answer.iter_lines()
                      if line.startswith("data: ")]
    finally:
        gateway.stop()
    assert events[-1]["type"] == "response.failed", events[-1]
    assert events[-1]["response"]["error"]["message"] == ("The upstream model sent an answer the gateway cannot read: "
                                                           "a function call whose call_id, name or arguments is not a "
                                                           "string.")


async def test_a_failed_stream_keeps_the_upstreams_status(model: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await _post_stream(f"{model}/v1/rate-limited")
    assert (raised.value.status, raised.value.code) == (429, "rate_limit_exceeded")


@pytest.mark.parametrize(("kind", "status", "body"), [
    ("echo", 200, {"echo": {"model": "m", "messages": []}, "authorization": "Bearer sk-test-key"}),
    ("rate-limited", 429, {"error": {"message": "Slow down.", "type": "requests", "param": None,
                                     "code": "rate_limit_exceeded"}}),
    ("full-error", 400, {"error": {"message": "Bad.", "type": "invalid_request_error", "param": "messages",
                                   "code": "invalid_type"}}),
    ("plain-500", 500, {"error": {"message": "The upstream model returned HTTP 500.", "type": "server_error",
                                  "param": None, "code": None}}),
    ("not-an-error", 422, {"error": {"message": "The upstream model returned HTTP 422.", "type": "server_error",
                                     "param": None, "code": None}}),
    ("endless-error", 500, {"error": {"message": "The upstream model returned HTTP 500.", "type": "server_error",
                                      "param": None, "code": None}}),
])
def test_the_chat_passthrough_relays_the_models_answer_and_its_errors_in_openais_envelope(
        model: str, kind: str, status: int, body: dict) -> None:
    config = GatewayConfig(upstream_url=f"{model}/{kind}", upstream_wire="chat", upstream_api_key="sk-test-key")
    gateway = ServerThread(build_gateway_app(config)).start()
    try:
        answer = httpx2.post(f"{gateway.url}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=30)
    finally:
        gateway.stop()
    assert (answer.status_code, answer.json()) == (status, body)
