"""`parity proxy` relaying OpenAI's WebSocket mode in front of a misbehaving upstream on loopback
(a Starlette app with a WebSocket route): frames pass unchanged both ways, what is wrong with the
upstream's is a finding and never ends the connection, a frame over the limit gets OpenAI's 413
as an error frame and the socket stays usable, the connection file keeps no credential, an
upstream that refuses the upgrade refuses the client's, and the proxy stopping closes both sides
as going away (1001) with what was relayed written."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from parity_process import DEADLINE_S
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.traffic.forwarding import Found, NotForwarded, ProxyEvent, ProxyLimits, Recorded
from responses_parity.harness.traffic.proxy import RecordingProxy

API_KEY = "sk-socket-proxy-7c1e9a"
QUERY_TOKEN = "qtok-5b3d1f"
CREATE = {"type": "response.create", "model": "m", "input": "hi"}
NOT_JSON = "this frame is not JSON"


def _completed(number: int) -> str:
    return json.dumps({"type": "response.completed", "sequence_number": number,
                       "response": {"id": "resp_1", "object": "response", "status": "completed", "output": []}})


async def _misbehaving(socket: WebSocket) -> None:
    """Answers each create with a frame that is not JSON, then its terminal event."""
    await socket.accept()
    try:
        while True:
            await socket.receive_text()
            await socket.send_text(NOT_JSON)
            await socket.send_text(_completed(1))
    except WebSocketDisconnect:
        pass


@dataclass
class Proxied:
    url: str
    proxy: RecordingProxy
    events: list[ProxyEvent]
    captures: Path

    def connection_file(self) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while not (files := sorted(self.captures.glob("*-ws-*.json"))):
            assert time.monotonic() < deadline, "no connection file written"
            time.sleep(0.05)  # poll interval while the proxy writes it
        return json.loads(files[0].read_text())

    def recorded(self) -> Recorded:
        deadline = time.monotonic() + DEADLINE_S
        while not (done := [event for event in self.events if isinstance(event, Recorded)]):
            assert time.monotonic() < deadline, "the connection was never recorded"
            time.sleep(0.05)
        return done[0]


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Proxied]:
    upstream = ServerThread(Starlette(routes=[WebSocketRoute("/v1/responses", _misbehaving)])).start()
    events: list[ProxyEvent] = []
    proxy = RecordingProxy(upstream.url, tmp_path / "captures", events.append,
                           limits=ProxyLimits(max_request_bytes=1000))
    server = proxy.server().start()
    yield Proxied("ws" + server.url.removeprefix("http"), proxy, events, tmp_path / "captures")
    proxy.stop()
    server.stop()
    upstream.stop()


def test_frames_pass_unchanged_and_a_bad_one_is_a_finding(proxied: Proxied) -> None:
    with connect(f"{proxied.url}/v1/responses?api_key={QUERY_TOKEN}",
                 additional_headers={"Authorization": f"Bearer {API_KEY}"}) as socket:
        socket.send(json.dumps(CREATE))
        assert [socket.recv(timeout=DEADLINE_S) for _ in range(2)] == [NOT_JSON, _completed(1)]
        socket.send("x" * 2000)
        refused = json.loads(socket.recv(timeout=DEADLINE_S))
        assert (refused["type"], refused["status"], refused["error"]["code"]) == ("error", 413, "request_too_large")
        socket.send(json.dumps(CREATE))  # still usable
        assert [socket.recv(timeout=DEADLINE_S) for _ in range(2)] == [NOT_JSON, _completed(1)]
    recorded = proxied.connection_file()
    text = json.dumps(recorded)
    assert API_KEY not in text and QUERY_TOKEN not in text
    assert [(m["direction"], m["data"] if isinstance(m["data"], str) else m["data"]["type"])
            for m in recorded["messages"]] == [("sent", "response.create"), ("received", NOT_JSON),
                                               ("received", "response.completed")] * 2
    assert recorded["close"]["initiator"] == "client"
    assert proxied.recorded().exchange.meta["ended"] == "2 create(s), closed by the client (1000)"
    framing = [event.finding.message for event in proxied.events if isinstance(event, Found)
               and "frame 0 is a text frame that is not a JSON object" in event.finding.message]
    assert len(framing) == 2, [event for event in proxied.events if isinstance(event, Found)]
    assert [event.reason for event in proxied.events if isinstance(event, NotForwarded)] == [
        "a frame of 2,000 bytes: The request body is 2,000 bytes; this gateway accepts at most 1,000."]


def test_an_upstream_refusing_the_upgrade_refuses_the_client(proxied: Proxied) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{proxied.url}/v1/no-socket-here", open_timeout=DEADLINE_S)
    assert refused.value.response.status_code == 403  # Starlette's answer to an upgrade it has no route for
    assert any(isinstance(event, Found) and event.finding.rule == "proxy.upstream"
               and "refused the WebSocket upgrade: HTTP 403" in event.finding.message for event in proxied.events)


def test_the_proxy_stopping_closes_both_sides_and_writes_what_was_relayed(proxied: Proxied) -> None:
    with connect(f"{proxied.url}/v1/responses") as socket:
        socket.send(json.dumps(CREATE))
        assert [socket.recv(timeout=DEADLINE_S) for _ in range(2)] == [NOT_JSON, _completed(1)]
        proxied.proxy.stop()
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=DEADLINE_S)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert proxied.connection_file()["close"] == {"code": 1001, "reason": "parity proxy stopped",
                                                  "initiator": "proxy"}
