"""Where state is kept: the store interfaces and their SQLite implementation.

- each response's Response object, the input items it was created from (with
  ids, a row each), the `Chain` a continuation needs, and (for background responses) its
  stream events.
- `ConversationStore`: conversations and their items, in order.
- `FileStore`: uploaded files (the Files API), their bytes kept in the database (written and
  read a piece at a time, as a blob: never the whole file in memory).
- `VectorStoreStore`: vector stores, the files attached to them (one by one or in file batches)
  and those files' text chunks (cut as the file's bytes are read, `chunking.py`), indexed by
  SQLite FTS5 (ranked by BM25).
- the audit trail of each loop run, and the signed tool-result cache (`tool_cache.py`).
- the gateway's own keys (the one sealing compaction items, `compaction.py`).

Every list is read a page at a time (`sql_page.py`): a page reads its own rows, whatever the
list's length.

What is kept, and for how long, is `Retention`'s (`retention.py`): old and surplus responses
are evicted, conversations are not.

Secrets never get here: MCP `authorization` and header values live only in the request being
served. A file database runs in worker threads, so a sync never blocks the event loop: writes
on one connection behind one lock (a connection is used by one thread at a time; what a write
encodes is encoded before the lock is taken), reads (a search's ranking too) on read-only
connections of their own, which neither take the lock nor wait for it. `:memory:` has no disk
to wait for and one connection, and runs on the event loop, which spares a thread hop (about
0.1 ms) per call. A file database uses WAL (readers do not wait for writers) with
`synchronous=FULL`: a commit syncs the WAL to
disk before it returns, so what was committed survives the process being killed and also a
power loss (NORMAL would survive only the former). A run's end is one
transaction (`save_end`), committed before any client can see that end; it is the only commit
a response makes unless it runs in the background (which also stores itself `queued` at once and
its events as they come, so they can be resumed).

A store file belongs to one gateway process at a time: opening it fails the responses a process
that died left `queued` or `in_progress` (with `RESTARTED`), their stored events ending as a
failed stream does, so polling sees a final state and a resumed stream ends.
"""

from __future__ import annotations

import asyncio
import codecs
import io
import json
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from .chain import Chain
from .chunking import text_chunks
from .event_log import EventLog
from .json_text import escaped_json
from .pagination import PageQuery
from .retention import AS_OPENAI, KEPT_SQL, Retention, sweep
from .sql_page import Listing, read_page

T = TypeVar("T")
P = TypeVar("P")
PIECE_BYTES = 2**20
"""How much of a file's bytes is read or written at a time."""
NOT_TEXT = {"code": "unsupported_file", "message": "The file is not UTF-8 text."}
RESTARTED = {"code": "server_error",
             "message": "The gateway restarted before this response finished; it was not completed."}
"""The `error` of a response that a restart found unfinished."""


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    """The input items a save stores (a save without them keeps those stored); `get` leaves
    them out: they are read a page at a time (`input_items_page`)."""
    chain: Chain
    streamed: bool = False
    """Created with `stream: true` (a background response can then be streamed again)."""

    @property
    def id(self) -> str:
        return self.response["id"]

    @cached_property
    def encoded(self) -> str:
        """The response as JSON (`escaped_json`): what the store keeps, and a JSON answer sends."""
        return escaped_json(self.response)


@dataclass(frozen=True)
class Conversation:
    id: str
    created_at: int
    metadata: dict[str, str]

    def resource(self) -> dict[str, Any]:
        return {"id": self.id, "object": "conversation", "created_at": self.created_at, "metadata": self.metadata}


@dataclass(frozen=True)
class StoredFile:
    """An uploaded file's metadata (its bytes are read with `FileStore.file_piece`)."""

    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    expires_at: int | None

    def resource(self) -> dict[str, Any]:
        """OpenAI's `file` object (the `openai` SDK's `FileObject`)."""
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at,
                "expires_at": self.expires_at, "filename": self.filename, "purpose": self.purpose,
                "status": "processed", "status_details": None}


@dataclass(frozen=True)
class StoredVectorStore:
    id: str
    name: str
    created_at: int
    metadata: dict[str, str]
    expires_after: dict[str, Any] | None
    last_active_at: int
    """When it was created or last searched; `expires_after` counts from here."""


@dataclass(frozen=True)
class StoredVectorStoreFile:
    """A file attached to a vector store; `last_error` is set when its text could not be read."""

    vector_store_id: str
    file_id: str
    created_at: int
    usage_bytes: int
    attributes: dict[str, str | float | bool] | None
    chunking: dict[str, int]
    """`max_chunk_size_tokens` and `chunk_overlap_tokens`."""
    last_error: dict[str, str] | None


@dataclass(frozen=True)
class StoredFileBatch:
    """Files attached to a vector store in one request; their state is that of the store's files."""

    id: str
    vector_store_id: str
    created_at: int
    file_ids: list[str]


@dataclass(frozen=True)
class Attachment:
    """A file to attach to a vector store, with its attributes and chunk sizes
    (`max_chunk_size_tokens`, `chunk_overlap_tokens`)."""

    vector_store_id: str
    file_id: str
    attributes: dict[str, str | float | bool] | None
    chunking: dict[str, int]


@dataclass(frozen=True)
class FileTally:
    """How many files a vector store (or one of its batches) has attached, how many of them
    failed, and the bytes of their chunks."""

    total: int = 0
    failed: int = 0
    usage_bytes: int = 0


class MissingFile(LookupError):
    """A file to attach is no longer kept (deleted, or past its `expires_at`)."""

    def __init__(self, file_id: str) -> None:
        super().__init__(file_id)
        self.file_id = file_id


Attributes = dict[str, str | float | bool]
"""A file's attributes in a vector store (what search filters compare)."""


@dataclass(frozen=True)
class Chunk:
    """A search hit: one chunk of an attached file, its BM25 rank (lower is better) and its file's attributes."""

    file_id: str
    filename: str
    text: str
    rank: float
    attributes: dict[str, str | float | bool] | None


class ConversationStore(Protocol):
    async def create_conversation(self, conversation: Conversation, items: list[dict[str, Any]]) -> None: ...
    async def get_conversation(self, conversation_id: str) -> Conversation | None: ...
    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation | None: ...
    async def delete_conversation(self, conversation_id: str) -> bool: ...
    async def add_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None: ...
    async def items(self, conversation_id: str) -> list[dict[str, Any]]: ...
    async def items_page(self, conversation_id: str, query: PageQuery) -> tuple[list[dict[str, Any]], bool]: ...
    async def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None: ...
    async def delete_item(self, conversation_id: str, item_id: str) -> bool: ...


class FileStore(Protocol):
    """Uploaded files; one past its `expires_at` is not found (and is swept with the rest), and
    deleting one also detaches it from every vector store (its chunks go with it)."""

    async def save_file(self, file: StoredFile, content: bytes | BinaryIO) -> None: ...
    async def get_file(self, file_id: str) -> StoredFile | None: ...
    async def files_page(self, purpose: str | None, query: PageQuery) -> tuple[list[StoredFile], bool]: ...
    async def file_piece(self, file_id: str, offset: int) -> bytes | None: ...
    async def delete_file(self, file_id: str) -> bool: ...


class VectorStoreStore(Protocol):
    """Vector stores and their files; deleting a store or a file drops its chunks from the index."""

    async def save_vector_store(self, store: StoredVectorStore) -> None: ...
    async def get_vector_store(self, store_id: str) -> StoredVectorStore | None: ...
    async def vector_stores_page(self, query: PageQuery) -> tuple[list[tuple[StoredVectorStore, FileTally]], bool]: ...
    async def file_tally(self, store_id: str, batch_id: str | None = None) -> FileTally: ...
    async def delete_vector_store(self, store_id: str) -> bool: ...
    async def attach_files(self, attachments: list[Attachment], batch: StoredFileBatch | None = None
                           ) -> list[StoredVectorStoreFile]: ...
    async def get_vector_store_file(self, store_id: str, file_id: str) -> StoredVectorStoreFile | None: ...
    async def vector_store_files_page(self, store_id: str, query: PageQuery, *, failed: bool | None = None,
                                      batch_id: str | None = None) -> tuple[list[StoredVectorStoreFile], bool]: ...
    async def delete_vector_store_file(self, store_id: str, file_id: str) -> bool: ...
    async def search_chunks(self, store_id: str, match: str, *, limit: int, good_enough: Callable[[float], bool],
                            keep: Callable[[Attributes | None], bool]) -> list[Chunk]: ...
    async def touch_vector_store(self, store_id: str, at: int) -> None: ...
    async def update_vector_store_file(self, file: StoredVectorStoreFile) -> None: ...
    async def get_file_batch(self, store_id: str, batch_id: str) -> StoredFileBatch | None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    streamed INTEGER NOT NULL DEFAULT 0,
    response TEXT NOT NULL,
    chain TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS response_input_items (
    response_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (response_id, position)
);
CREATE INDEX IF NOT EXISTS response_input_items_by_id ON response_input_items (response_id, item_id);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses (created_at);
CREATE INDEX IF NOT EXISTS responses_unfinished ON responses (status) WHERE status IN ('queued', 'in_progress');
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    sequence_number INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (response_id, sequence_number)
);
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
DROP TABLE IF EXISTS audit;  -- earlier versions' audit, a row per record and never evicted
CREATE TABLE IF NOT EXISTS audit_trails (
    run_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    records TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_trails_by_age ON audit_trails (created_at);
CREATE TABLE IF NOT EXISTS tool_cache (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    signature TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS gateway_keys (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_items (
    conversation_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (conversation_id, position)
);
CREATE INDEX IF NOT EXISTS conversation_items_by_id ON conversation_items (conversation_id, item_id);
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    filename TEXT NOT NULL,
    purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    content BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_age ON files (created_at);
CREATE TABLE IF NOT EXISTS vector_stores (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    expires_after TEXT,
    last_active_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS vector_stores_by_age ON vector_stores (created_at);
CREATE TABLE IF NOT EXISTS vector_store_file_batches (
    id TEXT PRIMARY KEY,
    vector_store_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    file_ids TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vector_store_files (
    vector_store_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    usage_bytes INTEGER NOT NULL,
    attributes TEXT,
    chunking TEXT NOT NULL,
    last_error TEXT,
    PRIMARY KEY (vector_store_id, file_id)
);
CREATE INDEX IF NOT EXISTS vector_store_files_by_age ON vector_store_files (vector_store_id, created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS vector_store_chunks USING fts5(
    text, vector_store_id UNINDEXED, file_id UNINDEXED
);
"""
_FILE_COLUMNS = "id, filename, purpose, bytes, created_at, expires_at"
_FILE_KEPT_SQL = "(expires_at IS NULL OR expires_at > ?)"
_ATTACHED_FILE_KEPT_SQL = f"file_id IN (SELECT id FROM files WHERE {_FILE_KEPT_SQL})"
"""A `vector_store_files` row whose uploaded file is not past its `expires_at` (the clock's now as parameter)."""
_VECTOR_STORE_COLUMNS = "id, name, created_at, metadata, expires_after, last_active_at"
_VECTOR_STORE_FILE_COLUMNS = "vector_store_id, file_id, created_at, usage_bytes, attributes, chunking, last_error"


def _upgrade(db: sqlite3.Connection) -> None:
    """A database an earlier version of the gateway wrote is brought to today's columns
    (`CREATE TABLE IF NOT EXISTS` adds only whole tables): a vector store's `last_active_at`
    starts at its creation; a response's input items, once one JSON array in its row, become
    rows of their own (so they can be read a page at a time)."""
    if "last_active_at" not in {row[1] for row in db.execute("PRAGMA table_info(vector_stores)")}:
        db.execute("ALTER TABLE vector_stores ADD COLUMN last_active_at INTEGER NOT NULL DEFAULT 0")
        db.execute("UPDATE vector_stores SET last_active_at = created_at")
    if "input_items" in {row[1] for row in db.execute("PRAGMA table_info(responses)")}:
        db.execute("INSERT OR REPLACE INTO response_input_items (response_id, position, item_id, item) "
                   "SELECT r.id, j.key, COALESCE(json_extract(j.value, '$.id'), ''), j.value "
                   "FROM responses r, json_each(r.input_items) j")
        db.execute("ALTER TABLE responses DROP COLUMN input_items")


class SqliteStore:
    """Both stores in one SQLite database (`:memory:` keeps nothing across restarts), keeping
    what `retention` says as of `clock` (seconds since the epoch)."""

    def __init__(self, path: str, retention: Retention = AS_OPENAI, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._path = path
        self._readers: list[sqlite3.Connection] = []
        """Idle read-only connections of `_read` (a file database only)."""
        self._readers_lock = threading.Lock()
        self._retention = retention
        self._clock = clock
        self._ends = 0
        self._off_loop: Callable[..., Awaitable[Any]] = _on_the_loop if path == ":memory:" else asyncio.to_thread
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._transaction(_upgrade)
        self._transaction(self._open)

    def _open(self, db: sqlite3.Connection) -> None:
        _fail_unfinished(db)
        sweep(db, self._retention, self._clock())

    def _ended(self, db: sqlite3.Connection) -> None:
        """Count a run's end (inside its transaction); every `sweep_every`-th one sweeps."""
        self._ends += 1
        if self._ends % self._retention.sweep_every == 0:
            sweep(db, self._retention, self._clock())

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one transaction, under the lock (in a worker thread, or at start-up)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return result

    async def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement on the writing connection, under the lock (reads go through `_read`)."""
        def work() -> list[tuple[Any, ...]]:
            with self._lock:
                return self._db.execute(sql, params).fetchall()
        return await self._off_loop(work)

    async def _many(self, statements: Statements) -> None:
        """Run statements in one transaction."""
        await self._off_loop(self._transaction, lambda db: _execute(db, statements))

    async def _write(self, prepare: Callable[[], P], write: Callable[[sqlite3.Connection, P], None]) -> None:
        """`write(db, prepare())` in one transaction; `prepare` runs before the lock is taken, in
        the worker thread (encoding a large value takes a while: no one waits for the lock
        meanwhile)."""
        def work() -> None:
            prepared = prepare()
            self._transaction(lambda db: write(db, prepared))
        await self._off_loop(work)

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work`'s reads, in one read transaction. A file database runs them on a read-only
        connection of their own in a worker thread: they neither take the store's lock nor wait
        for it (WAL lets them read beside a writer, as of the last commit). `:memory:` has one
        connection, so there they run under the lock."""
        if self._path == ":memory:":
            def locked() -> T:
                with self._lock:
                    return work(self._db)
            return await self._off_loop(locked)

        def apart() -> T:
            with self._readers_lock:
                db = self._readers.pop() if self._readers else None
            if db is None:
                db = sqlite3.connect(f"{Path(self._path).resolve().as_uri()}?mode=ro", uri=True,
                                     check_same_thread=False, isolation_level=None)
            try:
                db.execute("BEGIN")
                try:
                    return work(db)
                finally:
                    db.execute("COMMIT")
            finally:
                with self._readers_lock:
                    self._readers.append(db)
        return await asyncio.to_thread(apart)

    async def _select(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await self._read(lambda db: db.execute(sql, params).fetchall())

    async def _page(self, listing: Listing, query: PageQuery, make: Callable[[tuple[Any, ...]], P]
                    ) -> tuple[list[P], bool]:
        """One page of `listing` (see `sql_page.py`), each row made into what the caller lists."""
        rows, more = await self._read(lambda db: read_page(db, listing, query))
        return [make(row) for row in rows], more

    # -- responses -------------------------------------------------------------------------

    async def save(self, record: StoredResponse) -> None:
        await self._write(lambda: list(_response_upserts(record)), _execute)

    async def get(self, response_id: str) -> StoredResponse | None:
        """The stored response, without its input items."""
        rows = await self._select(f"SELECT response, chain, streamed FROM responses WHERE id = ? AND {KEPT_SQL}",
                               (response_id, self._cutoff()))
        if not rows:
            return None
        response, chain, streamed = rows[0]
        return StoredResponse(json.loads(response), [], Chain.from_json(json.loads(chain)), bool(streamed))

    async def response_json(self, response_id: str) -> str | None:
        """The stored response as JSON text, as it is kept: what a read of it answers (its chain,
        which may be long, is not read)."""
        rows = await self._select(f"SELECT response FROM responses WHERE id = ? AND {KEPT_SQL}",
                                  (response_id, self._cutoff()))
        return rows[0][0] if rows else None

    async def has_response(self, response_id: str) -> bool:
        return bool(await self._select(f"SELECT 1 FROM responses WHERE id = ? AND {KEPT_SQL}",
                                    (response_id, self._cutoff())))

    async def input_items_page(self, response_id: str, query: PageQuery) -> tuple[list[dict[str, Any]], bool]:
        """One page of a stored response's input items, and whether more follow."""
        listing = Listing("item", "FROM response_input_items WHERE response_id = ?", (response_id,), ("position",),
                          "item_id")
        return await self._page(listing, query, lambda row: json.loads(row[0]))

    async def delete(self, response_id: str) -> bool:
        found = await self.has_response(response_id)
        await self._many([(f"DELETE FROM {table} WHERE {column} = ?", (response_id,)) for table, column in
                          (("responses", "id"), ("response_events", "response_id"),
                           ("response_input_items", "response_id"))])
        return found

    async def save_events(self, response_id: str, events: list[dict[str, Any]]) -> None:
        await self._write(lambda: _event_inserts(response_id, events), _execute)

    async def save_end(self, run_id: str, audit: list[dict[str, Any]], *, response: StoredResponse | None = None,
                       events: list[dict[str, Any]] | None = None,
                       conversation_items: tuple[str, list[dict[str, Any]]] | None = None) -> None:
        """How a run ended, in one transaction: its audit records, the items it adds to its
        conversation, its response and its events (a chat completion stores only its audit);
        after a crash, all of them or none."""
        def prepare() -> tuple[Statements, list[tuple[str, str]]]:
            return ([self._audit_insert(run_id, audit), *_event_inserts(run_id, events or []),
                     *(_response_upserts(response) if response is not None else ())],
                    _encoded(conversation_items[1]) if conversation_items is not None else [])

        def write(db: sqlite3.Connection, prepared: tuple[Statements, list[tuple[str, str]]]) -> None:
            statements, appended = prepared
            _execute(db, statements)
            if conversation_items is not None:
                _append_items(db, conversation_items[0], appended)
            self._ended(db)
        await self._write(prepare, write)

    async def events(self, response_id: str) -> list[dict[str, Any]]:
        rows = await self._select("SELECT event FROM response_events WHERE response_id = ? ORDER BY sequence_number",
                               (response_id,))
        return [json.loads(row[0]) for row in rows]

    # -- conversations ---------------------------------------------------------------------

    async def create_conversation(self, conversation: Conversation, items: list[dict[str, Any]]) -> None:
        await self._write(lambda: [
            ("INSERT INTO conversations (id, created_at, metadata) VALUES (?, ?, ?)",
             (conversation.id, conversation.created_at, json.dumps(conversation.metadata))),
            *_item_inserts(conversation.id, 0, _encoded(items)),
        ], _execute)

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        rows = await self._select("SELECT created_at, metadata FROM conversations WHERE id = ? AND deleted = 0",
                               (conversation_id,))
        return Conversation(conversation_id, rows[0][0], json.loads(rows[0][1])) if rows else None

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation | None:
        await self._run("UPDATE conversations SET metadata = ? WHERE id = ? AND deleted = 0",
                        (json.dumps(metadata), conversation_id))
        return await self.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Marks the conversation deleted; as OpenAI documents, its items are not deleted."""
        found = await self.get_conversation(conversation_id)
        await self._run("UPDATE conversations SET deleted = 1 WHERE id = ?", (conversation_id,))
        return found is not None

    async def add_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        await self._write(lambda: _encoded(items), lambda db, encoded: _append_items(db, conversation_id, encoded))

    async def items(self, conversation_id: str) -> list[dict[str, Any]]:
        """Every item of the conversation, in order (the history a response continues)."""
        rows = await self._select("SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY position",
                               (conversation_id,))
        return [json.loads(row[0]) for row in rows]

    async def items_page(self, conversation_id: str, query: PageQuery) -> tuple[list[dict[str, Any]], bool]:
        """One page of the conversation's items, and whether more follow."""
        listing = Listing("item", "FROM conversation_items WHERE conversation_id = ?", (conversation_id,),
                          ("position",), "item_id")
        return await self._page(listing, query, lambda row: json.loads(row[0]))

    async def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        rows = await self._select("SELECT item FROM conversation_items WHERE conversation_id = ? AND item_id = ? "
                               "ORDER BY position LIMIT 1", (conversation_id, item_id))
        return json.loads(rows[0][0]) if rows else None

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        found = await self._select("SELECT 1 FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                                (conversation_id, item_id))
        await self._run("DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                        (conversation_id, item_id))
        return bool(found)

    # -- files -------------------------------------------------------------------------------

    async def save_file(self, file: StoredFile, content: bytes | BinaryIO) -> None:
        """Keep `file` with its bytes (`content`, or read from it a piece at a time, `file.bytes` of
        them: the whole is never held in memory)."""
        source = io.BytesIO(content) if isinstance(content, bytes) else content

        def work(db: sqlite3.Connection) -> None:
            row = db.execute(f"INSERT INTO files ({_FILE_COLUMNS}, content) VALUES (?, ?, ?, ?, ?, ?, zeroblob(?))",
                             (file.id, file.filename, file.purpose, file.bytes, file.created_at, file.expires_at,
                              file.bytes)).lastrowid
            with db.blobopen("files", "content", row) as blob:
                while piece := source.read(min(PIECE_BYTES, file.bytes - blob.tell())):
                    blob.write(piece)
        await self._off_loop(self._transaction, work)

    async def get_file(self, file_id: str) -> StoredFile | None:
        rows = await self._select(f"SELECT {_FILE_COLUMNS} FROM files WHERE id = ? AND {_FILE_KEPT_SQL}",
                               (file_id, self._clock()))
        return StoredFile(*rows[0]) if rows else None

    async def files_page(self, purpose: str | None, query: PageQuery) -> tuple[list[StoredFile], bool]:
        """One page of the files kept (of `purpose`, if given), and whether more follow."""
        listing = Listing(_FILE_COLUMNS, f"FROM files WHERE {_FILE_KEPT_SQL} AND (? IS NULL OR purpose = ?)",
                          (self._clock(), purpose, purpose), ("created_at", "rowid"), "id")
        return await self._page(listing, query, lambda row: StoredFile(*row))

    async def file_piece(self, file_id: str, offset: int) -> bytes | None:
        """Up to `PIECE_BYTES` of the file's bytes from `offset` (empty past its end); None when
        the file is not (or no longer) kept."""
        def work(db: sqlite3.Connection) -> bytes | None:
            row = _file_row(db, file_id, self._clock())
            if row is None:
                return None
            with db.blobopen("files", "content", row, readonly=True) as blob:
                blob.seek(min(offset, len(blob)))
                return blob.read(PIECE_BYTES)
        return await self._read(work)

    async def delete_file(self, file_id: str) -> bool:
        found = await self.get_file(file_id)
        await self._many([(f"DELETE FROM {table} WHERE file_id = ?", (file_id,))
                          for table in ("vector_store_chunks", "vector_store_files")]
                         + [("DELETE FROM files WHERE id = ?", (file_id,))])
        return found is not None

    # -- vector stores ---------------------------------------------------------------------

    async def save_vector_store(self, store: StoredVectorStore) -> None:
        await self._run(f"INSERT OR REPLACE INTO vector_stores ({_VECTOR_STORE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                        (store.id, store.name, store.created_at, json.dumps(store.metadata),
                         _json_or_null(store.expires_after), store.last_active_at))

    async def touch_vector_store(self, store_id: str, at: int) -> None:
        """Note that the store was active at `at` (its expiry counts from the last activity)."""
        await self._run("UPDATE vector_stores SET last_active_at = MAX(last_active_at, ?) WHERE id = ?", (at, store_id))

    async def get_vector_store(self, store_id: str) -> StoredVectorStore | None:
        rows = await self._select(f"SELECT {_VECTOR_STORE_COLUMNS} FROM vector_stores WHERE id = ?", (store_id,))
        return _vector_store(rows[0]) if rows else None

    async def vector_stores_page(self, query: PageQuery) -> tuple[list[tuple[StoredVectorStore, FileTally]], bool]:
        """One page of the vector stores, each with the tally of its files, and whether more follow."""
        listing = Listing(_VECTOR_STORE_COLUMNS, "FROM vector_stores WHERE 1", (), ("created_at", "rowid"), "id")

        def work(db: sqlite3.Connection) -> tuple[list[tuple[StoredVectorStore, FileTally]], bool]:
            rows, more = read_page(db, listing, query)
            return [(store, _tally(db, store.id, self._clock())) for store in map(_vector_store, rows)], more
        return await self._read(work)

    async def file_tally(self, store_id: str, batch_id: str | None = None) -> FileTally:
        """The tally of the store's files (those a batch attached, with `batch_id`)."""
        return await self._read(lambda db: _tally(db, store_id, self._clock(), batch_id))

    async def delete_vector_store(self, store_id: str) -> bool:
        found = await self.get_vector_store(store_id)
        await self._many([(f"DELETE FROM {table} WHERE vector_store_id = ?", (store_id,))
                          for table in ("vector_store_chunks", "vector_store_files", "vector_store_file_batches")]
                         + [("DELETE FROM vector_stores WHERE id = ?", (store_id,))])
        return found is not None

    async def attach_files(self, attachments: list[Attachment], batch: StoredFileBatch | None = None
                           ) -> list[StoredVectorStoreFile]:
        """Attach each file, its chunks cut from its stored bytes as they are read (replacing what
        it had, if attached), and keep `batch`, in one transaction: all of them or, when a file
        is no longer kept (`MissingFile`), none. A file whose bytes are not UTF-8 text is
        attached with no chunks and a `last_error`."""
        def work(db: sqlite3.Connection) -> list[StoredVectorStoreFile]:
            now = int(self._clock())
            attached = [_attach(db, attachment, now) for attachment in attachments]
            if batch is not None:
                db.execute("INSERT INTO vector_store_file_batches (id, vector_store_id, created_at, file_ids) "
                           "VALUES (?, ?, ?, ?)", (batch.id, batch.vector_store_id, batch.created_at,
                                                   json.dumps(batch.file_ids)))
            return attached
        return await self._off_loop(self._transaction, work)

    async def update_vector_store_file(self, file: StoredVectorStoreFile) -> None:
        """Keep an attached file's new `attributes` (its chunks stay as they are)."""
        await self._run("UPDATE vector_store_files SET attributes = ? WHERE vector_store_id = ? AND file_id = ?",
                        (_json_or_null(file.attributes), file.vector_store_id, file.file_id))

    async def get_file_batch(self, store_id: str, batch_id: str) -> StoredFileBatch | None:
        rows = await self._select("SELECT id, vector_store_id, created_at, file_ids FROM vector_store_file_batches "
                               "WHERE id = ? AND vector_store_id = ?", (batch_id, store_id))
        return StoredFileBatch(*rows[0][:3], json.loads(rows[0][3])) if rows else None

    async def get_vector_store_file(self, store_id: str, file_id: str) -> StoredVectorStoreFile | None:
        rows = await self._select(f"SELECT {_VECTOR_STORE_FILE_COLUMNS} FROM vector_store_files "
                               f"WHERE vector_store_id = ? AND file_id = ? AND {_ATTACHED_FILE_KEPT_SQL}",
                               (store_id, file_id, self._clock()))
        return _vector_store_file(rows[0]) if rows else None

    async def vector_store_files_page(self, store_id: str, query: PageQuery, *, failed: bool | None = None,
                                      batch_id: str | None = None) -> tuple[list[StoredVectorStoreFile], bool]:
        """One page of the store's files in the order they were attached (only the failed ones, or
        only the others, by `failed`; only those a batch attached, with `batch_id`), and whether
        more follow. A file past its `expires_at` is gone from every store at once (a sweep then
        removes it and its chunks)."""
        where, params = _attached_sql(store_id, self._clock(), batch_id)
        if failed is not None:
            where += f" AND last_error IS {'NOT ' if failed else ''}NULL"
        listing = Listing(_VECTOR_STORE_FILE_COLUMNS, f"FROM vector_store_files WHERE {where}", params,
                          ("created_at", "rowid"), "file_id")
        return await self._page(listing, query, _vector_store_file)

    async def delete_vector_store_file(self, store_id: str, file_id: str) -> bool:
        found = await self.get_vector_store_file(store_id, file_id)
        await self._many([(f"DELETE FROM {table} WHERE vector_store_id = ? AND file_id = ?", (store_id, file_id))
                          for table in ("vector_store_chunks", "vector_store_files")])
        return found is not None

    async def search_chunks(self, store_id: str, match: str, *, limit: int, good_enough: Callable[[float], bool],
                            keep: Callable[[Attributes | None], bool]) -> list[Chunk]:
        """The store's best chunks that FTS5 `match` finds, best BM25 rank first (ties in index
        order), with their file's name and attributes: at most `limit` of those whose file's
        attributes `keep` keeps (asked once a file), read until the first rank that is not
        `good_enough` (none after it is better). Only the chunks returned have their text read.
        A file past its `expires_at` is not searched. The search runs on a read connection of
        its own (`_read`): the store's lock stays free while SQLite ranks the chunks."""
        def work(db: sqlite3.Connection) -> list[Chunk]:
            kept: dict[str, bool] = {}
            found: list[tuple[int, str, str, float, Attributes | None]] = []
            for rowid, file_id, filename, rank, attributes in db.execute(
                    "SELECT c.rowid, c.file_id, f.filename, c.rank, v.attributes FROM vector_store_chunks c "
                    "JOIN vector_store_files v ON v.vector_store_id = c.vector_store_id AND v.file_id = c.file_id "
                    "JOIN files f ON f.id = c.file_id "
                    f"WHERE vector_store_chunks MATCH ? AND c.vector_store_id = ? AND c.{_ATTACHED_FILE_KEPT_SQL} "
                    "ORDER BY c.rank, c.rowid", (match, store_id, self._clock())):
                if not good_enough(rank):
                    break
                if file_id not in kept:
                    kept[file_id] = keep(_json_or_none(attributes))
                if kept[file_id]:
                    found.append((rowid, file_id, filename, rank, _json_or_none(attributes)))
                    if len(found) == limit:
                        break
            texts = dict(db.execute(f"SELECT rowid, text FROM vector_store_chunks WHERE rowid IN "
                                    f"({', '.join('?' * len(found))})", [row[0] for row in found]).fetchall())
            return [Chunk(file_id, filename, texts[rowid], rank, attributes)
                    for rowid, file_id, filename, rank, attributes in found]
        return await self._read(work)

    # -- audit and tool cache ----------------------------------------------------------------

    async def audit(self, run_id: str) -> list[dict[str, Any]]:
        rows = await self._select("SELECT records FROM audit_trails WHERE run_id = ?", (run_id,))
        return json.loads(rows[0][0]) if rows else []

    def _audit_insert(self, run_id: str, records: list[dict[str, Any]]) -> tuple[str, tuple[Any, ...]]:
        return ("INSERT OR REPLACE INTO audit_trails (run_id, created_at, records) VALUES (?, ?, ?)",
                (run_id, self._clock(), json.dumps([{"run_id": run_id} | record for record in records])))

    def _cutoff(self) -> float:
        return self._retention.cutoff(self._clock())

    async def cache_get(self, key: str) -> tuple[str, str, float] | None:
        rows = await self._select("SELECT value, signature, expires_at FROM tool_cache WHERE key = ?", (key,))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def cache_put(self, key: str, value: str, signature: str, expires_at: float) -> None:
        await self._run("INSERT OR REPLACE INTO tool_cache (key, value, signature, expires_at) VALUES (?, ?, ?, ?)",
                        (key, value, signature, expires_at))

    def gateway_key(self, name: str, make: Callable[[], str]) -> str:
        """The gateway's own key `name`, made by `make` the first time and kept from then on (so
        what it sealed can be opened after a restart); read once, at start-up."""
        def get_or_make(db: sqlite3.Connection) -> str:
            row = db.execute("SELECT value FROM gateway_keys WHERE name = ?", (name,)).fetchone()
            if row is not None:
                return str(row[0])
            value = make()
            db.execute("INSERT INTO gateway_keys (name, value) VALUES (?, ?)", (name, value))
            return value
        return self._transaction(get_or_make)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._readers_lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()


Statements = list[tuple[str, tuple[Any, ...]]]


def _json_or_null(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _vector_store(row: tuple[Any, ...]) -> StoredVectorStore:
    store_id, name, created_at, metadata, expires_after, last_active_at = row
    return StoredVectorStore(store_id, name, created_at, json.loads(metadata), _json_or_none(expires_after),
                             last_active_at)


def _file_row(db: sqlite3.Connection, file_id: str, now: float) -> int | None:
    """The rowid of a file kept at `now` (its bytes are read through it, as a blob)."""
    row = db.execute(f"SELECT rowid FROM files WHERE id = ? AND {_FILE_KEPT_SQL}", (file_id, now)).fetchone()
    return None if row is None else row[0]


def _text_pieces(db: sqlite3.Connection, file_id: str, now: float) -> Iterator[str]:
    """A kept file's bytes as text, a piece at a time (`MissingFile` if it is not kept, a
    `UnicodeDecodeError` where its bytes stop being UTF-8)."""
    row = _file_row(db, file_id, now)
    if row is None:
        raise MissingFile(file_id)
    decoder = codecs.getincrementaldecoder("utf-8")()
    with db.blobopen("files", "content", row, readonly=True) as blob:
        while piece := blob.read(PIECE_BYTES):
            yield decoder.decode(piece)
    yield decoder.decode(b"", final=True)


def _attach(db: sqlite3.Connection, attachment: Attachment, now: int) -> StoredVectorStoreFile:
    """Attach a file (in the caller's transaction), its chunks cut and indexed as its bytes are
    read; when they turn out not to be UTF-8 text, the chunks indexed so far go again."""
    key = (attachment.vector_store_id, attachment.file_id)
    db.execute("DELETE FROM vector_store_chunks WHERE vector_store_id = ? AND file_id = ?", key)
    db.execute("SAVEPOINT chunks")
    usage_bytes, last_error = 0, None
    try:
        sizes = attachment.chunking
        text = _text_pieces(db, attachment.file_id, now)
        for chunk in text_chunks(text, sizes["max_chunk_size_tokens"], sizes["chunk_overlap_tokens"]):
            db.execute("INSERT INTO vector_store_chunks (text, vector_store_id, file_id) VALUES (?, ?, ?)",
                       (chunk, *key))
            usage_bytes += len(chunk.encode())
    except UnicodeDecodeError:
        db.execute("ROLLBACK TO chunks")
        usage_bytes, last_error = 0, NOT_TEXT
    db.execute("RELEASE chunks")
    file = StoredVectorStoreFile(*key, now, usage_bytes, attachment.attributes, attachment.chunking, last_error)
    db.execute(f"INSERT OR REPLACE INTO vector_store_files ({_VECTOR_STORE_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (*key, file.created_at, file.usage_bytes, _json_or_null(file.attributes), json.dumps(file.chunking),
                _json_or_null(file.last_error)))
    return file


def _attached_sql(store_id: str, now: float, batch_id: str | None = None) -> tuple[str, tuple[Any, ...]]:
    """The `vector_store_files` rows of a store's files kept at `now` (of those a batch attached,
    with `batch_id`), as a condition and its parameters."""
    where, params = f"vector_store_id = ? AND {_ATTACHED_FILE_KEPT_SQL}", (store_id, now)
    if batch_id is None:
        return where, params
    return (where + " AND file_id IN (SELECT value FROM json_each((SELECT file_ids FROM vector_store_file_batches "
                    "WHERE id = ?)))", (*params, batch_id))


def _tally(db: sqlite3.Connection, store_id: str, now: float, batch_id: str | None = None) -> FileTally:
    where, params = _attached_sql(store_id, now, batch_id)
    total, failed, usage_bytes = db.execute(f"SELECT COUNT(*), COUNT(last_error), TOTAL(usage_bytes) "
                                            f"FROM vector_store_files WHERE {where}", params).fetchone()
    return FileTally(total, failed, int(usage_bytes))


def _vector_store_file(row: tuple[Any, ...]) -> StoredVectorStoreFile:
    store_id, file_id, created_at, usage_bytes, attributes, chunking, last_error = row
    return StoredVectorStoreFile(store_id, file_id, created_at, usage_bytes,
                                 _json_or_none(attributes), json.loads(chunking), _json_or_none(last_error))


def _response_upserts(record: StoredResponse) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The statements that store a response, and its input items if it has them (each item is
    encoded as its statement is taken)."""
    response = record.response
    yield ("INSERT OR REPLACE INTO responses (id, created_at, status, streamed, response, chain) "
           "VALUES (?, ?, ?, ?, ?, ?)",
           (record.id, response["created_at"], response["status"], int(record.streamed), record.encoded,
            json.dumps(record.chain.to_json())))
    for position, item in enumerate(record.input_items):
        yield ("INSERT OR REPLACE INTO response_input_items (response_id, position, item_id, item) VALUES (?, ?, ?, ?)",
               (record.id, position, item["id"], json.dumps(item)))


def _execute(db: sqlite3.Connection, statements: Statements) -> None:
    for sql, params in statements:
        db.execute(sql, params)


def _event_inserts(response_id: str, events: list[dict[str, Any]]) -> Statements:
    return [("INSERT OR REPLACE INTO response_events (response_id, sequence_number, event) VALUES (?, ?, ?)",
             (response_id, event["sequence_number"], json.dumps(event))) for event in events]


def _encoded(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Conversation items as stored: each one's id and JSON."""
    return [(item["id"], json.dumps(item)) for item in items]


def _item_inserts(conversation_id: str, start: int, items: list[tuple[str, str]]) -> Statements:
    return [("INSERT INTO conversation_items (conversation_id, position, item_id, item) VALUES (?, ?, ?, ?)",
             (conversation_id, start + offset, item_id, item)) for offset, (item_id, item) in enumerate(items)]


def _append_items(db: sqlite3.Connection, conversation_id: str, items: list[tuple[str, str]]) -> None:
    """Append encoded items to the conversation (its end read inside the caller's transaction)."""
    (last,) = db.execute("SELECT COALESCE(MAX(position), -1) FROM conversation_items WHERE conversation_id = ?",
                         (conversation_id,)).fetchone()
    _execute(db, _item_inserts(conversation_id, last + 1, items))


async def _on_the_loop(work: Callable[..., T], *args: Any) -> T:
    """`asyncio.to_thread`'s signature, for work that has nothing to wait for."""
    return work(*args)


def _fail_unfinished(db: sqlite3.Connection) -> None:
    """Fail what a process that died left unfinished, keeping the output items its stored events
    finished; those events go on with `error` and `response.failed`, as a failed stream ends."""
    rows = db.execute("SELECT id, response FROM responses WHERE status IN ('queued', 'in_progress')").fetchall()
    for response_id, raw in rows:
        events = [json.loads(row[0]) for row in db.execute(
            "SELECT event FROM response_events WHERE response_id = ? ORDER BY sequence_number", (response_id,))]
        done = {e["output_index"]: e["item"] for e in events if e["type"] == "response.output_item.done"}
        failed = json.loads(raw) | {"status": "failed", "error": RESTARTED,
                                    "output": [done[index] for index in sorted(done)]}
        log = EventLog.stored(events)
        log.append("error", {"error": {"type": "server_error", "param": None} | RESTARTED})
        log.append("response.failed", {"response": failed})
        db.execute("UPDATE responses SET status = 'failed', response = ? WHERE id = ?",
                   (json.dumps(failed), response_id))
        for sql, params in _event_inserts(response_id, log.appended[len(events):]):
            db.execute(sql, params)
