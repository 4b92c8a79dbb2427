"""MCP sessions opened once and shared: one per server and credentials, reused by every listing
and call until it is idle too long, evicted, lost, or the gateway shuts down.

The pool does not know MCP: a session is whatever the opener's async context manager yields
(the connector's `mcp` SDK `Client`). Keys are opaque strings; `session_key` makes them from a
server's URL, transport and headers as a hash, so different credentials never share a session
and no key keeps a secret in clear.

Each session has an owner task that enters the opener's context and leaves it in that same task
(anyio's task groups inside the SDK's `Client` require it), waiting in between until the session
is retired (evicted, discarded as lost, or the pool closing) and no lease holds it, or until it
has been idle for `idle_s`. The first lease of a key starts the owner; concurrent leases of the
same key wait for that one opening. A lease that finds the opening failed gets its exception.
At most `size` sessions are kept: a new one retires the least recently used (which closes once
its leases end).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, TypeVar

import anyio

S = TypeVar("S")
Opener = Callable[[], AbstractAsyncContextManager[S]]


def session_key(*parts: Any) -> str:
    """A key for what identifies a session (URL, transport, headers...), hashed: no part in clear."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class PooledSession(Generic[S]):
    """One session and its owner task. `value` is what the opener yielded, once `opened` is set
    and `failure` is None."""

    def __init__(self, key: str, clock: Callable[[], float]) -> None:
        self.key = key
        self.value: S | None = None
        self.failure: BaseException | None = None
        self.opened = asyncio.Event()
        self.ended = asyncio.Event()
        self.leases = 0
        self.retired = False
        self.last_used = clock()
        self._wake = asyncio.Event()
        self._clock = clock
        self._owner: asyncio.Task[None] | None = None

    def retire(self) -> None:
        """Close the session once no lease holds it; no new lease gets it."""
        self.retired = True
        self._wake.set()

    def release(self) -> None:
        self.leases -= 1
        self.last_used = self._clock()
        if self.leases == 0:
            self._wake.set()

    async def own(self, opener: Opener[S], idle_s: float) -> None:
        """The owner task: open, wait until retired and unleased or idle for `idle_s`, close."""
        try:
            async with opener() as value:
                self.value = value
                self.opened.set()
                while self.leases or not self.retired:
                    idle_left = idle_s - (self._clock() - self.last_used)
                    if not self.leases and idle_left <= 0:
                        break
                    self._wake.clear()
                    with anyio.move_on_after(idle_s if self.leases else idle_left):
                        await self._wake.wait()
        except Exception as error:  # kept for the leases: a failed opening, or a session that broke
            self.failure = error
        finally:
            self.retired = True
            self.opened.set()
            self.ended.set()


class SessionPool(Generic[S]):
    """Sessions by key, at most `size` of them, each closed after `idle_s` unused."""

    def __init__(self, size: int = 64, idle_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._idle_s = idle_s
        self._clock = clock
        self._sessions: OrderedDict[str, PooledSession[S]] = OrderedDict()
        self._owners: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """The sessions a lease could get (open or opening)."""
        return sum(not session.retired for session in self._sessions.values())

    @property
    def owners(self) -> int:
        """Owner tasks still running, retired sessions closing included."""
        return len(self._owners)

    @asynccontextmanager
    async def lease(self, key: str, opener: Opener[S]) -> AsyncIterator[PooledSession[S]]:
        """The open session for `key`, opened with `opener` if there is none; raises what the
        opening raised. The session is not closed while leased, and counts as used at release."""
        session = self._sessions.get(key)
        if session is None or session.retired:
            session = self._start(key, opener)
        self._sessions.move_to_end(key)
        session.leases += 1
        try:
            await session.opened.wait()
            if session.value is None:
                raise session.failure or ConnectionError("the MCP session was closed before it opened")
            yield session
        finally:
            session.release()

    def discard(self, session: PooledSession[S]) -> None:
        """Drop a session that is lost: the next lease of its key opens a new one."""
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        session.retire()

    def _start(self, key: str, opener: Opener[S]) -> PooledSession[S]:
        session = PooledSession[S](key, self._clock)
        self._sessions[key] = session
        owner = asyncio.get_running_loop().create_task(session.own(opener, self._idle_s))
        self._owners.add(owner)
        owner.add_done_callback(lambda _: self._ended(session, owner))
        while len(self._sessions) > self._size:
            _, evicted = self._sessions.popitem(last=False)
            evicted.retire()
        return session

    def _ended(self, session: PooledSession[S], owner: asyncio.Task[None]) -> None:
        self._owners.discard(owner)
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Close every session; an owner still closing after `grace_s` is cancelled."""
        for session in self._sessions.values():
            session.retire()
        self._sessions.clear()
        owners = set(self._owners)
        if not owners:
            return
        _, late = await asyncio.wait(owners, timeout=grace_s)
        for owner in late:
            owner.cancel()
        await asyncio.gather(*late, return_exceptions=True)
