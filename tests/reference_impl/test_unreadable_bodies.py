"""A body the gateway cannot read is answered in OpenAI's error envelope: too large (413, before
the rest is read, on every surface), not JSON, `NaN`, nested past the limit, a lone surrogate.
Never a 500; and a bug is OpenAI's 500 envelope, not a plain-text page. (A chat completion the
loop does not run passes through to the model as it is.) A body is checked on the loop only when
it is small enough to be checked quickly."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import h11
import httpx2
import pytest

from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.openai_contract.request_body import MAX_BODY_BYTES
from responses_parity.openai_contract.strict_json import MAX_DEPTH
from responses_parity.reference_impl import app as app_module
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.json_body import CHECK_ON_THE_LOOP_BYTES, PARSE_ON_THE_LOOP_BYTES, JsonBody

PATHS = ("/v1/responses", "/v1/conversations")


def deep(levels: int) -> bytes:
    return b'{"model": "m", "input": "x", "metadata": ' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("body", "says"), [
    (b'{"model": "m", "input": ', "We could not parse the JSON body of your request."),
    (b'{"model": "m", "input": "caf\xff"}', "We could not parse the JSON body of your request."),
    (b'{"model": "m", "input": "x", "temperature": NaN}', "It has the number NaN, which JSON does not allow."),
    (b'{"model": "m", "input": "x", "temperature": -Infinity}', "It has the number -Infinity, which JSON does not"),
    # a number json would read as infinity, and the gateway send on as `Infinity`, which is not JSON
    (b'{"model": "m", "input": "x", "temperature": 1e400}', "It has the number 1e400, too large for a double."),
    (b'{"model": "m", "input": [{"role": "user", "content": "x", "n": -2.5e308}]}', "the number -2.5e308, too large"),
    (b'{"model": "m", "input": "x\\ud800"}', "It has a string with a lone UTF-16 surrogate, which is not text."),
    (b'{"model": "m", "metadata": {"\\udc00": "x"}}', "a lone UTF-16 surrogate"),
    (deep(MAX_DEPTH + 1), f"It nests deeper than {MAX_DEPTH} levels."),
    (deep(100_000), f"It nests deeper than {MAX_DEPTH} levels."),
])
@pytest.mark.parametrize("padding", [0, PARSE_ON_THE_LOOP_BYTES], ids=["small", "large"])
def test_an_unreadable_body_is_an_openai_400(stack: Stack, path: str, body: bytes, says: str, padding: int) -> None:
    """Read on the loop, or (a large one) in a worker thread a member at a time."""
    answer = httpx2.post(f"{stack.reference_url}{path}", content=b" " * padding + body, timeout=30,
                         headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text[:200]
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert says in error["message"]


@pytest.mark.parametrize("body", [deep(100_000), b'{"model": ', b"[1]"])
def test_a_chat_body_passed_through_unread_is_refused_by_the_model_in_openais_envelope(stack: Stack,
                                                                                     body: bytes) -> None:
    answer = httpx2.post(f"{stack.reference_url}/v1/chat/completions", content=body, timeout=30,
                         headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text[:200]
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("path", [*PATHS, "/v1/chat/completions"])
def test_a_body_over_the_limit_is_a_413_on_every_surface(stack: Stack, path: str) -> None:
    answer = httpx2.post(f"{stack.reference_url}{path}", content=b" " * (MAX_BODY_BYTES + 1), timeout=30,
                         headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"


def test_a_body_that_nests_to_the_limit_is_read(stack: Stack) -> None:
    answer = httpx2.post(f"{stack.reference_url}/v1/conversations", timeout=30,
                         json={"metadata": {"k": "v"}, "items": [{"role": "user", "content": [
                            {"type": "input_text", "text": "x"}]}]})
    assert answer.status_code == 200, answer.text
    nested = httpx2.post(f"{stack.reference_url}/v1/responses", content=deep(MAX_DEPTH - 1), timeout=30,
                         headers={"content-type": "application/json"})
    assert nested.status_code == 400 and nested.json()["error"]["param"] == "metadata"  # read, then refused by type


def test_a_bug_is_a_500_in_openai_envelope(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(request: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(app_module, "read_json", broken)
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()
    try:
        answer = httpx2.post(f"{server.url}/v1/responses", json={"model": "m", "input": "x"}, timeout=30)
    finally:
        server.stop()
    assert answer.status_code == 500
    assert answer.json() == {"error": {"message": "The server had an error while processing your request. Sorry "
                                                  "about that!", "type": "server_error", "param": None, "code": None}}


def _answers_on_one_connection(url: str, requests: list[tuple[str, str, bytes]]) -> list[tuple[int, bytes]]:
    """The answers to `requests` (method, path, body) sent at once, pipelined, on one keep-alive
    connection, read until each is answered or the server closes the connection."""
    host, port = httpx2.URL(url).host, httpx2.URL(url).port
    client = h11.Connection(h11.CLIENT)
    head = b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    wire = b"".join(head % (method.encode(), path.encode(), host.encode(), len(body)) + body
                    for method, path, body in requests)
    answers: list[tuple[int, bytes]] = []
    with socket.create_connection((host, port), timeout=30) as connection:
        connection.sendall(wire)
        for method, path, body in requests:
            client.send(h11.Request(method=method, target=path, headers=[("host", host),
                                                                          ("content-length", str(len(body)))]))
            client.send(h11.Data(data=body))
            client.send(h11.EndOfMessage())
            status, received = 0, b""
            try:
                while not isinstance(event := client.next_event(), h11.EndOfMessage):
                    if isinstance(event, h11.ConnectionClosed):
                        return answers
                    if event is h11.NEED_DATA:
                        client.receive_data(connection.recv(65536))
                    elif isinstance(event, h11.Response):
                        status = event.status_code
                    elif isinstance(event, h11.Data):
                        received += event.data
            except h11.RemoteProtocolError:  # closed before this answer was complete
                return answers
            answers.append((status, received))
            client.start_next_cycle()
    return answers


def test_a_bug_leaves_the_connection_open_for_the_requests_sent_after_it_on_it(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    real = app_module.read_json

    async def broken_for_one_input(request: object) -> object:
        body = await real(request)  # type: ignore[arg-type]
        if body.value.get("input") == "break":
            raise KeyError("a bug")
        return body

    monkeypatch.setattr(app_module, "read_json", broken_for_one_input)
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()
    try:
        answers = _answers_on_one_connection(server.url, [
            ("POST", "/v1/responses", json.dumps({"model": "m", "input": "break"}).encode()),
            ("GET", "/v1/responses/resp_unknown", b""), ("GET", "/v1/files", b"")])
    finally:
        server.stop()
    assert [status for status, _ in answers] == [500, 404, 200]
    assert json.loads(answers[0][1])["error"]["type"] == "server_error"


def test_a_small_body_is_checked_on_the_loop_and_a_larger_one_in_a_worker_thread() -> None:
    async def checked_in(size: int) -> int:
        return await JsonBody({"model": "m"}, size).checked(lambda _: threading.get_ident())

    async def threads() -> tuple[int, int, int]:
        return threading.get_ident(), await checked_in(CHECK_ON_THE_LOOP_BYTES), \
            await checked_in(CHECK_ON_THE_LOOP_BYTES + 1)

    loop, small, larger = asyncio.run(threads())
    assert small == loop != larger
