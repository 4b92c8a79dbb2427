"""Tool listings, with those of the gateway's own MCP servers cached for a while.

A request-level server is listed every time it is needed (it comes with the request's own
credentials and may change between requests). A server from the gateway's configuration is
listed once per TTL (default 10 minutes); a failed listing is not cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .mcp_servers import ListedTool, McpConnector, McpServer


class ToolCatalog:
    def __init__(self, connector: McpConnector, ttl_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._connector = connector
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[tuple[str, str], tuple[float, list[ListedTool]]] = {}

    async def list_tools(self, server: McpServer, cached: bool) -> list[ListedTool]:
        if not cached or self._ttl_s <= 0:
            return await self._connector.list_tools(server)
        key = (server.label, server.url)
        entry = self._entries.get(key)
        if entry is not None and self._clock() < entry[0]:
            return entry[1]
        tools = await self._connector.list_tools(server)
        self._entries[key] = (self._clock() + self._ttl_s, tools)
        return tools
