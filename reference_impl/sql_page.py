"""One page of a list, read from SQLite: OpenAI's cursor pagination (`pagination.PageQuery`) as
one query that returns at most `limit + 1` rows in the order of the list's key, after a lookup
of each cursor's place in that order. Whatever the list's length, a page reads its own rows
and the cursors' (and, through an index on the key, nothing else)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from .pagination import PageQuery, UnknownCursor


@dataclass(frozen=True)
class Listing:
    """A list as SQL has it: `source` (`FROM ... WHERE ...`, with `params`) selects its rows,
    `key` names the columns that order them oldest first (unique together), and a cursor names
    a row by its `id_column`."""

    columns: str
    source: str
    params: tuple[Any, ...]
    key: tuple[str, ...]
    id_column: str


def read_page(db: sqlite3.Connection, listing: Listing, query: PageQuery) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of one page, in the query's order, and whether more follow; an `UnknownCursor`
    for a cursor that names no row of the list."""
    ascending = query.order == "asc"
    key = ", ".join(listing.key)
    bounds, params = [], [*listing.params]
    for name, cursor, later in (("after", query.after, ascending), ("before", query.before, not ascending)):
        if cursor is None:
            continue
        found = db.execute(f"SELECT {key} {listing.source} AND {listing.id_column} = ?",
                           (*listing.params, cursor)).fetchone()
        if found is None:
            raise UnknownCursor(name, cursor)
        bounds.append(f" AND ({key}) {'>' if later else '<'} ({', '.join('?' * len(found))})")
        params += found
    order = ", ".join(f"{column}{'' if ascending else ' DESC'}" for column in listing.key)
    rows = db.execute(f"SELECT {listing.columns} {listing.source}{''.join(bounds)} ORDER BY {order} LIMIT ?",
                      (*params, query.limit + 1)).fetchall()
    return rows[:query.limit], len(rows) > query.limit
