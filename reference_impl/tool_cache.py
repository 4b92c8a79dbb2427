"""Reuse the result of an identical tool call made within a TTL: same API key, same server,
same tool, same arguments (compared in canonical JSON).

Entries live in the store, HMAC-signed with a secret from the settings over their key, value
and expiry: an entry someone edited, or copied under another key, fails the check and is
ignored (and logged). Off by default (TTL 0), so tool-run counts elsewhere stay exact.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from .mcp_servers import CallResult, McpServer

logger = logging.getLogger("responses_parity.reference_impl.tool_cache")


class CacheBackend(Protocol):
    async def cache_get(self, key: str) -> tuple[str, str, float] | None: ...
    async def cache_put(self, key: str, value: str, signature: str, expires_at: float) -> None: ...


def canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ToolResultCache:
    """The cache as one API key sees it (`scope` is that key's fingerprint)."""

    def __init__(self, backend: CacheBackend, secret: bytes, ttl_s: float, scope: str,
                 clock: Callable[[], float] = time.time) -> None:
        self._backend = backend
        self._secret = secret
        self._ttl_s = ttl_s
        self._scope = scope
        self._clock = clock

    def key(self, server: McpServer, tool: str, arguments: dict[str, Any]) -> str:
        material = "\n".join((self._scope, server.label, server.url, tool, canonical(arguments)))
        return hashlib.sha256(material.encode()).hexdigest()

    def _sign(self, key: str, value: str, expires_at: float) -> str:
        return hmac.new(self._secret, f"{key}\n{value}\n{expires_at!r}".encode(), hashlib.sha256).hexdigest()

    async def get(self, server: McpServer, tool: str, arguments: dict[str, Any]) -> CallResult | None:
        key = self.key(server, tool, arguments)
        entry = await self._backend.cache_get(key)
        if entry is None:
            return None
        value, signature, expires_at = entry
        if not hmac.compare_digest(signature, self._sign(key, value, expires_at)):
            logger.warning("tool cache entry %s failed its signature check; ignored", key[:12])
            return None
        if self._clock() >= expires_at:
            return None
        data = json.loads(value)
        return CallResult(data["output"], data["error"], data["model_text"])

    async def put(self, server: McpServer, tool: str, arguments: dict[str, Any], result: CallResult) -> None:
        key = self.key(server, tool, arguments)
        value = json.dumps({"output": result.output, "error": result.error, "model_text": result.model_text})
        expires_at = self._clock() + self._ttl_s
        await self._backend.cache_put(key, value, self._sign(key, value, expires_at), expires_at)
