"""The recording proxy's checks and capture writing, in a process of their own, so that neither
a slow check nor a slow disk delays a client, and none of it takes the relay's interpreter lock.

The relay (`proxy.py`) tells this process about each recorded exchange: a stream's start
(`begin`: the request as recorded) and its chunks as they pass (`chunk`: checked as their
events complete, `judge.live_checks`), and every exchange's end (`end`: the exchange's head,
how it ended, the answer as recorded, and the request when no `begin` carried it: one message
for an exchange that is not a stream); of a WebSocket-mode connection, its opening, every frame
as it passed and its close (`socket_recording.py` keeps, judges and writes it); and the run's
secrets as the relay learns them, before any message they concern. Here each exchange is read, judged, and written
to the capture folder (whole or not at all, secrets removed); the events the relay reports
(`Found`, `Recorded`) come back and are handed to `on_event` from a thread of the relay's process.

Bounded: at most `max_pending_bytes` of messages are on their way here and not yet taken in (a
message counts its bytes, and at least `MESSAGE_COST`). What does not fit is dropped, never
queued: a stream's chunk (the live checks of that exchange stop; the whole answer is still
judged at its end), a connection's frame (the relay sends none of its later ones, and its file
says how many were not recorded), or a whole exchange (`Dropped`: neither checked nor written).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
ACK_EVERY = 64
"""Messages taken in between two acknowledgements (and whenever the inbox is empty)."""


@dataclass(frozen=True)
class RecordedRequest:
    """What is recorded of a request: the first bytes of its body (all of `size`, unless it was
    larger than the recording limit), and whether it is a chat completion's."""

    chat: bool
    body: bytes
    size: int


class Checker:
    """The relay's side: start the process, send it what happens, hear back (see the module)."""

    def __init__(self, captures: Path, on_event: Callable[[ProxyEvent], None], redactor: Redactor,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        self.on_event = on_event
        self.max_pending_bytes = max_pending_bytes
        context = multiprocessing.get_context("spawn")
        self._inbox: Any = context.Queue()
        self._outbox: Any = context.Queue()
        self._process = context.Process(target=serve, args=(self._inbox, self._outbox, str(captures), redactor.known()),
                                        name="parity-proxy-checker", daemon=True)
        self._pending = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._hear, name="parity-proxy-checker-events", daemon=True)

    @property
    def pid(self) -> int | None:
        """The checker process's, once started."""
        return self._process.pid

    def start(self) -> None:
        self._process.start()
        self._reader.start()

    def close(self) -> None:
        """Let the process take in, check and write everything sent so far, then end it."""
        self._inbox.put(None)
        self._process.join()
        self._outbox.put(None)  # ends the reader if the process could not say it ended (it was killed)
        self._reader.join()

    def learn(self, secrets: list[str]) -> None:
        """Secrets of the run learnt since the start (never dropped: they are few, and a capture
        must not hold them)."""
        self._send(("secrets", secrets), sum(map(len, secrets)), always=True)

    def begin(self, name: str, request: RecordedRequest) -> bool:
        """A stream starts, to be checked as it passes (False: no room, it is checked at its end)."""
        return self._send(("begin", name, request), len(request.body))

    def chunk(self, name: str, data: bytes) -> bool:
        """A piece of a stream's answer, as it passed (False: dropped, no room)."""
        return self._send(("chunk", name, data), len(data))

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
        """Bytes sent and not yet taken in by the process."""
        with self._lock:
            return self._pending

    def _send(self, message: tuple[Any, ...], size: int, always: bool = False) -> bool:
        cost = max(size, MESSAGE_COST)
        with self._lock:
            if not always and self._pending + cost > self.max_pending_bytes:
                return False
            self._pending += cost
        self._inbox.put((cost, message))
        return True

    def _hear(self) -> None:
        while (event := self._outbox.get()) is not None:
            if isinstance(event, int):
                with self._lock:
                    self._pending -= event
            else:
                self.on_event(event)


@dataclass
class _Open:
    """An exchange under way, as the checker knows it."""

    chat: bool
    request_body: Any
    request_note: str | None
    redactor: Redactor
    live: LiveStream | None = None


def serve(inbox: Any, outbox: Any, captures: str, known: frozenset[str]) -> None:
    """The checker process: take in messages until the `None` that ends them (`known`: the
    run's secrets when it started). It yields the cores to the relay (and to everything else the
    machine runs): it catches up when they are idle, and what it cannot take in is dropped."""
    _yield_the_cores()
    redactor = Redactor.knowing(known)
    folder = Path(captures)
    folder.mkdir(parents=True, exist_ok=True)
    exchanges: dict[str, _Open] = {}
    sockets: dict[str, SocketRecording] = {}
    taken = count = 0
    while (item := inbox.get()) is not None:
        cost, message = item
        kind, name = message[0], message[1]
        try:
            if kind == "secrets":
                redactor.add(*name)
            elif kind == "begin":
                exchanges[name] = _begun(redactor, message[2])
            elif kind == "chunk" and (open_ := exchanges.get(name)) is not None:
                for finding in _live(open_, message[2]):
                    outbox.put(Found.redacted(name, finding, open_.redactor))
            elif kind == "end":
                request = message[4]
                open_ = exchanges.pop(name, None) if request is None else _begun(redactor, request)
                for event in _finished(folder, name, open_, message[2], message[3]) if open_ is not None else ():
                    outbox.put(event)
            elif kind == "forget":
                exchanges.pop(name, None)
            elif kind == "socket":
                sockets[name] = SocketRecording(name, message[2], redactor)
            elif kind == "frame" and (connection := sockets.get(name)) is not None:
                for event in connection.take(message[2], message[3]):
                    outbox.put(event)
            elif kind == "socket_end" and (connection := sockets.pop(name, None)) is not None:
                for event in connection.finish(folder, message[2], message[3]):
                    outbox.put(event)
        except Exception as problem:  # one exchange's failure (a full disk, say) ends only it
            exchanges.pop(name, None)
            sockets.pop(name, None)
            (folder / f"{name}.partial").unlink(missing_ok=True)
            outbox.put(Dropped(str(name), f"the checker failed on it: {type(problem).__name__}: {problem}"))
        taken, count = taken + cost, count + 1
        if count % ACK_EVERY == 0 or inbox.empty():
            outbox.put(taken)
            taken = 0
    outbox.put(taken)
    outbox.put(None)


def _yield_the_cores() -> None:
    """Run only when a core is idle (Linux's SCHED_IDLE), else at the lowest priority there is."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def _begun(redactor: Redactor, request: RecordedRequest) -> _Open:
    if len(request.body) < request.size:
        note = (f"the request body was forwarded whole ({request.size:,} bytes); only its first "
                f"{len(request.body):,} bytes were recorded, as text (--max-recorded-request-mb)")
        body: Any = request.body.decode("utf-8", errors="replace")
    else:
        note, body = None, _json_or_text(request.body)
    return _Open(request.chat, body, note, redactor.within(*tool_secrets(body)))


def _live(open_: _Open, data: bytes) -> list[Finding]:
    if open_.live is None:
        open_.live = LiveStream(open_.chat)
    return open_.live.feed(data)


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
        findings = judge(Case(exchange, open_.chat)).findings
        unseen = open_.live.unseen(findings) if open_.live is not None else findings
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
