"""The Responses API over a WebSocket (OpenAI's WebSocket mode): `GET /v1/responses` upgraded.
Each `response.create` frame runs through the same service and agent loop as
`POST /v1/responses`; its events go out as they are appended, one JSON text frame each (no SSE
framing, no `[DONE]`), `sequence_number` from 0 for each response, as OpenAI sends them.

A connection:
- answers its creates one at a time, in the order they came; up to `MAX_WAITING` wait behind the
  one in flight, and a create beyond them gets an error frame (`too_many_waiting_requests`: the
  reference's choice, as OpenAI documents one response in flight per connection and not what a
  second gets). `stream` is implicit (a `stream` sent is taken); `background` is refused.
- keeps its latest response, so the next create continues it with `previous_response_id` even
  with `store: false`; an id neither kept nor stored gets `previous_response_not_found`; a create
  that fails forgets the response it continued (OpenAI evicts it).
- answers what it cannot take (a frame that is not a JSON object, a `type` other than
  `response.create`, a body OpenAI refuses) with an `error` frame in OpenAI's shape,
  `{type: error, status, error: {type, code, message, param}}`, and stays usable;
- lasts at most `websocket_max_s` (OpenAI: 60 minutes), then says
  `websocket_connection_limit_reached` and closes;
- cancels its response in flight when the client closes the socket, as a client leaving an SSE
  stream does.
A frame is at most uvicorn's `ws_max_size` (16 MiB, as a body is bounded); a larger one closes
the connection (1009).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from .errors import GatewayError, InvalidRequest
from .json_body import JsonBody, parse_json
from .refusals import invalid_type
from .runtime import key_fingerprint
from .service import ResponsesService
from .store import StoredResponse

MAX_WAITING = 16
"""Creates that may wait behind the one in flight."""
_CREATE = "response.create"
_TRANSPORT_ONLY = ("type", "stream_id")


def error_frame(error: GatewayError) -> dict[str, Any]:
    """An error as a WebSocket frame, in OpenAI's shape."""
    return {"type": "error", "status": error.status, **error.body()}


class _Connection:
    def __init__(self, websocket: WebSocket, service: ResponsesService) -> None:
        self.websocket = websocket
        self.service = service
        self.api_key = key_fingerprint(websocket.headers.get("authorization"))
        self.recent: StoredResponse | None = None
        self.waiting: asyncio.Queue[JsonBody] = asyncio.Queue()
        self._sending = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._sending:  # one frame at a time: the reader answers too
            await self.websocket.send_text(json.dumps(frame, separators=(",", ":")))

    async def read(self) -> None:
        """Take frames until the client closes: each create waits its turn, the rest is answered."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("bytes") or (message.get("text") or "").encode()
            try:
                body = (parsed := await parse_json(raw)).value
                if not isinstance(body, dict):
                    raise invalid_type("body", "an object", body)
                if body.get("type") != _CREATE:
                    raise InvalidRequest(f"Invalid value: {json.dumps(body.get('type'))}. Supported values are: "
                                         f"'{_CREATE}'.", param="type", code="invalid_value")
                if self.waiting.qsize() >= MAX_WAITING:
                    raise InvalidRequest(f"This connection has {MAX_WAITING} requests waiting behind the one in "
                                         "flight: send the next once one ends.", code="too_many_waiting_requests")
            except GatewayError as error:
                await self.send(error_frame(error))
                continue
            self.waiting.put_nowait(JsonBody(body, parsed.size))

    async def answer(self) -> None:
        """Answer the creates in order, each to its end."""
        while True:
            await self._create(await self.waiting.get())

    async def _create(self, frame: JsonBody) -> None:
        body = {key: value for key, value in frame.value.items() if key not in _TRANSPORT_ONLY} | {"stream": True}
        try:
            if body.get("background") is True:
                raise InvalidRequest("background is not supported over WebSocket.", param="background",
                                     code="unsupported_value")
            run = await self.service.start(JsonBody(body, frame.size), self.api_key, self.recent)
        except GatewayError as error:
            if self.recent is not None and body.get("previous_response_id") == self.recent.response["id"]:
                self.recent = None
            await self.send(error_frame(error))
            return
        try:
            async for event in run.log.follow(-1):
                await self.send(event)
        finally:
            if run.task is not None and not run.task.done():
                run.task.cancel()
                await asyncio.gather(run.task, return_exceptions=True)
        self.recent = run.ended


async def serve_responses_socket(websocket: WebSocket, service: ResponsesService, max_s: float) -> None:
    """One WebSocket connection to `/v1/responses` (see the module's docstring)."""
    await websocket.accept()
    connection = _Connection(websocket, service)
    reader, answerer = asyncio.create_task(connection.read()), asyncio.create_task(connection.answer())
    try:
        done, _ = await asyncio.wait({reader, answerer}, timeout=max_s, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            await connection.send(error_frame(InvalidRequest(
                f"Responses websocket connection limit reached ({max_s / 60:g} minutes). Create a new websocket "
                "connection to continue.", code="websocket_connection_limit_reached")))
    except WebSocketDisconnect:
        pass
    finally:
        for task in (answerer, reader):
            task.cancel()
        await asyncio.gather(answerer, reader, return_exceptions=True)
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close()
