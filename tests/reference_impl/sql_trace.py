"""What a SQLite connection runs, from its trace callback, and how many commits that made (a
write outside an explicit transaction is a transaction, so a commit, of its own); and how many
rows its queries handed to Python (counted by a row factory, which SQLite's module calls once
a row)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class SqlTrace:
    def __init__(self) -> None:
        self.run: list[str] = []
        self.rows = 0

    def _row(self, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> tuple[Any, ...]:
        self.rows += 1
        return row

    def commits(self) -> int:
        commits, in_transaction = 0, False
        for sql in self.run:
            verb = _verb(sql)
            if verb == "BEGIN":
                in_transaction = True
            elif verb in ("COMMIT", "END", "ROLLBACK"):
                commits += verb != "ROLLBACK"
                in_transaction = False
            elif verb in WRITES and not in_transaction:
                commits += 1
        return commits

    def writes(self) -> list[str]:
        return [sql for sql in self.run if _verb(sql) in WRITES]

    @contextmanager
    def connections(self) -> Iterator[SqlTrace]:
        """Trace every SQLite connection opened meanwhile (for as long as it lives)."""
        connect = sqlite3.connect

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            connection.set_trace_callback(self.run.append)
            connection.row_factory = self._row
            return connection

        sqlite3.connect = traced
        try:
            yield self
        finally:
            sqlite3.connect = connect


def _verb(sql: str) -> str:
    return sql.split(None, 1)[0].upper()
