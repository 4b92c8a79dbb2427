"""What every loop run shares, on both surfaces: settings, the store, the upstream adapter,
guarded MCP access with its tool catalog, the tool-result cache, the per-key run limit, and how
a run is launched (`Runtime.launch`)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .client import FileSearchTool, HostedTool, Tool, WebSearchTool
from .config import GatewayConfig
from .errors import GatewayError, InvalidRequest, RateLimited
from .hosted_tools import hosted_runners
from .loop.state import LoopContext, LoopRequest, ServerBinding
from .mcp_servers import McpConnector, McpServer
from .outbound import OutboundPolicy, Resolver, guarded_client_factory, system_resolver
from .sealing import KEY_NAME, Sealer, new_key
from .search_providers import search_provider
from .store import SqliteStore
from .tool_cache import ToolResultCache
from .tool_catalog import ToolCatalog
from .upstream import UpstreamClient, make_adapter
from .upstream.adapter import UpstreamAdapter
from .vector_stores import VectorStoreExpired, expired
from .web_search import WebSearchProvider

RETRY_AFTER_S = 1
T = TypeVar("T")


def key_fingerprint(authorization: str | None) -> str:
    """Who is calling, for per-key limits and caches, without keeping the key."""
    return hashlib.sha256((authorization or "").encode()).hexdigest()[:16]


@dataclass
class RunLimiter:
    """At most `limit` loop runs at once per API key; one more is a 429 with a retry hint."""

    limit: int
    running: dict[str, int] = field(default_factory=dict)

    def acquire(self, key: str) -> Callable[[], None]:
        """Take a slot for `key`; returns the function that gives it back."""
        if self.running.get(key, 0) >= self.limit:
            raise RateLimited(f"Rate limit reached: at most {self.limit} requests may run at once for this API "
                              f"key. Please try again in {RETRY_AFTER_S}s.", RETRY_AFTER_S)
        self.running[key] = self.running.get(key, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.running[key] -= 1

        return release


@dataclass
class Runtime:
    config: GatewayConfig
    store: SqliteStore
    http: UpstreamClient
    adapter: UpstreamAdapter
    connector: McpConnector
    catalog: ToolCatalog
    limiter: RunLimiter
    sealer: Sealer
    """Seals and opens compaction and reasoning items' `encrypted_content`, with the key the store keeps."""
    web_search: WebSearchProvider | None = None
    """The `web_search` tool's backend (None: the gateway offers no web search)."""

    @classmethod
    def build(cls, config: GatewayConfig, resolver: Resolver = system_resolver) -> Runtime:
        http = UpstreamClient(config.upstream_timeout_s)
        policy = OutboundPolicy.from_settings(config.outbound_block, config.outbound_allow)
        clients = guarded_client_factory(policy, resolver)
        connector = McpConnector(config.mcp_timeout_s, clients)
        store = SqliteStore(config.store_path, config.retention)
        web_search = None if config.web_search is None else search_provider(config.web_search, clients)
        return cls(config, store, http, make_adapter(config, http), connector,
                   ToolCatalog(connector, config.tool_listing_ttl_s), RunLimiter(config.max_concurrent_runs),
                   Sealer(store.gateway_key(KEY_NAME, new_key)), web_search)

    def configured_bindings(self, taken: set[str], approvals: bool) -> list[ServerBinding]:
        """Bindings for the enabled servers of the configuration whose label is not taken;
        without `approvals` (a surface with no approval flow) none asks for approval."""
        bindings = []
        for configured in self.config.mcp_servers:
            if configured.enabled and configured.label not in taken:
                server = McpServer(configured.label, configured.url, configured.transport, dict(configured.headers),
                                   visible=not configured.hidden)
                bindings.append(ServerBinding(server, None, approvals and configured.require_approval == "always"))
        return bindings

    async def check_hosted_tools(self, tools: Sequence[Tool], where: str = "tools") -> None:
        """Refuse hosted tools this gateway cannot run: a web search with no provider configured
        (400), a file search over a vector store that does not exist (404) or has expired (400,
        as its `/search` endpoint answers); the error names the tool as `where[i]`."""
        for index, tool in enumerate(tools):
            if isinstance(tool, WebSearchTool) and self.web_search is None:
                raise InvalidRequest(f"This gateway has no web search provider configured, so it cannot run tools "
                                     f"of type '{tool.type}'.", param=f"{where}[{index}]", code="unsupported_value")
            if isinstance(tool, FileSearchTool):
                for store_id in dict.fromkeys(tool.vector_store_ids):  # a store named again is looked up once
                    param = f"{where}[{index}].vector_store_ids[{tool.vector_store_ids.index(store_id)}]"
                    found = await self.store.get_vector_store(store_id)
                    if found is None:
                        raise GatewayError(404, f"Vector store with id '{store_id}' not found.",
                                           type="invalid_request_error", param=param)
                    if expired(found, time.time()):
                        raise VectorStoreExpired(store_id, param)

    def _tool_cache(self, api_key: str) -> ToolResultCache | None:
        if self.config.tool_cache_ttl_s <= 0 or not self.config.tool_cache_secret:
            return None
        return ToolResultCache(self.store, self.config.tool_cache_secret.encode(), self.config.tool_cache_ttl_s,
                               api_key)

    async def launch(self, api_key: str, run: Callable[[], Coroutine[Any, Any, T]], *,
                     first: Callable[[], Awaitable[None]] | None = None) -> asyncio.Task[T]:
        """A loop run in a task of its own, on either surface: under the per-key limit (a 429
        when the key runs as many as it may), started after `first` (what must be stored before
        anyone hears of the run). The slot is given back when the task ends, however it ends,
        or at once when `first` fails."""
        release = self.limiter.acquire(api_key)
        try:
            if first is not None:
                await first()
            task = asyncio.create_task(run())
        except BaseException:
            release()
            raise
        task.add_done_callback(lambda _: release())
        return task

    def context(self, request: LoopRequest, api_key: str, hosted_tools: Sequence[HostedTool],
                **fields: Any) -> LoopContext:
        """A loop context with this runtime's collaborators, the key's tool-result cache, and
        runners of the request's hosted tools (checked first: `check_hosted_tools`); a hosted
        tool never takes the name of one of the client's functions."""
        web = self.config.web_search
        hosted = hosted_runners(hosted_tools, {t.name for t in request.function_tools}, self.store, self.web_search,
                                web.max_results if web else 5)
        return LoopContext(request=request, adapter=self.adapter, connector=self.connector, catalog=self.catalog,
                           tool_cache=self._tool_cache(api_key), hosted=hosted, **fields)

    async def close(self) -> None:
        await self.connector.aclose()
        await self.http.close()
        self.store.close()
