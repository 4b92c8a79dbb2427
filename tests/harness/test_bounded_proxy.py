"""`parity proxy` is bounded and keeps every secret, run as a user runs it in front of a
counting upstream on loopback that shows back what it was sent (`counting_upstream`):
credentials in headers and in the query reach no capture and no line, and body values never
become secrets of the run; a body over the limit is refused unread; an upstream that goes silent
or a client that goes away ends its exchange at once, with one line each; a live stream keeps
no event; a SIGTERM stops the proxy cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2
import psutil
import pytest
from counting_upstream import CountingUpstream
from parity_process import DEADLINE_S, ParityProcess, running
from proxy_process import captured_files, start_proxy

from responses_parity.harness.judge.live_checks import LiveStream
from responses_parity.harness.traffic.forwarding import Credentials
from responses_parity.harness.wire.redaction import REDACTED
from responses_parity.harness.wire.sse import parse_sse

API_KEY = "Zq9proxyKEY777"
TENANT_TOKEN = "tenant/Token+888"
QUERY_KEY = "q/Secret+Value42"
"""Sent percent-encoded (`q%2FSecret%2BValue42`), as a client puts it in a URL."""
MCP_TOKEN = "mcp-token-5e4d3c2b1a"
CREATE = {"model": "m", "input": "hi"}
SMALL_RECORDINGS = ("--max-answer-mb", "0.25")
"""For tests of endless streams: each is recorded up to 0.25 MiB (the default, 4 MiB, is
minutes of work for the checker at its priority on a machine other work keeps busy)."""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ParityProcess]]:
    with running(tmp_path) as starting:
        yield starting


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _head(url: str, path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{_port(url)}", "content-type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _request(url: str, path: str, body: dict[str, object]) -> bytes:
    payload = json.dumps(body).encode()
    return _head(url, path, f"content-length: {len(payload)}") + payload


def _connect(url: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(url)), timeout=DEADLINE_S)


def _answer(connection: socket.socket) -> tuple[int, dict[str, object]]:
    """The status and JSON body of one answer with a content-length."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536) or b"<end>"
        assert not received.endswith(b"<end>"), received
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += connection.recv(65536)
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _wait_for_lines(proxy: ParityProcess, text: str, count: int) -> None:
    """Return once the proxy printed `count` lines holding `text`; fail past `DEADLINE_S` or at more."""
    deadline = time.monotonic() + DEADLINE_S
    while (seen := sum(text in line for line in proxy.output().splitlines())) < count:
        assert time.monotonic() < deadline, f"{seen} of {count} lines with {text!r}:\n{proxy.output()}"
        time.sleep(0.05)  # poll interval while the proxy prints
    assert seen == count, proxy.output()


def test_no_credential_reaches_a_capture_or_a_line_and_body_values_stay_secrets_of_their_own_exchange(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    mcp = {"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp", "authorization": MCP_TOKEN}
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.url("echo"), tmp_path / "captures",
                                 "--secret-header", "X-Tenant-Token")
        with httpx2.Client(timeout=DEADLINE_S) as client:
            first = client.post(f"{url}/v1/responses", params={"api_key": QUERY_KEY},
                                headers={"Authorization": f"Bearer {API_KEY}", "X-Tenant-Token": TENANT_TOKEN},
                                json=CREATE | {"metadata": {"api_key": "completed"}, "tools": [mcp]})
            later = client.post(f"{url}/v1/responses", json=CREATE | {"input": f"{MCP_TOKEN} is a word here"})
        files = captured_files(tmp_path / "captures", 2)
        proxy.wait_for(r"^0002-post-v1-responses\.json: POST /v1/responses -> 200$")
    echoed = first.json()["echo"]  # the upstream got every credential, and showed each back
    assert echoed["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert echoed["headers"]["x-tenant-token"] == TENANT_TOKEN
    assert echoed["query"] == f"api_key={quote(QUERY_KEY, safe='')}"
    written = [file.read_text() for file in files] + [proxy.output()]
    for secret in (API_KEY, TENANT_TOKEN, QUERY_KEY, quote(QUERY_KEY, safe="")):
        assert not [text for text in written if secret in text], secret
    captured, captured_later = (json.loads(file.read_text()) for file in files)
    shown = captured["response"]["body"]["echo"]
    assert shown["headers"]["x-tenant-token"] == REDACTED and shown["query"] == f"api_key={REDACTED}"
    assert captured["meta"]["path"] == f"/v1/responses?api_key={REDACTED}"
    assert captured["request"]["body"]["metadata"] == {"api_key": REDACTED}  # blanked where it sits
    assert MCP_TOKEN not in written[0]
    # Neither became a secret of the run: the next exchange keeps its `completed` and its words.
    assert captured_later["response"]["body"]["status"] == "completed"
    assert captured_later["request"]["body"]["input"] == f"{MCP_TOKEN} is a word here"
    assert later.json()["status"] == "completed"


def test_credential_parameters_are_hidden_in_a_path_and_their_values_known_as_sent_and_decoded() -> None:
    credentials = Credentials.naming(headers=["X-Tenant-Token"], params=["Sas"])
    path = "/v1/responses?model=m&API_KEY=a%2Fb&sas=xyz&token&key=k1"
    assert credentials.hidden(path) == f"/v1/responses?model=m&API_KEY={REDACTED}&sas={REDACTED}&token&key={REDACTED}"
    assert credentials.values([("x-tenant-token", "t1"), ("cookie", "a=c1; b=c2"), ("accept", "x")],
                              path.partition("?")[2]) == ["t1", "a=c1; b=c2", "c1", "c2", "a%2Fb", "a/b", "xyz", "xyz",
                                                          "k1", "k1"]


def test_a_body_over_the_limit_is_refused_with_a_413_before_the_rest_is_read(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.url("echo"), tmp_path / "captures", "--max-request-mb", "1")
        with _connect(url) as declared:  # 200 MiB declared, 64 KiB of it sent, the rest never
            declared.sendall(_head(url, "/v1/responses", f"content-length: {200 * 2**20}") + b" " * 65536)
            refused = [_answer(declared)]
        with _connect(url) as chunked:  # no length declared: 1.25 MiB sent, the end never
            chunked.sendall(_head(url, "/v1/responses", "transfer-encoding: chunked"))
            piece = b" " * 65536
            chunked.sendall((f"{len(piece):x}\r\n".encode() + piece + b"\r\n") * 20)
            refused.append(_answer(chunked))
        accepted = httpx2.post(f"{url}/v1/responses", json=CREATE | {"input": "x" * 2**19}, timeout=DEADLINE_S)
        _wait_for_lines(proxy, "POST /v1/responses: not forwarded: The request body is", 2)
        files = captured_files(tmp_path / "captures", 1)
    for status, body in refused:
        assert status == 413
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == "request_too_large"
    assert accepted.status_code == 200
    assert len(upstream.requests) == 1 and len(files) == 1  # only the body within the limit reached the upstream


def test_what_is_recorded_of_a_request_body_is_capped_and_the_whole_is_forwarded(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        _, url = start_proxy(start, upstream.url("echo"), tmp_path / "captures",
                             "--max-recorded-request-mb", "0.01", "--max-answer-mb", "0.01")
        answer = httpx2.post(f"{url}/v1/responses", json=CREATE | {"input": "x" * 100_000}, timeout=DEADLINE_S)
        capture = captured_files(tmp_path / "captures", 1)[0]
    assert answer.json()["echo"]["body"]["input"] == "x" * 100_000
    recorded = json.loads(capture.read_text())
    assert isinstance(recorded["request"]["body"], str) and len(recorded["request"]["body"]) == int(0.01 * 2**20)
    assert "--max-recorded-request-mb" in recorded["meta"]["request_note"]
    assert capture.stat().st_size < 30_000


def test_the_upstream_connection_closes_as_soon_as_the_client_leaves(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.base_url, tmp_path / "captures", *SMALL_RECORDINGS)
        waiting = [_connect(url) for _ in range(20)]  # at an upstream that never answers
        streaming = [_connect(url) for _ in range(5)]  # reading a stream that never ends
        for connection in waiting:
            connection.sendall(_request(url, "/hang/v1/responses", CREATE))
        for connection in streaming:
            connection.sendall(_request(url, "/endless/v1/responses", CREATE | {"stream": True}))
            assert connection.recv(65536)
        upstream.wait_for(lambda counted: counted.open == 25, "25 requests at the upstream")
        for connection in waiting + streaming:
            connection.close()
        upstream.wait_for(lambda counted: counted.open == 0, "every upstream connection closed")
        files = captured_files(tmp_path / "captures", 25)
        _wait_for_lines(proxy, "; the client went away", 25)
    assert all(json.loads(file.read_text())["disconnected"] for file in files)


def test_an_upstream_silent_past_the_read_deadline_is_a_504_or_an_error_event_and_a_finding(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.base_url, tmp_path / "captures", "--read-timeout", "0.5")
        with httpx2.Client(timeout=DEADLINE_S) as client:
            silent = client.post(f"{url}/hang/v1/responses", json=CREATE)
            with client.stream("POST", f"{url}/silent-stream/v1/responses", json=CREATE | {"stream": True}) as cut:
                events = parse_sse(cut.read().decode())
        upstream.wait_for(lambda counted: counted.open == 0, "every upstream connection closed")
        _wait_for_lines(proxy, "error proxy.upstream: the upstream", 2)
    assert silent.status_code == 504
    assert silent.json()["error"] == {"message": f"the upstream {upstream.base_url} sent nothing for 0.5 s "
                                                 "(--read-timeout)", "type": "server_error", "param": None,
                                      "code": "upstream_timeout"}
    assert [event.type for event in events] == ["response.created", "error"]
    assert events[1].payload is not None and events[1].payload["sequence_number"] == 1
    assert events[1].payload["code"] == "upstream_timeout"


def test_a_stream_that_keeps_sending_outlives_the_read_deadline(start: Callable[..., ParityProcess],
                                                                tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        _, url = start_proxy(start, upstream.url("endless"), tmp_path / "captures", "--read-timeout", "2")
        with httpx2.Client(timeout=DEADLINE_S) as client, \
                client.stream("POST", f"{url}/v1/responses", json=CREATE | {"stream": True}) as streamed:
            began, received = time.monotonic(), b""
            for chunk in streamed.iter_bytes():
                received = received[-1000:] + chunk
                assert b"event: error" not in received
                if time.monotonic() - began > 5:  # past two deadlines and a half
                    break
            else:
                pytest.fail("the stream ended")
        assert b"response.output_text.delta" in received


def test_each_client_that_goes_away_is_one_line_never_a_traceback(start: Callable[..., ParityProcess],
                                                                   tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.base_url, tmp_path / "captures", *SMALL_RECORDINGS)
        for _ in range(50):  # mid-body
            with _connect(url) as connection:
                connection.sendall(_head(url, "/echo/v1/responses", "content-length: 1000") + b'{"model": ')
        for _ in range(10):  # mid-answer
            with _connect(url) as connection:
                connection.sendall(_request(url, "/endless/v1/responses", CREATE | {"stream": True}))
                assert connection.recv(65536)
        deep = httpx2.post(f"{url}/echo/v1/responses", content=b"[" * 100_000 + b"]" * 100_000, timeout=DEADLINE_S)
        _wait_for_lines(proxy, "POST /echo/v1/responses: not forwarded: the client went away", 50)
        _wait_for_lines(proxy, "POST /endless/v1/responses -> 200 (stream); the client went away", 10)
        proxy.wait_for(r"^0011-post-echo-v1-responses\.json: POST /echo/v1/responses -> 200$")
    assert deep.status_code == 200  # a body too deep to read as JSON is forwarded, and recorded as text
    assert "Traceback" not in proxy.output() and "Exception" not in proxy.output()


def test_a_live_stream_keeps_no_event_it_checked() -> None:
    delta = (b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "item_id": "msg_1", '
             b'"output_index": 0, "content_index": 0, "delta": "more ", "sequence_number": %d, "logprobs": []}\n\n')
    live = LiveStream(chat=False)
    tracemalloc.start()
    try:
        assert live.feed(b"".join(delta % number for number in range(1_000))) == []
        after_a_thousand = tracemalloc.get_traced_memory()[0]
        for first in range(1_000, 6_000, 1_000):  # in pieces of a thousand events
            assert live.feed(b"".join(delta % number for number in range(first, first + 1_000))) == []
        after_five_thousand_more = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after_five_thousand_more - after_a_thousand < 64 * 1024  # kept, they would take about 5 MB
    assert live.feed(delta % 5)[0].rule == "grammar.sequence_numbers"  # still checking


def test_sigterm_stops_the_proxy_cleanly_closing_what_is_open_and_recording_it(
        start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    with CountingUpstream() as upstream:
        proxy, url = start_proxy(start, upstream.base_url, tmp_path / "captures")
        with _connect(url) as waiting, _connect(url) as streaming:
            waiting.sendall(_request(url, "/hang/v1/responses", CREATE))
            streaming.sendall(_request(url, "/endless/v1/responses", CREATE | {"stream": True}))
            assert streaming.recv(65536)
            upstream.wait_for(lambda counted: counted.open == 2, "2 requests at the upstream")
            os.kill(proxy.process.pid, signal.SIGTERM)
            assert proxy.process.wait(DEADLINE_S) == 0, proxy.output()
        upstream.wait_for(lambda counted: counted.open == 0, "every upstream connection closed")
    assert len(captured_files(tmp_path / "captures", 2)) == 2
    assert not list((tmp_path / "captures").glob("*.partial"))
    assert "Traceback" not in proxy.output()


def test_the_checker_of_a_killed_proxy_ends_quietly(start: Callable[..., ParityProcess], tmp_path: Path) -> None:
    """An out-of-memory killer ends the proxy: its checker process sees the relay's end of the
    pipe close, and ends without a traceback (it has no one left to tell what it took in)."""
    proxy, _ = start_proxy(start, "http://127.0.0.1:9", tmp_path / "captures")
    [checker] = [child for child in psutil.Process(proxy.process.pid).children()
                 if "resource_tracker" not in " ".join(child.cmdline())]
    os.kill(proxy.process.pid, signal.SIGKILL)
    psutil.wait_procs([checker], timeout=DEADLINE_S)
    assert not checker.is_running(), "the checker outlived its relay"
    assert "Traceback" not in proxy.output(), proxy.output()
