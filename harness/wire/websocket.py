"""OpenAI's WebSocket mode on the wire, and its connection file format.

A connection carries JSON text frames: the client's `response.create`s and, for each in turn,
the server's events up to its response's terminal event, or one `error` frame refusing it.
Each create with its answer is one `Exchange`, judged as an HTTP one is: a response's frames
as its events (`sse` written from them, one event a frame, status 200), a refusing error frame
as an error answer (its `status`, its `error` as the body); `meta.transport` is `websocket`.

A connection file (the shared recordings of OpenAI, `parity proxy`'s captures) is
`{"transport": "websocket", "request": {"url", "headers"}, "messages": [{"direction": "sent" |
"received", "data": <frame>}, ...], "close": {"code", "reason", "initiator"} | null}`, a binary
frame's data in base64 with `"binary": true`; other keys are ignored. A frame that is not a
JSON object, or a server frame when no create is open, is a `framing` defect of the exchange it
falls in (or of the last one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .decode import Defect, Unreadable, read_json
from .exchange import TERMINAL_EVENTS, Exchange

TRANSPORT = "websocket"
MAX_MESSAGES = 100_000
"""The most frames a connection file may hold (each is walked once)."""


def socket_url_of(url: str) -> str:
    """The WebSocket URL of an http(s) one: `ws` for `http`, `wss` for `https` (any other as it is)."""
    return "ws" + url.removeprefix("http") if url.startswith("http") else url


def is_connection(data: Any) -> bool:
    """Whether a file's value is a connection (see the module's docstring)."""
    return isinstance(data, dict) and data.get("transport") == TRANSPORT


def create_frame(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `response.create` frame for a create's JSON body (`stream` is implicit)."""
    return {"type": "response.create"} | {key: value for key, value in body.items() if key != "stream"}


def create_body(frame: Mapping[str, Any]) -> dict[str, Any]:
    """A `response.create` frame's fields as the create's body, as an exchange keeps it."""
    return {key: value for key, value in frame.items() if key != "type"}


def ended(frames: list[dict[str, Any]]) -> bool:
    """Whether a create's answer is over: its response's terminal event came, or an error frame
    that refuses the request (the first frame, or one with a `status`); an error in the course of
    a response is followed by its terminal event, as on a stream."""
    last = frames[-1] if frames else {}
    return last.get("type") in TERMINAL_EVENTS or (last.get("type") == "error" and (len(frames) == 1 or
                                                                                    "status" in last))


def frame_value(received: Any, position: int, exchange: Exchange) -> dict[str, Any] | None:
    """A received frame as the JSON object it must be (text, or already parsed); None, with a
    `framing` defect noted, for anything else."""
    value = received
    if isinstance(received, str):
        try:
            value = read_json(received)
        except Unreadable:
            value = None
    if isinstance(value, dict):
        return value
    what = "a binary frame" if isinstance(received, bytes) else "a text frame that is not a JSON object"
    exchange.defects.append(Defect("framing", f"frame {position} is {what} (every frame of WebSocket mode is one "
                                              "JSON object)"))
    return None


def answered(exchange: Exchange, frames: list[dict[str, Any]]) -> None:
    """Set the exchange's answer from the frames that came for its create."""
    if len(frames) == 1 and frames[0].get("type") == "error" and not exchange.disconnected:
        error = frames[0]
        exchange.status = error.get("status") if isinstance(error.get("status"), int) else None
        if exchange.status is None:
            exchange.defects.append(Defect("framing", "the error frame refusing the create has no integer `status` "
                                                      "(OpenAI's carries the HTTP status the request would get)"))
        exchange.body = {"error": error.get("error")}
        exchange.meta["error_frame"] = error
        return
    exchange.status = 200 if frames else None
    exchange.sse = "".join(f"event: {frame.get('type')}\ndata: {json.dumps(frame)}\n\n" for frame in frames)


def socket_exchange(url: str, frame: Mapping[str, Any], **meta: Any) -> Exchange:
    """The exchange of one create sent as `frame`, its answer still to come."""
    return Exchange("POST", url, request_body=create_body(frame), meta={"transport": TRANSPORT, **meta})


def connection_exchanges(data: Mapping[str, Any]) -> list[Exchange]:
    """A connection file's creates, each with its answer; `ValueError` says what makes the file
    no connection (no `messages` list, too many, a message without a direction and data)."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise ValueError("a WebSocket connection without a `messages` list")
    if len(messages) > MAX_MESSAGES:
        raise ValueError(f"{len(messages)} messages, more than the {MAX_MESSAGES} a connection file may hold")
    request = data.get("request") if isinstance(data.get("request"), dict) else {}
    url = request.get("url") if isinstance(request.get("url"), str) else "wss://unknown/v1/responses"
    exchanges: list[Exchange] = []
    frames: list[dict[str, Any]] = []
    position = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("direction") not in ("sent", "received"):
            raise ValueError(f"messages[{index}] has no `direction` of sent or received")
        if message["direction"] == "sent":
            if exchanges:
                answered(exchanges[-1], frames)
            sent = message.get("data")
            exchanges.append(socket_exchange(url, sent if isinstance(sent, dict) else {}, message=index))
            frames, position = [], 0
            continue
        if not exchanges:
            raise ValueError(f"messages[{index}]: the server sent a frame before any create")
        value = frame_value(b"" if message.get("binary") else message.get("data"), position, exchanges[-1])
        position += 1
        if value is None:
            continue
        if ended(frames):
            exchanges[-1].defects.append(Defect("framing", f"frame {position - 1} ({value.get('type')}) comes after "
                                                           "the create's answer ended"))
            continue
        frames.append(value)
    if exchanges:
        answered(exchanges[-1], frames)
        if not ended(frames):
            exchanges[-1].transport_error = "the connection ended before the answer did"
    return exchanges
