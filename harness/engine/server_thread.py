"""One ASGI app served by uvicorn on a loopback port, in a thread of this process: how a run's
stack serves its fixtures and the reference gateway, and how `parity serve` and the proxy serve
theirs. Its socket is bound before it starts, so a port given as 0 is free and known at once."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from ...openai_contract.request_body import MAX_BODY_BYTES
from ..defaults import LOOPBACK
from ..errors import HarnessError

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
KEEP_ALIVE_S = 30
WS_FRAME_ROOM = 2**20
"""How much larger than a body a WebSocket frame may be, so an app can refuse a frame too
large itself rather than have the connection closed under it."""
_START_POLL_S = 0.05
"""How often a server being waited for is looked at, whether it has died starting."""
_STOP_POLL_S = 0.002
"""How often a stopping server looks whether its connections have closed."""


class _PromptServer(uvicorn.Server):
    """uvicorn's server, which notices `ask_to_stop` at once and stops as soon as its
    connections have: uvicorn's own looks at `should_exit` once a tick (0.1 s), pauses 0.1 s
    after asking its connections to close and looks again every 0.1 s, and every stack's stop
    waited for all of it."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self.serving = threading.Event()
        """Set once the server has started (its app's lifespan too) and listens."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.serving.set()

    async def main_loop(self) -> None:
        """uvicorn's loop of ticks (the date header, the exit check), each cut short by a stop."""
        wake = asyncio.Event()
        self._wake = asyncio.get_running_loop(), wake
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown: stop listening, close the idle connections, let those answering
        finish (their tasks cancelled after `timeout_graceful_shutdown`), then the app's lifespan
        shutdown; each wait ends when its condition holds, looked at every `_STOP_POLL_S`."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        """Once no connection is open and no task of a request runs, and the listeners have closed."""
        while self.server_state.connections or self.server_state.tasks:
            await asyncio.sleep(_STOP_POLL_S)
        for server in self.servers:
            await server.wait_closed()

    def ask_to_stop(self) -> None:
        """Safe from any thread, before, while and after serving."""
        self.should_exit = True
        if self._wake is not None:
            loop, wake = self._wake
            with contextlib.suppress(RuntimeError):  # the loop has closed: it has stopped already
                loop.call_soon_threadsafe(wake.set)


class ServerThread:
    """One ASGI app served by uvicorn on a loopback port, in a daemon thread; `http`, when
    given, is the protocol (factory) that serves HTTP instead of uvicorn's own."""

    def __init__(self, app: ASGIApp, port: int = 0, host: str = LOOPBACK, *, http: Any = "auto") -> None:
        # Named TCP, so asyncio sets TCP_NODELAY on every accepted connection; with protocol 0 it
        # does not, and each answer written as head then body waits ~40 ms for a delayed ACK.
        # (uvloop sets it on every TCP connection anyway.)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as error:
            self._socket.close()
            if error.errno == errno.EADDRINUSE:
                raise HarnessError(f"port {port} is already in use on {host} (another server listens there)") from error
            raise HarnessError(f"cannot listen on {host}:{port}: {error.strerror}") from error
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        # Idle connections are kept longer than an httpx2 client keeps them (5 s): were both 5 s, a
        # client could send on a connection at the moment the server closes it ("disconnected
        # without sending a response"), a spurious failure on a busy machine.
        # "auto": uvloop and httptools where they are installed (a dependency wherever they have
        # wheels), asyncio and h11 elsewhere. uvicorn installs no signal handler outside the main
        # thread, so the loop may run in this one. No `log_config`: with uvicorn's own, each new
        # server re-applied it, setting uvicorn's loggers to INFO until its `log_level` set them
        # back, so a server already running could print INFO lines in between; only the level is
        # set (warnings and errors still reach standard error).
        config = uvicorn.Config(app, loop="auto", http=http, log_level="warning", log_config=None, lifespan="on",
                                timeout_graceful_shutdown=2, timeout_keep_alive=KEEP_ALIVE_S,
                                ws_max_size=MAX_BODY_BYTES + WS_FRAME_ROOM)
        self._server = _PromptServer(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"parity-server-{self.port}", daemon=True)
        self._started_at = 0.0

    def start(self) -> ServerThread:
        return self.begin().wait_started()

    def begin(self) -> ServerThread:
        """Start serving without waiting for it (`wait_started` waits): its URL is known already."""
        self._started_at = time.monotonic()
        self._thread.start()
        return self

    def wait_started(self) -> ServerThread:
        deadline = self._started_at + START_TIMEOUT_S
        while not self._server.serving.wait(_START_POLL_S):  # polled only to notice a server that died
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise HarnessError(f"the server on {self.url} did not start")
        return self

    def stop(self, timeout: float | None = STOP_TIMEOUT_S) -> None:
        self.ask_to_stop()
        self.wait_stopped(timeout)

    def ask_to_stop(self) -> None:
        """Tell the server to stop; `wait_stopped` waits."""
        self._server.ask_to_stop()

    def wait_stopped(self, timeout: float | None = STOP_TIMEOUT_S) -> None:
        """Wait until it stopped, its lifespan's end included (for at most `timeout` seconds;
        None: however long that takes)."""
        self._thread.join(timeout)
        self._socket.close()
