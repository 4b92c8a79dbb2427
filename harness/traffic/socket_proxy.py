"""`parity proxy` for OpenAI's WebSocket mode: a client's connection relayed frame by frame to
the upstream's, each create judged when its answer ends, the whole connection written as one
connection file (`wire/websocket.py`'s format, which `check-exchange` and `replay` read).

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
- Recorded: at most `MAX_MESSAGES` frames and `max_recorded_request_bytes` plus
  `max_answer_bytes` of frames; past either the frames are forwarded and not recorded, and the
  file says so. A create's answer is judged off
  the event loop (at most `FINISHING` at once, with the HTTP exchanges) once its terminal event
  or refusing error frame arrived.
- Secrets: the upgrade's credentials are secrets of the run, learnt before anything is written;
  each create's MCP secrets are removed from the file and from that create's findings.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.asyncio.client import ClientConnection, connect

from ...openai_contract.request_body import RequestTooLarge
from ..engine.targets import CONNECT_DEADLINE_S
from ..judge.judgement import Case, judge
from ..model.findings import Finding, Kind, Severity
from ..wire.capture import capture_name
from ..wire.decode import Unreadable, read_json
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor, tool_secrets
from ..wire.websocket import (MAX_MESSAGES, TRANSPORT, answered, create_body, ended, frame_value, socket_exchange,
                              socket_url_of)
from .forwarding import HOP_BY_HOP, UPSTREAM_FAILED

if TYPE_CHECKING:
    from .proxy import RecordingProxy

HANDSHAKE_HEADERS = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                               "sec-websocket-accept", "sec-websocket-protocol"})
"""The upgrade's own headers, which the proxy's connection to the upstream sets for itself."""


@dataclass
class _Connection:
    """One relayed connection as it is recorded."""

    name: str
    url: str
    path: str
    redactor: Redactor
    messages: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    dropped: int = 0
    """Frames forwarded past the recording's bounds."""
    open_create: Exchange | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    close: dict[str, Any] | None = None

    def keep(self, direction: str, frame: str | bytes, limit: int) -> None:
        size = _size(frame)
        if self.dropped or len(self.messages) >= MAX_MESSAGES or self.size + size > limit:
            self.dropped += 1
            return
        self.size += size
        if isinstance(frame, bytes):
            self.messages.append({"direction": direction, "data": base64.b64encode(frame).decode(), "binary": True})
        else:
            self.messages.append({"direction": direction, "data": _parsed_or_text(frame)})

    def document(self) -> dict[str, Any]:
        note = {"note": f"{self.dropped} frame(s) after the first {len(self.messages)} were forwarded and not "
                        "recorded (--max-recorded-request-mb plus --max-answer-mb)"} if self.dropped else {}
        return {"transport": TRANSPORT, "request": {"url": self.url},
                "meta": {"path": self.path, "captured_at": datetime.now(UTC).isoformat(timespec="seconds"), **note},
                "messages": self.messages, "close": self.close}


def _parsed_or_text(frame: str) -> Any:
    """A text frame as the JSON object it should be, or as it came."""
    try:
        value = read_json(frame)
    except Unreadable:
        return frame
    return value if isinstance(value, dict) else frame


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
               if name not in HOP_BY_HOP | HANDSHAKE_HEADERS]
    recording = _Connection(capture_name(proxy.next_number(), "ws", shown.partition("?")[0]), base + shown, shown,
                            proxy.redactor)
    try:
        upstream = await connect(url, additional_headers=headers, open_timeout=CONNECT_DEADLINE_S,
                                 max_size=proxy.limits.max_answer_bytes, compression=None)
    except (InvalidStatus, WebSocketException, OSError, TimeoutError) as refused:
        status = refused.response.status_code if isinstance(refused, InvalidStatus) else 502
        message = f"the upstream {proxy.upstream} refused the WebSocket upgrade: {_reason(refused)}"
        proxy.report(recording.name, recording.redactor,
                     [Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, message)])
        await _refuse(client, status, message)
        return
    await client.accept()
    relay = _Relay(proxy, client, upstream, recording)
    async with upstream, anyio.create_task_group() as relay.judging, anyio.create_task_group() as relaying:
        relay.scope = relaying.cancel_scope
        relaying.start_soon(relay.upward)
        relaying.start_soon(relay.downward)
        relaying.start_soon(relay.stop_when_the_proxy_stops)
    await proxy.off_the_loop(lambda: _write(proxy, recording))


@dataclass
class _Relay:
    """The two directions of one connection, and the proxy stopping it."""

    proxy: RecordingProxy
    client: WebSocket
    upstream: ClientConnection
    recording: _Connection
    judging: anyio.abc.TaskGroup | None = None
    """Where each create's answer is judged, beside the relay."""
    scope: anyio.CancelScope | None = None
    """Cancelled once either direction ends."""

    @property
    def recorded_bytes(self) -> int:
        return self.proxy.limits.max_recorded_request_bytes + self.proxy.limits.max_answer_bytes

    def _ended(self) -> None:
        assert self.scope is not None
        self.scope.cancel()

    async def upward(self) -> None:
        """The client's frames to the upstream; a create opens the exchange its answer completes."""
        proxy, recording = self.proxy, self.recording
        try:
            while True:
                message = await self.client.receive()
                if message["type"] == "websocket.disconnect":
                    code, reason = message.get("code", 1000), message.get("reason") or ""
                    recording.close = recording.close or {"code": code, "reason": reason, "initiator": "client"}
                    await self.upstream.close(code, reason)
                    break
                frame: str | bytes = message["text"] if message.get("text") is not None else message.get("bytes") or b""
                if (size := _size(frame)) > proxy.limits.max_request_bytes:
                    refused = RequestTooLarge(size, proxy.limits.max_request_bytes)
                    error_frame = {"type": "error", "status": refused.status} | refused.body()
                    await self.client.send_text(json.dumps(error_frame))
                    proxy.not_forwarded("WS", recording.path, f"a frame of {size:,} bytes: {refused.message}")
                    continue
                recording.keep("sent", frame, self.recorded_bytes)
                value = _parsed_or_text(frame) if isinstance(frame, str) else None
                if isinstance(value, dict) and value.get("type") == "response.create":
                    recording.open_create, recording.frames = socket_exchange(recording.url, value), []
                    recording.redactor = proxy.redactor.within(*tool_secrets(create_body(value)))
                await self.upstream.send(frame)
        except (ConnectionClosed, WebSocketDisconnect):
            pass
        self._ended()

    async def downward(self) -> None:
        """The upstream's frames to the client; a create's answer judged once it ends."""
        recording = self.recording
        try:
            async for frame in self.upstream:
                recording.keep("received", frame, self.recorded_bytes)
                if isinstance(frame, str):
                    await self.client.send_text(frame)
                else:
                    await self.client.send_bytes(frame)
                if (create := recording.open_create) is None:
                    continue
                if (value := frame_value(frame, len(recording.frames), create)) is not None:
                    recording.frames.append(value)
                if ended(recording.frames):
                    answered(create, recording.frames)
                    recording.open_create = None
                    assert self.judging is not None
                    self.judging.start_soon(self.proxy.off_the_loop,
                                            _judged(self.proxy, recording.name, recording.redactor, create))
            code = self.upstream.close_code if self.upstream.close_code is not None else 1000
            reason = self.upstream.close_reason or ""
            recording.close = recording.close or {"code": code, "reason": reason, "initiator": "upstream"}
            await self.client.close(code, reason)
        except (ConnectionClosed, WebSocketDisconnect, RuntimeError):  # the client went first
            pass
        self._ended()

    async def stop_when_the_proxy_stops(self) -> None:
        """Both sides closed as going away (1001) when the proxy stops; what was relayed is recorded."""
        await self.proxy.stopping.wait()
        self.recording.close = {"code": 1001, "reason": "parity proxy stopped", "initiator": "proxy"}
        with anyio.CancelScope(shield=True):
            await self.upstream.close(1001, "parity proxy stopped")
            with contextlib.suppress(RuntimeError):  # the client's side is closed already
                await self.client.close(1001, "parity proxy stopped")
        self._ended()


def _judged(proxy: RecordingProxy, name: str, redactor: Redactor, create: Exchange) -> Callable[[], None]:
    return lambda: proxy.report(name, redactor, judge(Case(create, False)).findings)


def _write(proxy: RecordingProxy, recording: _Connection) -> None:
    """Write the connection file (a reader of the folder never sees half of one); a create left
    without its answer is a finding."""
    if recording.open_create is not None:
        proxy.report(recording.name, recording.redactor, [Finding(
            Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, "the connection closed before the answer to its "
            f"response.create ended ({len(recording.frames)} frame(s) of it came)")])
    document = recording.document()
    secrets = [secret for message in recording.messages if message["direction"] == "sent"
               and isinstance(message["data"], dict) for secret in tool_secrets(create_body(message["data"]))]
    partial = proxy.captures / f"{recording.name}.partial"
    proxy.redactor.within(*secrets).write_json(partial, document)
    partial.replace(proxy.captures / recording.name)
    proxy.recorded(recording.name, Exchange("GET", recording.url, status=101, meta={
        "transport": TRANSPORT, "path": recording.path, "ended": _ending(recording)}))


def _ending(recording: _Connection) -> str:
    close = recording.close or {}
    creates = sum(1 for m in recording.messages if m["direction"] == "sent" and isinstance(m["data"], dict)
                  and m["data"].get("type") == "response.create")
    return f"{creates} create(s), closed by the {close.get('initiator', 'network')} ({close.get('code', 1006)})"


def _reason(error: BaseException) -> str:
    if isinstance(error, InvalidStatus):
        return f"HTTP {error.response.status_code}"
    return str(error) or type(error).__name__


async def _refuse(client: WebSocket, status: int, message: str) -> None:
    """Refuse the client's handshake with `status` in OpenAI's envelope, or, where the server
    cannot answer a handshake with a body, close it."""
    body = {"error": {"message": message, "type": "server_error", "param": None, "code": "upstream_unreachable"}}
    if "websocket.http.response" in client.scope.get("extensions", {}):
        await client.send_denial_response(JSONResponse(body, status))
    else:
        await client.close(1011, message[:120])
