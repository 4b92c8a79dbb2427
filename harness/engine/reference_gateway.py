"""The reference gateway as a target: the one module of the harness that imports `reference_impl`
(the harness judges the gateway; what both take as given comes from `openai_contract`). The
runs' stack and `parity serve` build it from what is named here; a run against another gateway
imports neither this module nor the gateway."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp

from ...reference_impl import ConfigError, GatewayConfig, McpServerConfig, build_gateway_app
from ...reference_impl.config import WebSearchConfig
from ..errors import HarnessError
from ..scenario.fixtures import McpFixture
from .server_thread import ServerThread

if TYPE_CHECKING:
    from ..scenario.model import GatewaySetup

__all__ = ["GATEWAY_LOGGER", "ConfigError", "GatewayConfig", "McpServerConfig", "ReferenceGateways",
           "WebSearchConfig", "build_gateway_app", "embedded_gateway_app", "reference_config"]
GATEWAY_LOGGER = "responses_parity.reference_impl"
"""The logger every module of the gateway logs under."""
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


def embedded_gateway_app(upstream_url: str, search_url: str | None, **settings: Any) -> ASGIApp:
    """The reference gateway of a run's stack (`reference_config`), its warnings and its form
    parser's quietened in this process: they are what scenarios provoke on purpose (a server with
    no valid tool, a tampered cache entry, a probe's broken upload, answered with a 400), and
    findings report what matters."""
    for logger in (GATEWAY_LOGGER, MULTIPART_LOGGER):
        logging.getLogger(logger).setLevel(logging.ERROR)
    return build_gateway_app(reference_config(upstream_url, search_url, **settings))


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
