"""The servers a run needs, each on a loopback port in a thread of this process (`parity run`
and `record` on the embedded reference gateway, and other runs of many units, serve them from a
child process instead: `stack_process.py`): the scripted upstream, the MCP fixtures, the search
fixture (the `web_search` backend), and (for the `reference` target) the reference gateway, its
`web_search` pointed at the search fixture.

Every server binds its socket before it starts, so a port given as 0 is free and known at
once, and a stack's servers start together. Stopping a stack stops exactly the servers it
started.

The scripted upstream announces the MCP fixtures and the search fixture served beside it
(`GET /__parity/health`), so a run against a gateway finds the fixtures `parity serve` started
with the upstream it finds running, instead of starting others: the settings `parity serve`
printed are the ones the run uses. Served together, the MCP fixtures listen on the ports right
after the upstream's (`fixture_ports`), and the search fixture on the port after theirs
(`search_port`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2
import uvicorn
from starlette.types import ASGIApp

from ...fixtures.mcp import FIXTURE_SERVERS
from ...fixtures.search.app import build_search_app
from ...fixtures.upstream.app import SERVICE_NAME, UpstreamState, build_upstream_app
from ...fixtures.upstream.script import AdHocScript
from ...openai_contract.request_body import MAX_BODY_BYTES
from ..defaults import LOOPBACK
from ..errors import HarnessError
from ..scenario.fixtures import McpFixture
from .reference_gateway import (GATEWAY_LOGGER, ConfigError, GatewayConfig, McpServerConfig, WebSearchConfig,
                                build_gateway_app)

if TYPE_CHECKING:
    from ..scenario.model import GatewaySetup

MULTIPART_LOGGER = "python_multipart"
"""Where the form parser the gateway's uploads go through (python-multipart) logs."""
FIXTURE_RANGES = ("127.0.0.0/8",)
"""The reference gateway's outbound policy blocks loopback; the harness allows its fixtures there."""


def reference_config(upstream_url: str, search_url: str | None = None, **settings: Any) -> GatewayConfig:
    """A reference gateway's settings for harness runs: the scripted upstream, the search
    fixture at `search_url` as its `web_search` backend, and the loopback fixtures allowed by
    the outbound policy (unless `settings` say otherwise). Its admin routes exist only when
    `settings` give an `admin_key`."""
    defaults: dict[str, Any] = {"outbound_allow": FIXTURE_RANGES}
    if search_url is not None:
        defaults["web_search"] = WebSearchConfig("http", url=search_url)
    return GatewayConfig(upstream_url=f"{upstream_url}/v1", **(defaults | settings))


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


def fixture_ports(upstream_port: int) -> dict[str, int]:
    """Where the MCP fixtures listen when served with an upstream on `upstream_port`: the
    ports right after it, one per fixture in order of name."""
    return {name: upstream_port + offset for offset, name in enumerate(sorted(FIXTURE_SERVERS), 1)}


def search_port(upstream_port: int) -> int:
    """Where the search fixture listens when served with an upstream on `upstream_port`: the
    port after the MCP fixtures'."""
    return upstream_port + len(FIXTURE_SERVERS) + 1


@dataclass(frozen=True)
class Announced:
    """The fixtures a running scripted upstream announces as served beside it."""

    mcp: dict[str, str]
    """Base URL by MCP fixture name (empty when it serves none)."""
    search: str | None
    """The search fixture's base URL (None when it serves none)."""


HEALTH_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)
"""How long a scripted upstream may take to answer its health check: on a loaded machine it can
take seconds, and one taken for absent makes the run start another on its port."""


def running_upstream(url: str) -> Announced | None:
    """The fixtures a scripted upstream answering at `url` announces, or None when no scripted
    upstream answers there."""
    try:
        response = httpx2.get(f"{url.rstrip('/')}/__parity/health", timeout=HEALTH_TIMEOUT)
        health = response.json()
    except (httpx2.HTTPError, ValueError):
        return None
    if response.status_code != 200 or not isinstance(health, dict) or health.get("service") != SERVICE_NAME:
        return None
    mcp, search = health.get("mcp"), health.get("search")
    return Announced({str(name): str(base) for name, base in mcp.items()} if isinstance(mcp, dict) else {},
                     search if isinstance(search, str) else None)


@dataclass(frozen=True)
class ReferenceGateways:
    """Starts a reference gateway for one run, configured as a scenario's `gateway:` asks, its
    MCP servers pointing at the run's own fixture URLs."""

    upstream_url: str
    mcp: Mapping[str, McpFixture]
    admin_key: str = field(repr=False)
    """The key of their admin routes (`{{run.admin_key}}` in a scenario); never in a report."""
    base_config: Mapping[str, Any] = field(default_factory=dict)
    search_url: str | None = None

    def config(self, setup: GatewaySetup, run: str) -> GatewayConfig:
        servers = []
        for configured in setup.mcp_servers:
            fixture = self.mcp[configured.fixture].for_run(run)
            url = fixture.sse_url if configured.transport == "sse" else fixture.url
            servers.append(McpServerConfig(configured.label, url, configured.transport,
                                           require_approval=configured.require_approval, hidden=configured.hidden))
        settings = {"admin_key": self.admin_key} | dict(self.base_config) | setup.settings()
        if settings.get("upstream_wire", "responses") != "responses":
            settings.pop("upstream_chaining", None)  # chaining is a Responses-wire setting
        if settings.get("tool_cache_ttl_s"):
            settings["tool_cache_secret"] = f"parity-{run}"
        return reference_config(self.upstream_url, self.search_url, mcp_servers=tuple(servers), **settings)

    def serve(self, setup: GatewaySetup, run: str) -> ServerThread:
        """The gateway configured for this run, serving (`HarnessError` when the scenario's
        settings do not make a gateway)."""
        try:
            app = build_gateway_app(self.config(setup, run))
        except ConfigError as error:
            raise HarnessError(f"the reference gateway cannot be configured as the scenario asks: {error}") from error
        return ServerThread(app).start()

    @asynccontextmanager
    async def gateway(self, setup: GatewaySetup, run: str) -> AsyncIterator[str]:
        server = await asyncio.to_thread(self.serve, setup, run)
        try:
            yield server.url
        finally:
            await asyncio.to_thread(server.stop)


@dataclass
class Stack(AbstractContextManager["Stack"]):
    """Servers for one run. With `upstream_url` set, that upstream is used and none started;
    otherwise one starts on `upstream_port` (0: any free port), answering requests without a
    run marker from `adhoc_script` (and, `strict_upstream`, refusing what the model's API
    refuses). An MCP fixture named in `mcp_running` is used where it
    runs; the others start on their port in `mcp_ports` (default: any free port). The search
    fixture is the one at `search_running` when given; otherwise a stack that starts the
    upstream starts one on `search_port`, and one on a running upstream has none."""

    mcp_names: Iterable[str] = ()
    with_reference: bool = True
    upstream_url: str | None = None
    upstream_port: int = 0
    mcp_running: Mapping[str, str] = field(default_factory=dict)
    mcp_ports: Mapping[str, int] = field(default_factory=dict)
    search_running: str | None = None
    search_port: int = 0
    adhoc_script: AdHocScript | None = None
    strict_upstream: bool = False
    """The upstream it starts answers what the model's API refuses as that API would."""
    gateway_config: dict[str, Any] = field(default_factory=dict)
    admin_key: str = field(default_factory=secrets.token_urlsafe, init=False, repr=False)
    """The reference gateways' admin key, new for each stack (a stack served by a child
    process, `stack_process.py`, tells its parent); never in a report."""
    mcp: dict[str, McpFixture] = field(default_factory=dict, init=False)
    search_url: str | None = field(default=None, init=False)
    """The search fixture's base URL (None: a running upstream that announced none)."""
    reference_url: str | None = field(default=None, init=False)
    _servers: list[ServerThread] = field(default_factory=list, init=False)

    def _begin(self, app: ASGIApp, port: int = 0) -> ServerThread:
        """A server of the stack, starting: `__enter__` waits for them all at once."""
        server = ServerThread(app, port).begin()
        self._servers.append(server)
        return server

    def __enter__(self) -> Stack:
        # The embedded gateway's own warnings (a server with no valid tool, a tampered cache
        # entry) are what scenarios provoke on purpose, as are its form parser's (a probe's
        # broken upload, answered with a 400); findings report what matters.
        for logger in (GATEWAY_LOGGER, MULTIPART_LOGGER):
            logging.getLogger(logger).setLevel(logging.ERROR)
        try:
            for name in sorted(set(self.mcp_names)):
                base_url = self.mcp_running.get(name) or \
                    self._begin(FIXTURE_SERVERS[name](), self.mcp_ports.get(name, 0)).url
                self.mcp[name] = McpFixture(name, base_url)
            if self.upstream_url is None:
                self.search_url = self.search_running or self._begin(build_search_app(), self.search_port).url
                app = build_upstream_app(UpstreamState(adhoc=self.adhoc_script, strict=self.strict_upstream),
                                         mcp_fixtures={name: fixture.base_url for name, fixture in self.mcp.items()},
                                         search_fixture=self.search_url)
                self.upstream_url = self._begin(app, self.upstream_port).url
            else:
                self.search_url = self.search_running
            if self.with_reference:
                settings = {"admin_key": self.admin_key} | self.gateway_config
                self.reference_url = self._begin(build_gateway_app(reference_config(self.upstream_url, self.search_url,
                                                                                    **settings))).url
            for server in self._servers:
                server.wait_started()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def reference_gateways(self) -> ReferenceGateways | None:
        """Configured reference gateways, when this stack serves the reference target."""
        if not self.with_reference or self.upstream_url is None:
            return None
        return ReferenceGateways(self.upstream_url, self.mcp, self.admin_key, self.gateway_config, self.search_url)

    def close(self) -> None:
        """Stop every server the stack started, all at once (one by one, each waits a tick)."""
        for server in self._servers:
            server.ask_to_stop()
        for server in self._servers:
            server.wait_stopped()
        self._servers.clear()
