"""The tool-result cache: identical calls reuse a result within the TTL, and a forged or moved
entry is rejected by its signature."""

from __future__ import annotations

import asyncio

from responses_parity.reference_impl.mcp_servers import CallResult, McpServer
from responses_parity.reference_impl.store import SqliteStore
from responses_parity.reference_impl.tool_cache import ToolResultCache

SERVER = McpServer("calc", "http://127.0.0.1:1/mcp")
RESULT = CallResult("3", None, "3")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_identical_calls_within_the_ttl_reuse_the_result() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    cache = ToolResultCache(store, b"secret", 60, "key-a", clock)

    async def go() -> list:
        await cache.put(SERVER, "add", {"a": 1, "b": 2}, RESULT)
        same_in_other_order = await cache.get(SERVER, "add", {"b": 2, "a": 1})
        other_arguments = await cache.get(SERVER, "add", {"a": 1, "b": 3})
        other_key = await ToolResultCache(store, b"secret", 60, "key-b", clock).get(SERVER, "add", {"a": 1, "b": 2})
        clock.now += 61
        expired = await cache.get(SERVER, "add", {"a": 1, "b": 2})
        return [same_in_other_order, other_arguments, other_key, expired]

    assert asyncio.run(go()) == [RESULT, None, None, None]


def test_a_forged_or_moved_entry_is_rejected() -> None:
    store = SqliteStore(":memory:")
    cache = ToolResultCache(store, b"secret", 60, "key-a", Clock())
    original = cache.key(SERVER, "add", {"a": 1, "b": 2})
    other = cache.key(SERVER, "add", {"a": 9, "b": 9})

    async def go() -> list:
        await cache.put(SERVER, "add", {"a": 1, "b": 2}, RESULT)
        value, signature, expires_at = await store.cache_get(original)
        await store.cache_put(other, value, signature, expires_at)
        moved = await cache.get(SERVER, "add", {"a": 9, "b": 9})
        await store.cache_put(original, value.replace('"3"', '"999"'), signature, expires_at)
        forged = await cache.get(SERVER, "add", {"a": 1, "b": 2})
        wrong_secret = await ToolResultCache(store, b"other", 60, "key-a", Clock()).get(SERVER, "add", {"a": 9, "b": 9})
        return [moved, forged, wrong_secret]

    assert asyncio.run(go()) == [None, None, None]
