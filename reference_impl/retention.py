"""What the store forgets, and when: stored responses are kept for a limited time, as OpenAI
keeps them for 30 days, and only the newest of them, so a long run's memory and disk stay flat.

A finished response older than `max_age_s`, or beyond the newest `max_count` finished ones, is
evicted with everything kept for it: its chain (in its row), its input items, its stream events
and its audit trail. It is then unknown, as if it had never existed: a 404, and a 400
`previous_response_not_found` for a continuation. The audit trails of runs that stored no
response (`store: false`, chat completions) follow the same age and count, and expired
tool-cache entries and uploaded files past their `expires_at` go as well (detached from every
vector store, as a deleted file is). Conversations and
their items are never evicted: OpenAI keeps them outside the responses' TTL. Responses still
`queued` or `in_progress` are never evicted.

A sweep runs inside the transaction of every `sweep_every`-th run's end (no commit, no sync of
its own) and when a store opens. Sweeping every tenth of `max_count` (at most every 100 ends)
keeps its cost per response small and the store within `max_count + sweep_every - 1` finished
responses. Reads apply the age at once (`KEPT_SQL`): a response past its age is not found even
before a sweep removes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

DAY_S = 24 * 60 * 60
OPENAI_RETENTION_S = 30 * DAY_S
"""How long OpenAI keeps a stored response by default."""
DEFAULT_MAX_RESPONSES = 10_000
SWEEP_EVERY_AT_MOST = 100
UNFINISHED = ("queued", "in_progress")


@dataclass(frozen=True)
class Retention:
    """How long a stored response is kept (`max_age_s` seconds after its creation) and how many
    finished ones are (`max_count`, the newest); None is no limit. `GatewayConfig` checks the
    settings it is made from."""

    max_age_s: float | None = OPENAI_RETENTION_S
    max_count: int | None = DEFAULT_MAX_RESPONSES

    @property
    def sweep_every(self) -> int:
        """How many runs' ends apart the sweeps are."""
        if self.max_count is None:
            return SWEEP_EVERY_AT_MOST
        return max(1, min(SWEEP_EVERY_AT_MOST, self.max_count // 10))

    def cutoff(self, now: float) -> float:
        """Whatever was created before this moment is expired (-inf: nothing is)."""
        return now - self.max_age_s if self.max_age_s is not None else float("-inf")


AS_OPENAI = Retention()
"""30 days, and the newest 10,000 (OpenAI states no count; this one keeps a long run flat)."""


KEPT_SQL = f"(created_at >= ? OR status IN {UNFINISHED!r})"
"""A `responses` row not yet expired, given `Retention.cutoff` as its parameter."""
_FINISHED_SQL = f"status NOT IN {UNFINISHED!r}"


def sweep(db: sqlite3.Connection, retention: Retention, now: float) -> int:
    """Evict, in the caller's transaction, what `retention` no longer keeps at `now`; returns
    how many responses went. It reads only the rows it evicts, and counts what is kept from an
    index's pages (tens of microseconds for 10,000 responses), never walking it row by row."""
    cutoff = retention.cutoff(now)
    expired = [row[0] for row in db.execute(
        f"SELECT id FROM responses WHERE {_FINISHED_SQL} AND created_at < ?", (cutoff,))]
    _evict(db, expired)
    db.execute("DELETE FROM audit_trails WHERE created_at < ?", (cutoff,))
    surplus: list[str] = []
    if retention.max_count is not None:
        (held,) = db.execute("SELECT COUNT(*) FROM responses").fetchone()
        (running,) = db.execute(f"SELECT COUNT(*) FROM responses WHERE status IN {UNFINISHED!r}").fetchone()
        held -= running
        surplus = [row[0] for row in db.execute(
            f"SELECT id FROM responses WHERE {_FINISHED_SQL} ORDER BY created_at, rowid LIMIT ?",
            (max(0, held - retention.max_count),))]
        _evict(db, surplus)
        (trails,) = db.execute("SELECT COUNT(*) FROM audit_trails").fetchone()
        db.execute("DELETE FROM audit_trails WHERE run_id IN "
                   "(SELECT run_id FROM audit_trails ORDER BY created_at, rowid LIMIT ?)",
                   (max(0, trails - retention.max_count),))
    db.execute("DELETE FROM tool_cache WHERE expires_at <= ?", (now,))
    for table in ("vector_store_chunks", "vector_store_files"):  # an expired file goes as a deleted one does
        db.execute(f"DELETE FROM {table} WHERE file_id IN (SELECT id FROM files WHERE expires_at <= ?)", (now,))
    db.execute("DELETE FROM files WHERE expires_at <= ?", (now,))
    return len(expired) + len(surplus)


def _evict(db: sqlite3.Connection, response_ids: list[str]) -> None:
    """Delete these responses and what is kept for them."""
    gone = [(response_id,) for response_id in response_ids]
    db.executemany("DELETE FROM responses WHERE id = ?", gone)
    db.executemany("DELETE FROM response_events WHERE response_id = ?", gone)
    db.executemany("DELETE FROM response_input_items WHERE response_id = ?", gone)
    db.executemany("DELETE FROM audit_trails WHERE run_id = ?", gone)
