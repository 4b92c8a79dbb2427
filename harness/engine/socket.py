"""Creating responses over a WebSocket, as OpenAI's WebSocket mode does: one connection per
scenario run in `websocket` mode, opened at its first create and kept for the next ones; each
create a `response.create` frame, its answer an `Exchange` as `wire/websocket.py` makes it.

Bounds as for HTTP: at most `max_answer_bytes` a frame, every answer within the target's
timeout from its create; a frame that is not a JSON object ends the answer (a `wire.framing`
defect); a target that closes the connection, or answers nothing in time, gives an exchange
with `transport_error` set, and the next create opens a new connection.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection, connect

from ..scenario.model import Disconnect
from ..wire.exchange import Exchange
from ..wire.websocket import answered, create_frame, ended, frame_value, socket_exchange, socket_url_of
from .targets import CONNECT_DEADLINE_S, Target, Trigger


def socket_url(target: Target) -> str:
    """Where the target's WebSocket mode is: its Responses path, on `ws` (`wss` for `https`)."""
    return socket_url_of(target.url(target.responses_path))


class Socket:
    """A scenario run's WebSocket to the target, opened when a create needs it."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._connection: ClientConnection | None = None

    async def create(self, body: dict[str, Any], *, disconnect: Disconnect | None = None,
                     disconnect_when: Trigger | None = None) -> Exchange:
        """Send one create and read its answer (see the module's docstring); with `disconnect`,
        the connection is closed early, on purpose."""
        frame = create_frame(body)
        exchange = socket_exchange(socket_url(self.target), frame)
        started = time.monotonic()
        frames: list[dict[str, Any]] = []
        trigger = asyncio.create_task(disconnect_when()) if disconnect_when is not None else None
        try:
            connection = await self._open()
            await connection.send(json.dumps(frame))
            limit = disconnect.after_seconds if disconnect and disconnect.after_seconds else self.target.timeout_s
            async with asyncio.timeout(limit):
                while not ended(frames):
                    received = await self._next(connection, trigger)
                    if received is None:
                        exchange.disconnected = True
                        break
                    exchange.event_times_s.append(time.monotonic() - started)
                    value = frame_value(received, len(frames), exchange)
                    if value is None:
                        break
                    frames.append(value)
                    if disconnect is not None and frames[-1].get("type") == disconnect.after_event:
                        exchange.disconnected = True
                        break
        except TimeoutError:
            if disconnect is not None and disconnect.after_seconds:
                exchange.disconnected = True
            else:
                exchange.transport_error = f"no complete answer within {self.target.timeout_s:g}s"
        except (OSError, websockets.WebSocketException) as error:
            exchange.transport_error = f"{type(error).__name__}: {error}"
        finally:
            if trigger is not None:
                trigger.cancel()
        if exchange.disconnected or exchange.transport_error:
            await self.close()
        answered(exchange, frames)
        exchange.elapsed_s = time.monotonic() - started
        return exchange

    async def _open(self) -> ClientConnection:
        if self._connection is None:
            self._connection = await connect(
                socket_url(self.target), additional_headers=dict(self.target.headers), proxy=None,
                open_timeout=min(self.target.timeout_s, CONNECT_DEADLINE_S), compression=None,
                max_size=self.target.max_answer_bytes, ping_interval=None)
        return self._connection

    async def _next(self, connection: ClientConnection, trigger: asyncio.Task[bool] | None) -> str | bytes | None:
        """The next frame, or None once `trigger` says to go away first."""
        receiving = asyncio.ensure_future(connection.recv())
        if trigger is None:
            return await receiving
        done, _ = await asyncio.wait({receiving, trigger}, return_when=asyncio.FIRST_COMPLETED)
        if receiving in done:
            return receiving.result()
        if trigger.result():
            receiving.cancel()
            return None
        return await receiving  # it gave up waiting: the client stays

    async def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()

