"""The proxy's HTTP wire (`traffic/http_relay.py`), byte by byte: a proxy in this process in
front of upstreams that misbehave below HTTP (`hostile_target`) or answer plainly, spoken to
over raw sockets. Every upstream failure reaches the client as HTTP and the proxy keeps
serving; requests that are not HTTP, or too large in their head, get OpenAI's envelope;
pipelined requests are answered in order; framing is the upstream's or one the client can
read; a reused upstream connection that closed is replaced only where resending is safe; an
answer the client does not take stops the upstream being read."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_target import HostileTarget
from parity_process import DEADLINE_S
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.traffic.forwarding import UPSTREAM_FAILED, Found, ProxyEvent, ProxyLimits
from responses_parity.harness.traffic.http_relay import BUFFERED_LIMIT, HEAD_LIMIT, UpstreamConnection
from responses_parity.harness.traffic.proxy import RecordingProxy

CREATE = json.dumps({"model": "m", "input": "hi"}).encode()


@dataclass
class Proxied:
    port: int
    events: list[ProxyEvent]

    def findings(self) -> list[str]:
        return [event.finding.rule for event in self.events if isinstance(event, Found)]


@contextmanager
def proxy_to(upstream: str, tmp_path: Path, **limits: float) -> Iterator[Proxied]:
    events: list[ProxyEvent] = []
    proxy = RecordingProxy(upstream, tmp_path / "captures", events.append, limits=ProxyLimits(**limits))
    server = proxy.server().start()
    try:
        yield Proxied(server.port, events)
    finally:
        proxy.stop()
        server.stop()


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    closed: bool
    """Whether the proxy closed the connection after it."""

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


def _ask(port: int, data: bytes, count: int = 1) -> list[Answer]:
    """Send `data` as it is, read `count` answers (a body framed by its length, chunked, or by
    the connection's end)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as client:
        client.sendall(data)
        reader = client.makefile("rb")
        return [_read_answer(reader) for _ in range(count)]


def _read_answer(reader: object) -> Answer:
    read_line: Callable[[], bytes] = reader.readline  # type: ignore[attr-defined]
    status_line = read_line()
    assert status_line.startswith(b"HTTP/1."), status_line
    headers = []
    while (line := read_line()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip().lower(), value.strip()))
    fields = dict(headers)
    body = b""
    if "content-length" in fields:
        body = reader.read(int(fields["content-length"]))  # type: ignore[attr-defined]
    elif fields.get("transfer-encoding") == "chunked":
        while size := int(read_line().split(b";")[0], 16):
            body += reader.read(size)  # type: ignore[attr-defined]
            read_line()
        read_line()
    else:
        body = reader.read()  # type: ignore[attr-defined]
    closed = fields.get("connection") == "close"
    return Answer(int(status_line.split()[1]), headers, body, closed)


def _post(path: str = "/v1/responses", *extra: str, body: bytes = CREATE, version: str = "1.1") -> bytes:
    lines = [f"POST {path} HTTP/{version}", "host: proxy", "content-type: application/json",
             f"content-length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileTarget]:
    with HostileTarget() as target:
        yield target


@pytest.mark.parametrize(("behaviour", "status"), [
    ("not-http", 502), ("close-silently", 502), ("huge-headers", 502), ("hang", 504)])
def test_an_upstream_that_gives_no_answer_is_the_proxys_error_and_a_finding_and_the_proxy_keeps_serving(
        hostile: HostileTarget, tmp_path: Path, behaviour: str, status: int) -> None:
    with proxy_to(hostile.url(behaviour), tmp_path, read_timeout_s=0.5) as proxied:
        for _ in range(2):  # the second: the proxy still serves
            (answer,) = _ask(proxied.port, _post())
            assert answer.status == status
            assert json.loads(answer.body)["error"]["code"] == ("upstream_timeout" if status == 504
                                                                else "upstream_unreachable")
    assert UPSTREAM_FAILED in proxied.findings()


@pytest.mark.parametrize(("behaviour", "status", "shown"), [
    ("html-error-page", 502, b"<h1>502 Bad Gateway</h1>"), ("redirect-loop", 307, b""),
    ("json-without-content-type", 200, b'"object": "response"')])
def test_an_answer_of_the_upstreams_is_relayed_as_it_came_its_hop_by_hop_headers_left_out(
        hostile: HostileTarget, tmp_path: Path, behaviour: str, status: int, shown: bytes) -> None:
    with proxy_to(hostile.url(behaviour), tmp_path) as proxied:
        (answer,) = _ask(proxied.port, _post())
    assert answer.status == status and shown in answer.body
    assert answer.header("connection") == []  # the upstream's `close` is its own connection's
    if status == 307:
        assert answer.header("location") == ["/redirect-loop/v1/responses"]  # not followed


@pytest.mark.parametrize("behaviour", ["reset", "short-body", "bad-chunking"])
def test_an_answer_the_upstream_breaks_off_reaches_the_client_cut(hostile: HostileTarget, tmp_path: Path,
                                                                   behaviour: str) -> None:
    with proxy_to(hostile.url(behaviour), tmp_path) as proxied:
        with socket.create_connection(("127.0.0.1", proxied.port), timeout=DEADLINE_S) as client:
            client.sendall(_post())
            received = b""
            while chunk := client.recv(65536):  # until the proxy closes the connection
                received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        fields = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:])
        if b"content-length" in fields:
            assert len(body) < int(fields[b"content-length"])
        else:  # chunked, without the last chunk that would say it ended
            assert fields[b"transfer-encoding"] == b"chunked" and not body.endswith(b"0\r\n\r\n")
        _wait_for(lambda: UPSTREAM_FAILED in proxied.findings())


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)  # poll interval


def _echo_app() -> Starlette:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"path": request.url.path, "body": (await request.body()).decode(),
                             "headers": request.headers.getlist("x-seen")}, headers={"x-upstream": "yes"})
    return Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    server = ServerThread(_echo_app()).start()
    yield server.url
    server.stop()


def test_pipelined_requests_are_answered_in_order_and_headers_pass_as_the_upstream_sent_them(
        echo: str, tmp_path: Path) -> None:
    with proxy_to(echo, tmp_path) as proxied:
        first, second = _ask(proxied.port, _post("/v1/one", "x-seen: 1") + _post("/v1/two", "x-seen: 2", body=b"{}"), 2)
    assert [json.loads(first.body)["path"], json.loads(second.body)["path"]] == ["/v1/one", "/v1/two"]
    assert json.loads(second.body) == {"path": "/v1/two", "body": "{}", "headers": ["2"]}
    assert first.header("x-upstream") == ["yes"]
    assert len(first.header("date")) == len(first.header("server")) == 1  # the upstream's, none added


def test_an_http10_client_gets_the_answer_whole(echo: str, tmp_path: Path) -> None:
    with proxy_to(echo, tmp_path) as proxied:
        (answer,) = _ask(proxied.port, _post("/v1/old", version="1.0"))
    assert answer.status == 200 and json.loads(answer.body)["path"] == "/v1/old"


def test_a_request_that_is_not_http_gets_a_400_in_openais_envelope(echo: str, tmp_path: Path) -> None:
    with proxy_to(echo, tmp_path) as proxied:
        (answer,) = _ask(proxied.port, b"HELLO THERE\r\n\r\n")
        (big,) = _ask(proxied.port, _post("/v1/responses", "x-padding: " + "a" * HEAD_LIMIT))
        assert _ask(proxied.port, _post())[0].status == 200  # still serving
    assert (answer.status, answer.closed) == (400, True)
    assert json.loads(answer.body)["error"]["type"] == "invalid_request_error"
    assert (big.status, json.loads(big.body)["error"]["code"]) == (431, "request_header_fields_too_large")


class _ClosesReusedConnections:
    """An upstream that answers the first request on a connection (keeping it open, as HTTP/1.1
    does) and closes on the second without a byte: a connection that closed as it was reused."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for answered in range(2):
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                self.requests += 1
                if answered:
                    break
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def test_a_reused_connection_that_closed_is_replaced_for_a_get_and_a_post_is_never_sent_twice(
        tmp_path: Path) -> None:
    upstream = _ClosesReusedConnections()
    with HostileTarget(upstream) as target, proxy_to(f"http://127.0.0.1:{target.port}", tmp_path) as proxied:
        get = b"GET /v1/responses/resp_1 HTTP/1.1\r\nhost: proxy\r\n\r\n"
        assert [answer.status for answer in _ask(proxied.port, get + get + get, 3)] == [200, 200, 200]
        assert upstream.requests == 5  # the second and the third each sent on a reused connection, then anew
        (post,) = _ask(proxied.port, _post())  # on the connection the last one left open, which closes
        assert post.status == 502 and upstream.requests == 6
        assert _ask(proxied.port, _post())[0].status == 200  # on a new connection


class _RecordingTransport:
    """The part of a transport the upstream connection uses, recording its reading state."""

    def __init__(self) -> None:
        self.reading = True
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        pass


def test_an_answer_the_client_does_not_take_stops_the_upstream_being_read() -> None:
    async def relay() -> None:
        connection = UpstreamConnection(asyncio.get_running_loop(), read_timeout_s=60)
        transport = _RecordingTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.send(b"GET / HTTP/1.1\r\n\r\n", no_body=False)
        connection.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await connection.head()
        piece = b"%x\r\n%b\r\n" % (2**16, b"x" * 2**16)
        for _ in range(2 * BUFFERED_LIMIT // 2**16):  # the client takes nothing
            connection.data_received(piece)
            if not transport.reading:
                break
        assert not transport.reading
        assert sum(map(len, connection.ready())) <= BUFFERED_LIMIT + 2**16
        assert transport.reading  # taken: read again
        connection.data_received(b"0\r\n\r\n")
        assert await connection.piece() is None and connection.reusable
        connection.close()

    asyncio.run(relay())
