"""`parity proxy` for OpenAI's WebSocket mode: a client's connection relayed frame by frame to
the upstream's; every frame goes as it passed to the checker process, which keeps it, judges
each create when its answer ends and writes the whole connection as one connection file
(`socket_recording.py`), so the relay itself parses, judges and writes nothing.

- The upgrade goes to the upstream at the same path and query (`ws://`, or `wss://` for an
  https upstream) with the client's headers, minus hop-by-hop ones and the handshake's own. An
  upstream that refuses it or cannot be reached is a finding, and the client's handshake is
  refused with the upstream's status (502 when there was none), as an HTTP error in OpenAI's
  envelope where the server can send one.
- Frames pass unchanged both ways, text as text, binary as binary, as they arrive; either side
  closing closes the other with the same code and reason.
- A client frame larger than `max_request_bytes` is not forwarded: the client gets OpenAI's 413
  as an error frame, and the connection stays usable (as the reference gateway answers it). An
  upstream frame larger than `max_answer_bytes` ends the connection (1009, message too big).
- Recorded: at most `max_recorded_request_bytes` plus `max_answer_bytes` of frames (and
  `MAX_MESSAGES` of them); a frame the checker has no room for is not sent to it, nor is any
  later frame of its connection, and the file says so.
- Secrets: the upgrade's credentials are secrets of the run, learnt before anything is sent to
  the checker.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.asyncio.client import ClientConnection, connect

from ...openai_contract.request_body import RequestTooLarge
from ..engine.targets import CONNECT_DEADLINE_S
from ..model.findings import Finding, Kind, Severity
from ..wire.capture import capture_name
from ..wire.websocket import socket_url_of
from .checker import Checker
from .forwarding import HOP_BY_HOP, UPSTREAM_FAILED
from .http_relay import openai_error
from .socket_recording import SocketOpened

if TYPE_CHECKING:
    from .proxy import RecordingProxy

HANDSHAKE_HEADERS = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                               "sec-websocket-accept", "sec-websocket-protocol"})
"""The upgrade's own headers, which the proxy's connection to the upstream sets for itself."""


def _size(frame: str | bytes) -> int:
    return len(frame.encode()) if isinstance(frame, str) else len(frame)


async def relay_connection(proxy: RecordingProxy, client: WebSocket) -> None:
    """Relay one client connection to the upstream until either side closes it."""
    query = f"?{client.url.query}" if client.url.query else ""
    path = client.url.path + query
    shown = proxy.credentials.hidden(path)
    await proxy.learn(proxy.credentials.values(client.headers.items(), client.url.query))
    base = socket_url_of(proxy.upstream)
    url = base + path
    headers = [(name, value) for name, value in client.headers.items()
               if name.lower() not in HOP_BY_HOP | HANDSHAKE_HEADERS]
    name = capture_name(proxy.next_number(), "ws", shown.partition("?")[0])
    try:
        upstream = await connect(url, additional_headers=headers, open_timeout=CONNECT_DEADLINE_S,
                                 max_size=proxy.limits.max_answer_bytes, compression=None)
    except (InvalidStatus, WebSocketException, OSError, TimeoutError) as refused:
        status = refused.response.status_code if isinstance(refused, InvalidStatus) else 502
        message = f"the upstream {proxy.upstream} refused the WebSocket upgrade: {_reason(refused)}"
        proxy.report(name, [Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)])
        await _refuse(client, status, message)
        return
    await client.accept()
    limit = proxy.limits.max_recorded_request_bytes + proxy.limits.max_answer_bytes
    proxy.checker.socket_opened(name, SocketOpened(base + shown, shown, limit))
    relay = _Relay(proxy, proxy.checker, name, shown, client, upstream)
    try:
        async with upstream, anyio.create_task_group() as relaying:
            relay.scope = relaying.cancel_scope
            relaying.start_soon(relay.upward)
            relaying.start_soon(relay.downward)
            relaying.start_soon(relay.stop_when_the_proxy_stops)
    finally:  # what was relayed is written however the relay ended
        proxy.checker.socket_closed(name, relay.close, relay.unsent)


@dataclass
class _Relay:
    """The two directions of one connection, and the proxy stopping it."""

    proxy: RecordingProxy
    checker: Checker
    name: str
    path: str
    """As the connection file shows it (credentials hidden)."""
    client: WebSocket
    upstream: ClientConnection
    scope: anyio.CancelScope | None = None
    """Cancelled once either direction ends."""
    close: dict[str, Any] | None = None
    """How the connection closed: its code, reason and who closed it."""
    unsent: int = 0
    """Frames not sent to the checker: from the first one it had no room for, all of them."""

    def _ended(self) -> None:
        assert self.scope is not None
        self.scope.cancel()

    def _record(self, direction: str, frame: str | bytes) -> None:
        if self.unsent or not self.checker.frame(self.name, direction, frame):
            self.unsent += 1

    async def upward(self) -> None:
        """The client's frames to the upstream."""
        proxy = self.proxy
        try:
            while True:
                message = await self.client.receive()
                if message["type"] == "websocket.disconnect":
                    code, reason = message.get("code", 1000), message.get("reason") or ""
                    self.close = self.close or {"code": code, "reason": reason, "initiator": "client"}
                    await self.upstream.close(code, reason)
                    break
                frame: str | bytes = message["text"] if message.get("text") is not None else message.get("bytes") or b""
                if (size := _size(frame)) > proxy.limits.max_request_bytes:
                    refused = RequestTooLarge(size, proxy.limits.max_request_bytes)
                    error_frame = {"type": "error", "status": refused.status} | refused.body()
                    await self.client.send_text(json.dumps(error_frame))
                    proxy.not_forwarded("WS", self.path, f"a frame of {size:,} bytes: {refused.message}")
                    continue
                self._record("sent", frame)
                await self.upstream.send(frame)
        except (ConnectionClosed, WebSocketDisconnect):
            pass
        self._ended()

    async def downward(self) -> None:
        """The upstream's frames to the client."""
        try:
            async for frame in self.upstream:
                self._record("received", frame)
                if isinstance(frame, str):
                    await self.client.send_text(frame)
                else:
                    await self.client.send_bytes(frame)
            code = self.upstream.close_code if self.upstream.close_code is not None else 1000
            reason = self.upstream.close_reason or ""
            self.close = self.close or {"code": code, "reason": reason, "initiator": "upstream"}
            await self.client.close(code, reason)
        except (ConnectionClosed, WebSocketDisconnect, RuntimeError):  # the client went first
            pass
        self._ended()

    async def stop_when_the_proxy_stops(self) -> None:
        """Both sides closed as going away (1001) when the proxy stops; what was relayed is recorded."""
        await self.proxy.stopping.wait()
        self.close = {"code": 1001, "reason": "parity proxy stopped", "initiator": "proxy"}
        with anyio.CancelScope(shield=True):
            await self.upstream.close(1001, "parity proxy stopped")
            with contextlib.suppress(RuntimeError):  # the client's side is closed already
                await self.client.close(1001, "parity proxy stopped")
        self._ended()


def _reason(error: BaseException) -> str:
    if isinstance(error, InvalidStatus):
        return f"HTTP {error.response.status_code}"
    return str(error) or type(error).__name__


async def _refuse(client: WebSocket, status: int, message: str) -> None:
    """Refuse the client's handshake with `status` in OpenAI's envelope, or, where the server
    cannot answer a handshake with a body, close it."""
    body = openai_error(message, "upstream_unreachable")
    if "websocket.http.response" in client.scope.get("extensions", {}):
        await client.send_denial_response(JSONResponse(body, status))
    else:
        await client.close(1011, message[:120])
