"""The Responses API over a WebSocket (OpenAI's WebSocket mode): `GET /v1/responses` upgraded.
Each `response.create` frame runs through the same service and agent loop as
`POST /v1/responses`; its events go out as they are appended, one JSON text frame each (no SSE
framing, no `[DONE]`), `sequence_number` from 0 for each response, as OpenAI sends them.

A connection:
- answers the creates of a lane one at a time, in the order they came: creates without a
  `stream_id` share the default lane, each `stream_id` (1-256 of `A-Za-z0-9_.-`) is a lane of its
  own whose events and errors echo it; lanes run side by side. It holds at most `MAX_ACTIVE`
  creates (running or waiting) and `MAX_LANES` named lanes: a create beyond them gets an error
  frame (`too_many_active_responses`, the reference's choice: OpenAI documents the limit, not
  what a create past it gets; `websocket_stream_limit_reached` for a lane too many, as OpenAI's
  spec shows). `stream` is implicit (a `stream` sent is taken); `background` is refused;
  `generate: false` is a warm-up (the tools listed, no model turn) whose id can be continued.
- keeps each lane's latest response, so a create continues it with `previous_response_id` even
  with `store: false`, from any lane; an id neither kept nor stored gets
  `previous_response_not_found`; a create that is refused forgets the response it continued
  (OpenAI evicts it).
- answers what it cannot take (a frame that is not a JSON object or larger than a body may be,
  a `type` other than `response.create`, a body OpenAI refuses) with an `error` frame in OpenAI's
  shape, `{type: error, status, error: {type, code, message, param}}`, and stays usable;
- lasts at most `websocket_max_s` (OpenAI: 60 minutes), then says
  `websocket_connection_limit_reached` and closes;
- cancels its responses in flight when the client closes the socket, as a client leaving an
  SSE stream does.
uvicorn holds at most its `ws_max_size` of a frame (the harness serves with room above
`MAX_BODY_BYTES` for the error frame); a larger one closes the connection (1009).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..openai_contract.request_body import MAX_BODY_BYTES, RequestTooLarge
from .errors import GatewayError, InvalidRequest
from .json_body import JsonBody, parse_json
from .refusals import invalid_type
from .runtime import key_fingerprint
from .service import ResponsesService
from .store import StoredResponse

MAX_ACTIVE = 16
"""Creates a connection holds at once, running or waiting (OpenAI's documented limit)."""
MAX_LANES = 32
"""Named lanes (`stream_id`s) a connection may open (OpenAI's documented limit)."""
_CREATE = "response.create"
_STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_SOCKET_ONLY = ("type", "stream_id", "generate")
"""Fields of a create frame that are not fields of `POST /v1/responses`."""


def error_frame(error: GatewayError | RequestTooLarge, stream_id: str | None = None) -> dict[str, Any]:
    """An error as a WebSocket frame, in OpenAI's shape (echoing the lane it refuses)."""
    lane = {"stream_id": stream_id} if stream_id is not None else {}
    if isinstance(error, RequestTooLarge):
        body = {"error": {"type": "invalid_request_error", "code": error.code, "message": error.message,
                          "param": None}}
        return {"type": "error", "status": error.status, **lane, **body}
    return {"type": "error", "status": error.status, **lane, **error.body()}


@dataclass
class _Lane:
    """The creates of one `stream_id` (None: the default lane), answered in order."""

    name: str | None
    waiting: asyncio.Queue[JsonBody] = field(default_factory=asyncio.Queue)
    recent: StoredResponse | None = None
    """Its latest response, which a create may continue even when it was not stored."""
    task: asyncio.Task[None] | None = None


class _Connection:
    def __init__(self, websocket: WebSocket, service: ResponsesService) -> None:
        self.websocket = websocket
        self.service = service
        self.api_key = key_fingerprint(websocket.headers.get("authorization"))
        self.lanes: dict[str | None, _Lane] = {}
        self.active = 0
        self.broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Set with the exception that stopped a lane (the client gone, or a fault): the end."""
        self._sending = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._sending:  # one frame at a time: every lane and the reader answer
            await self.websocket.send_text(json.dumps(frame, separators=(",", ":")))

    async def read(self) -> None:
        """Take frames until the client closes: each create joins its lane, the rest is answered."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("bytes") or (message.get("text") or "").encode()
            stream_id = None
            try:
                if len(raw) > MAX_BODY_BYTES:
                    raise RequestTooLarge(len(raw), MAX_BODY_BYTES)
                body = (parsed := await parse_json(raw)).value
                if not isinstance(body, dict):
                    raise invalid_type("body", "an object", body)
                stream_id = body.get("stream_id") if isinstance(body.get("stream_id"), str) else None
                lane = self._lane_for(body)
            except (GatewayError, RequestTooLarge) as error:
                await self.send(error_frame(error, stream_id))
                continue
            self.active += 1
            lane.waiting.put_nowait(JsonBody(body, parsed.size))

    def _lane_for(self, body: dict[str, Any]) -> _Lane:
        """The lane a create frame joins, opened if new; raises what refuses the frame."""
        if body.get("type") != _CREATE:
            raise InvalidRequest(f"Invalid value: {json.dumps(body.get('type'))}. Supported values are: "
                                 f"'{_CREATE}'.", param="type", code="invalid_value")
        name = body.get("stream_id")
        if name is not None and not (isinstance(name, str) and _STREAM_ID.fullmatch(name)):
            raise InvalidRequest("Invalid 'stream_id': expected 1 to 256 characters of letters, digits, '_', '.' "
                                 "and '-'.", param="stream_id", code="invalid_stream_id")
        if self.active >= MAX_ACTIVE:
            raise InvalidRequest(f"This connection has {MAX_ACTIVE} responses running or waiting: send the next "
                                 "once one ends.", code="too_many_active_responses")
        lane = self.lanes.get(name)
        if lane is None:
            if name is not None and sum(key is not None for key in self.lanes) >= MAX_LANES:
                raise InvalidRequest("This WebSocket connection has reached its stream limit.", param="stream_id",
                                     code="websocket_stream_limit_reached")
            lane = self.lanes[name] = _Lane(name)
            lane.task = asyncio.create_task(self._answer(lane))
        return lane

    async def _answer(self, lane: _Lane) -> None:
        """Answer a lane's creates in order, each to its end."""
        while True:
            frame = await lane.waiting.get()
            try:
                await self._create(lane, frame)
            except Exception as error:
                if not self.broken.done():
                    self.broken.set_exception(error)
                raise
            finally:
                self.active -= 1

    def _kept(self, response_id: Any) -> _Lane | None:
        """The lane whose latest response is `response_id`, if one is."""
        return next((lane for lane in self.lanes.values()
                     if lane.recent is not None and lane.recent.response["id"] == response_id), None)

    async def _create(self, lane: _Lane, frame: JsonBody) -> None:
        body = {key: value for key, value in frame.value.items() if key not in _SOCKET_ONLY} | {"stream": True}
        continued = self._kept(body.get("previous_response_id"))
        try:
            if body.get("background") is True:
                raise InvalidRequest("background is not supported over WebSocket.", param="background",
                                     code="unsupported_value")
            run = await self.service.start(JsonBody(body, frame.size), self.api_key,
                                           continued.recent if continued else None,
                                           generate=frame.value.get("generate") is not False)
        except GatewayError as error:
            if continued is not None:
                continued.recent = None
            await self.send(error_frame(error, lane.name))
            return
        echo = {"stream_id": lane.name} if lane.name is not None else {}
        try:
            async for event in run.log.follow(-1):
                await self.send(event | echo)
        finally:
            if run.task is not None and not run.task.done():
                run.task.cancel()
                await asyncio.gather(run.task, return_exceptions=True)
        lane.recent = run.ended

    async def close(self) -> None:
        """End every lane's work (its responses in flight are cancelled)."""
        tasks = [lane.task for lane in self.lanes.values() if lane.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.broken.done():
            self.broken.exception()  # seen: a lane that failed after the client left says nothing more


async def serve_responses_socket(websocket: WebSocket, service: ResponsesService, max_s: float) -> None:
    """One WebSocket connection to `/v1/responses` (see the module's docstring)."""
    await websocket.accept()
    connection = _Connection(websocket, service)
    reader = asyncio.create_task(connection.read())
    try:
        done, _ = await asyncio.wait({reader, connection.broken}, timeout=max_s, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            await connection.send(error_frame(InvalidRequest(
                f"Responses websocket connection limit reached ({max_s / 60:g} minutes). Create a new websocket "
                "connection to continue.", code="websocket_connection_limit_reached")))
        for ended in done:
            ended.result()  # a fault of the gateway's is raised (and logged by the server)
    except WebSocketDisconnect:
        pass
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await connection.close()
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close()
