"""The servers a run needs, each on a loopback port in a thread of this process (`parity run`
and `record` on the embedded reference gateway, and other runs of many units, serve them from a
child process instead: `stack_process.py`): the scripted upstream, the MCP fixtures, the search
fixture (the `web_search` backend), and (for the `reference` target) the reference gateway, its
`web_search` pointed at the search fixture.

A stack's servers start together (`server_thread.py`), and stopping a stack stops exactly the
servers it started. What a stack serves is imported when it starts it: a run against a gateway
of your own, beside the fixtures `parity serve` runs, imports neither the fixtures' apps nor the
reference gateway (half a second of a one-scenario run).

The scripted upstream announces the MCP fixtures and the search fixture served beside it
(`GET /__parity/health`), so a run against a gateway finds the fixtures `parity serve` started
with the upstream it finds running, instead of starting others: the settings `parity serve`
printed are the ones the run uses. Served together, the MCP fixtures listen on the ports right
after the upstream's (`fixture_ports`), and the search fixture on the port after theirs
(`search_port`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2

from ...fixtures.mcp import FIXTURE_SERVERS
from ...fixtures.upstream import SERVICE_NAME
from ..scenario.fixtures import McpFixture
from .server_thread import ServerThread

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from ...fixtures.upstream.script import AdHocScript
    from .reference_gateway import ReferenceGateways


def import_servers() -> None:
    """Import what serving the scripted upstream, the search fixture and the reference gateway
    takes (most of a second), ahead of the first stack: a process that will serve them does it
    while it waits to be told how (the MCP fixtures: `fixtures.mcp.import_fixture_servers`)."""
    from ...fixtures.search import app as search_app  # noqa: F401
    from ...fixtures.upstream import app as upstream_app  # noqa: F401
    from . import reference_gateway  # noqa: F401


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
        try:
            for name in sorted(set(self.mcp_names)):
                base_url = self.mcp_running.get(name) or \
                    self._begin(FIXTURE_SERVERS[name](), self.mcp_ports.get(name, 0)).url
                self.mcp[name] = McpFixture(name, base_url)
            if self.upstream_url is None:
                self._begin_upstream()
            else:
                self.search_url = self.search_running
            if self.with_reference:
                from .reference_gateway import embedded_gateway_app  # the reference target only

                settings = {"admin_key": self.admin_key} | self.gateway_config
                self.reference_url = self._begin(embedded_gateway_app(self.upstream_url, self.search_url,
                                                                      **settings)).url
            for server in self._servers:
                server.wait_started()
        except BaseException:
            self.close()
            raise
        return self

    def _begin_upstream(self) -> None:
        """The scripted upstream, and the search fixture unless one runs already, starting."""
        from ...fixtures.search.app import build_search_app
        from ...fixtures.upstream.app import UpstreamState, build_upstream_app

        self.search_url = self.search_running or self._begin(build_search_app(), self.search_port).url
        app = build_upstream_app(UpstreamState(adhoc=self.adhoc_script, strict=self.strict_upstream),
                                 mcp_fixtures={name: fixture.base_url for name, fixture in self.mcp.items()},
                                 search_fixture=self.search_url)
        self.upstream_url = self._begin(app, self.upstream_port).url

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def reference_gateways(self) -> ReferenceGateways | None:
        """Configured reference gateways, when this stack serves the reference target."""
        if not self.with_reference or self.upstream_url is None:
            return None
        from .reference_gateway import ReferenceGateways

        return ReferenceGateways(self.upstream_url, self.mcp, self.admin_key, self.gateway_config, self.search_url)

    def close(self) -> None:
        """Stop every server the stack started, all at once (one by one, each waits a tick)."""
        for server in self._servers:
            server.ask_to_stop()
        for server in self._servers:
            server.wait_stopped()
        self._servers.clear()
