"""Where responses are kept: the `ResponseStore` interface and its SQLite implementation.

A stored response is the Response object the client sees, the input items it was created
from (with ids), and the `Chain` a continuation needs. Secrets never get here: MCP
`authorization` and header values live only in the request being served.

SQLite runs in worker threads behind one lock (a connection is used by one thread at a
time); a file database uses WAL so readers do not wait for writers.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from .chain import Chain


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    chain: Chain

    @property
    def id(self) -> str:
        return self.response["id"]


class ResponseStore(Protocol):
    async def save(self, record: StoredResponse) -> None: ...
    async def get(self, response_id: str) -> StoredResponse | None: ...
    async def delete(self, response_id: str) -> bool: ...
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    chain TEXT NOT NULL
);
"""


class SqliteStore:
    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        def work() -> list[tuple[Any, ...]]:
            with self._lock:
                return self._db.execute(sql, params).fetchall()
        return await asyncio.to_thread(work)

    async def save(self, record: StoredResponse) -> None:
        response = record.response
        await self._run(
            "INSERT OR REPLACE INTO responses (id, created_at, status, response, input_items, chain) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (record.id, response["created_at"], response["status"], json.dumps(response),
             json.dumps(record.input_items), json.dumps(record.chain.to_json())),
        )

    async def get(self, response_id: str) -> StoredResponse | None:
        rows = await self._run("SELECT response, input_items, chain FROM responses WHERE id = ?", (response_id,))
        if not rows:
            return None
        response, input_items, chain = rows[0]
        return StoredResponse(json.loads(response), json.loads(input_items), Chain.from_json(json.loads(chain)))

    async def delete(self, response_id: str) -> bool:
        found = await self._run("SELECT 1 FROM responses WHERE id = ?", (response_id,))
        await self._run("DELETE FROM responses WHERE id = ?", (response_id,))
        return bool(found)

    def close(self) -> None:
        with self._lock:
            self._db.close()
