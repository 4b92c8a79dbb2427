"""The recording proxy's checks and capture writing, in a process of their own, so that neither
a slow check nor a slow disk delays a client, and none of it takes the relay's interpreter lock.

The relay (`proxy.py`) tells this process about each recorded exchange: a stream's start
(`begin`: the request as recorded) and its chunks as they pass (`chunk`: checked as their
events complete, `judge.live_checks`), and every exchange's end (`end`: the exchange's head,
how it ended, the answer as recorded, and the request when no `begin` carried it: one message
for an exchange that is not a stream); of a WebSocket-mode connection, its opening, every frame
as it passed and its close (`socket_recording.py` keeps, judges and writes it); and the run's
secrets as the relay learns them, before any message they concern. Here each exchange is read,
judged, and written to the capture folder (whole or not at all, secrets removed); the events
the relay reports (`Found`, `Recorded`) come back and are handed to `on_event`.

On the relay's side all of it runs on its event loop: messages are gathered for `GATHER_S`,
then pickled together and written to the process's pipe in one write through a non-blocking pipe
transport, and what comes back is read the same way. So the relay pays no thread hand-off (a
`multiprocessing.Queue` woke a feeder thread and a reader thread for each message, which took the
interpreter lock from the relay: a quarter of its busy time at 16 text answers in flight), and
the process wakes once for all of them; a stream's chunks gathered meanwhile are one piece, whose
events are parsed and checked in one go (per chunk, parsing cost 50 us before its first event).
Chunks that come with their exchange's end are not checked live: the end checks the whole stream
anyway, so a stream shorter than `GATHER_S` is parsed once, not twice.

Bounded: at most `max_pending_bytes` of messages are on their way here and not yet taken in (a
message counts its bytes, and at least `MESSAGE_COST`). What does not fit is dropped, never
queued: a stream's chunk (the live checks of that exchange stop; the whole answer is still
judged at its end), a connection's frame (the relay sends none of its later ones, and its file
says how many were not recorded), or a whole exchange (`Dropped`: neither checked nor written).
The process says what it took in every `ACK_BYTES` and whenever it has been idle `ACK_IDLE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import select
import struct
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..judge.judgement import Case, judge
from ..judge.live_checks import LiveStream
from ..model.findings import Finding
from ..wire.decode import Unreadable, read_body, read_json, read_stream
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor, tool_secrets
from .forwarding import Dropped, Found, ProxyEvent, Recorded
from .socket_recording import SocketOpened, SocketRecording

MESSAGE_COST = 1024
"""What a message counts for at least, whatever bytes it carries (its envelope, its pickling)."""
DEFAULT_MAX_PENDING_BYTES = 256 * 2**20
ACK_BYTES = 2**20
ACK_IDLE_S = 0.02
_HEAD = struct.Struct("!Q")
"""A message on either pipe: its pickle's length, then the pickle."""
_READ_BYTES = 2**20
GATHER_S = 0.02
"""How long the relay gathers messages before it sends them: how much later than the traffic a
live finding comes, besides the time the process takes to get to it."""


@dataclass(frozen=True)
class RecordedRequest:
    """What is recorded of a request: the first bytes of its body (all of `size`, unless it was
    larger than the recording limit), and whether it is a chat completion's."""

    chat: bool
    body: bytes
    size: int


class Checker:
    """The relay's side: start the process, send it what happens, hear back (see the module).
    Its methods run on the relay's event loop; messages sent before `start` wait for it."""

    def __init__(self, captures: Path, on_event: Callable[[ProxyEvent], None], redactor: Redactor,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        self.on_event = on_event
        self.max_pending_bytes = max_pending_bytes
        context = multiprocessing.get_context("spawn")
        self._inbox_end, self._inbox = context.Pipe(duplex=False)
        self._outbox, self._outbox_end = context.Pipe(duplex=False)
        self._process = context.Process(target=serve, args=(self._inbox_end, self._outbox_end, str(captures),
                                                            redactor.known()),
                                        name="parity-proxy-checker", daemon=True)
        self._pending = 0
        self._gathered: list[tuple[int, tuple[Any, ...]] | None] = []
        """Messages not sent yet, with what each counts for; None ends them."""
        self._sending: asyncio.TimerHandle | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._hearing: _Hearing | None = None

    @property
    def pid(self) -> int | None:
        """The checker process's, once started."""
        return self._process.pid

    async def start(self) -> None:
        """Start the process, and send it what was sent so far."""
        self._process.start()
        self._inbox_end.close()  # the process's ends: closed here, so that either side sees the other's end
        self._outbox_end.close()
        loop = asyncio.get_running_loop()
        self._writer, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, self._inbox)
        _, self._hearing = await loop.connect_read_pipe(lambda: _Hearing(self._heard), self._outbox)
        if self._gathered:
            self._send_gathered()

    async def close(self) -> None:
        """Let the process take in, check and write everything sent so far, then end it (or
        notice that it ended)."""
        assert self._writer is not None and self._hearing is not None
        self._gathered.append(None)
        self._send_gathered()
        await self._hearing.ended  # the process closed its end of the pipe: it exited
        self._writer.close()
        await anyio.to_thread.run_sync(self._process.join)

    def learn(self, secrets: list[str]) -> None:
        """Secrets of the run learnt since the start (never dropped: they are few, and a capture
        must not hold them)."""
        self._send(("secrets", secrets), sum(map(len, secrets)), always=True)

    def begin(self, name: str, request: RecordedRequest) -> bool:
        """A stream starts, to be checked as it passes (False: no room, it is checked at its end)."""
        return self._send(("begin", name, request), len(request.body))

    def chunk(self, name: str, data: bytes) -> bool:
        """A piece of a stream's answer, as it passed (False: dropped, no room); it joins the
        stream's piece gathered just before it, if there is one."""
        if not self._room(len(data)):
            return False
        last = self._gathered[-1] if self._gathered else None
        if last is not None and last[1][0] == "chunk" and last[1][1] == name:
            last[1][2].append(data)
            self._gathered[-1] = (last[0] + self._count(len(data)), last[1])
        else:
            self._gather(("chunk", name, [data]), len(data))
        return True

    def end(self, name: str, exchange: Exchange, answer: list[bytes], request: RecordedRequest | None) -> None:
        """The exchange ended; `answer` is what was recorded of its answer's body, in pieces;
        `request` unless `begin` carried it."""
        size = sum(map(len, answer)) + (len(request.body) if request is not None else 0)
        if not self._send(("end", name, exchange, answer, request), size):
            self._send(("forget", name), 0, always=True)
            ended = self._process.exitcode
            why = (f"the checker process ended (exit code {ended})" if ended is not None
                   else f"{self._pending:,} bytes of earlier exchanges were still waiting to be checked and written")
            self.on_event(Dropped(name, why))

    def socket_opened(self, name: str, opened: SocketOpened) -> None:
        self._send(("socket", name, opened), 0, always=True)

    def frame(self, name: str, direction: str, frame: str | bytes) -> bool:
        """A frame of the connection `name` passed, `sent` by the client or `received` from the
        upstream (False: dropped, no room)."""
        return self._send(("frame", name, direction, frame), len(frame))

    def socket_closed(self, name: str, close: dict[str, Any] | None, unsent: int) -> None:
        """The connection closed as `close` says; `unsent` of its last frames were dropped."""
        self._send(("socket_end", name, close, unsent), 0, always=True)

    @property
    def pending(self) -> int:
        """Bytes sent and not yet taken in by the process (as it last said)."""
        return self._pending

    def _send(self, message: tuple[Any, ...], size: int, always: bool = False) -> bool:
        if not always and not self._room(size):
            return False
        self._gather(message, size)
        return True

    def _room(self, size: int) -> bool:
        return self._pending + max(size, MESSAGE_COST) <= self.max_pending_bytes

    def _count(self, size: int) -> int:
        cost = max(size, MESSAGE_COST)
        self._pending += cost
        return cost

    def _gather(self, message: tuple[Any, ...], size: int) -> None:
        """Send `message` with the others gathered within `GATHER_S` (or, before `start`, at it)."""
        if self._writer is not None and self._sending is None:
            self._sending = asyncio.get_running_loop().call_later(GATHER_S, self._send_gathered)
        self._gathered.append((self._count(size), message))

    def _send_gathered(self) -> None:
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None
        assert self._writer is not None
        if not self._writer.is_closing():  # closing: the process is gone
            self._writer.write(_message(self._gathered))
        self._gathered = []

    def _heard(self, event: Any) -> None:
        if isinstance(event, int):
            self._pending -= event
        else:
            self.on_event(event)


class _Hearing(asyncio.Protocol):
    """The relay's end of the pipe the process answers on: each message to `heard`; `ended`
    once the process closed its end."""

    def __init__(self, heard: Callable[[Any], None]) -> None:
        self._heard = heard
        self._received = bytearray()
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self._received += data
        for message in _taken(self._received):
            self._heard(message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


def _message(value: Any) -> bytes:
    pickled = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(pickled)) + pickled


def _taken(received: bytearray) -> list[Any]:
    """The whole messages at the start of `received`, removed from it (a partial one stays)."""
    messages, at = [], 0
    while len(received) - at >= _HEAD.size:
        (length,) = _HEAD.unpack_from(received, at)
        if len(received) - at - _HEAD.size < length:
            break
        messages.append(pickle.loads(received[at + _HEAD.size:at + _HEAD.size + length]))
        at += _HEAD.size + length
    del received[:at]
    return messages


@dataclass
class _Open:
    """An exchange under way, as the checker knows it."""

    chat: bool
    request_body: Any
    request_note: str | None
    redactor: Redactor
    live: LiveStream | None = None


def serve(inbox: Connection, outbox: Connection, captures: str, known: frozenset[str]) -> None:
    """The checker process: take in messages until the `None` that ends them, or the relay's
    end of the pipe closing (`known`: the run's secrets when it started). It yields the cores
    to the relay (and to everything else the machine runs), catching up when they are less
    busy, and what it cannot take in is dropped."""
    _yield_the_cores()
    redactor = Redactor.knowing(known)
    folder = Path(captures)
    folder.mkdir(parents=True, exist_ok=True)
    exchanges: dict[str, _Open] = {}
    sockets: dict[str, SocketRecording] = {}

    def tell(events: list[Any]) -> None:
        """In one write: the relay wakes once for all of them."""
        with contextlib.suppress(BrokenPipeError):  # the relay is gone: no one to tell
            _write_all(outbox.fileno(), b"".join(map(_message, events)))

    received, taken, ended = bytearray(), 0, False
    while not ended:
        if taken and not select.select([inbox], [], [], ACK_IDLE_S)[0]:
            tell([taken])
            taken = 0
        data = os.read(inbox.fileno(), _READ_BYTES)
        received += data
        messages = [item for gathered in _taken(received) for item in gathered] if data else [None]
        ending = {item[1][1] for item in messages if item is not None and item[1][0] == "end"}
        events: list[Any] = []
        for item in messages:
            if item is None:
                ended = True
                break
            cost, message = item
            if not (message[0] == "chunk" and message[1] in ending):  # its end checks it whole, at once
                events += _take(message, folder, redactor, exchanges, sockets)
            taken += cost
            if taken >= ACK_BYTES:
                events.append(taken)
                taken = 0
        if events:
            tell(events)
    tell([taken])


def _take(message: tuple[Any, ...], folder: Path, redactor: Redactor, exchanges: dict[str, _Open],
          sockets: dict[str, SocketRecording]) -> list[ProxyEvent]:
    """Take in one message; the events to report (one exchange's failure, a full disk say,
    ends only it)."""
    kind, name = message[0], message[1]
    try:
        if kind == "secrets":
            redactor.add(*name)
        elif kind == "begin":
            exchanges[name] = _begun(redactor, message[2])
        elif kind == "chunk" and (open_ := exchanges.get(name)) is not None:
            return [Found.redacted(name, finding, open_.redactor) for finding in _live(open_, message[2])]
        elif kind == "end":
            request = message[4]
            open_ = exchanges.pop(name, None) if request is None else _begun(redactor, request)
            return _finished(folder, name, open_, message[2], message[3]) if open_ is not None else []
        elif kind == "forget":
            exchanges.pop(name, None)
        elif kind == "socket":
            sockets[name] = SocketRecording(name, message[2], redactor)
        elif kind == "frame" and (connection := sockets.get(name)) is not None:
            return list(connection.take(message[2], message[3]))
        elif kind == "socket_end" and (connection := sockets.pop(name, None)) is not None:
            return list(connection.finish(folder, message[2], message[3]))
    except Exception as problem:
        exchanges.pop(name, None)
        sockets.pop(name, None)
        (folder / f"{name}.partial").unlink(missing_ok=True)
        return [Dropped(str(name), f"the checker failed on it: {type(problem).__name__}: {problem}")]
    return []


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _yield_the_cores() -> None:
    """Run at the lowest priority there is (nice 19): behind the relay and whatever else the
    machine runs, yet never starved. Linux's SCHED_IDLE, which runs a process only on an idle
    core, wrote no capture for as long as other work kept the cores busy (two CPU hogs on two
    cores: not one of 25 ended exchanges written in 60 s)."""
    os.nice(19)


def _begun(redactor: Redactor, request: RecordedRequest) -> _Open:
    if len(request.body) < request.size:
        note = (f"the request body was forwarded whole ({request.size:,} bytes); only its first "
                f"{len(request.body):,} bytes were recorded, as text (--max-recorded-request-mb)")
        body: Any = request.body.decode("utf-8", errors="replace")
    else:
        note, body = None, _json_or_text(request.body)
    return _Open(request.chat, body, note, redactor.within(*tool_secrets(body)))


def _live(open_: _Open, pieces: list[bytes]) -> list[Finding]:
    if open_.live is None:
        open_.live = LiveStream(open_.chat)
    return open_.live.feed(b"".join(pieces))


def _finished(folder: Path, name: str, open_: _Open, exchange: Exchange, pieces: list[bytes]) -> list[ProxyEvent]:
    """Read what arrived, check the whole exchange (what the live checks did not already say),
    write it; the events to report."""
    answer = b"".join(pieces)
    exchange.request_body = open_.request_body
    if open_.request_note:
        exchange.meta["request_note"] = open_.request_note
    cut_short = exchange.transport_error is not None or exchange.disconnected or exchange.truncated_after is not None
    if "text/event-stream" in (exchange.headers or {}).get("content-type", ""):
        exchange.sse, exchange.defects = read_stream(answer, cut_short)
    elif exchange.status is not None:
        exchange.body, exchange.defects = read_body(answer, (exchange.headers or {}).get("content-type"), cut_short)
    events: list[ProxyEvent] = []
    if exchange.truncated_after is not None:
        exchange.meta["note"] = (f"the answer was forwarded whole; only its first {exchange.truncated_after} "
                                 "bytes were recorded (--max-answer-mb)")
    elif exchange.transport_error is None and not exchange.disconnected:
        live = open_.live
        findings = judge(Case(exchange, open_.chat, events_checked=live.events_checked if live else 0)).findings
        unseen = live.unseen(findings) if live is not None else findings
        events += [Found.redacted(name, finding, open_.redactor) for finding in unseen]
    partial = folder / f"{name}.partial"  # a reader of the folder never sees half a file
    open_.redactor.write_json(partial, exchange.to_file())
    partial.replace(folder / name)
    events.append(Recorded(name, _summary(exchange)))
    return events


def _summary(exchange: Exchange) -> Exchange:
    """What the relay reports of a recorded exchange (its body stays in the capture)."""
    return Exchange(method=exchange.method, url=exchange.url, status=exchange.status,
                    sse="" if exchange.streamed else None, transport_error=exchange.transport_error,
                    disconnected=exchange.disconnected, meta=exchange.meta)


def _json_or_text(body: bytes) -> Any:
    """A request body's JSON value (bounded in depth, `wire.read_json`), else its text."""
    if not body:
        return None
    text = body.decode("utf-8", errors="replace")
    try:
        return read_json(text)
    except Unreadable:
        return text
