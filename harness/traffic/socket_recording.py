"""One WebSocket-mode connection as the proxy's checker process records it (`checker.py`): the
relay (`socket_proxy.py`) sends it every frame as it passed, and it keeps them in the
connection file's format (`wire/websocket.py`, which `check-exchange` and `replay` read),
judges each create once its answer ends, and writes the file when the connection closes.

- Kept: at most `MAX_MESSAGES` frames and `limit` bytes of them; past either, frames are
  counted, not kept, and the file says so (as it says how many the relay could not send here
  because this process was behind); a create whose answer runs past them is not judged.
- Secrets: each create's MCP secrets are removed from the file and from that create's
  findings, beside the run's.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..judge.judgement import Case, judge
from ..model.findings import Finding, Kind, Severity
from ..wire.decode import Unreadable, read_json
from ..wire.exchange import Exchange
from ..wire.redaction import Redactor, tool_secrets
from ..wire.websocket import MAX_MESSAGES, TRANSPORT, answered, create_body, ended, frame_value, socket_exchange
from .forwarding import UPSTREAM_FAILED, Found, ProxyEvent, Recorded


@dataclass(frozen=True)
class SocketOpened:
    """What the relay says of a connection it opened: where it goes (`url`, `path` with its
    credentials hidden) and how many bytes of frames may be kept."""

    url: str
    path: str
    limit: int


@dataclass
class SocketRecording:
    name: str
    opened: SocketOpened
    redactor: Redactor
    """The run's secrets; a create's own are added to it for that create's findings."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    dropped: int = 0
    """Frames past the recording's bounds."""
    open_create: Exchange | None = None
    create_redactor: Redactor | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)

    def take(self, direction: str, frame: str | bytes) -> list[ProxyEvent]:
        """Keep a frame that passed (`sent` by the client, `received` from the upstream); the
        findings on a create whose answer it ends."""
        self._keep(direction, frame)
        if self.dropped:  # past the bounds nothing more is kept: not a create's answer either
            self.open_create = None
            return []
        if direction == "sent":
            value = _parsed_or_text(frame) if isinstance(frame, str) else None
            if isinstance(value, dict) and value.get("type") == "response.create":
                self.open_create, self.frames = socket_exchange(self.opened.url, value), []
                self.create_redactor = self.redactor.within(*tool_secrets(create_body(value)))
            return []
        create = self.open_create
        if create is None:
            return []
        if (value := frame_value(frame, len(self.frames), create)) is not None:
            self.frames.append(value)
        if not ended(self.frames):
            return []
        answered(create, self.frames)
        self.open_create = None
        return self._found(judge(Case(create, False)).findings)

    def finish(self, folder: Path, close: dict[str, Any] | None, unsent: int) -> list[ProxyEvent]:
        """Write the connection file (a reader of the folder never sees half of one) once the
        connection closed as `close` says; `unsent`: frames the relay could not send here. A
        create left without its answer is a finding, unless frames of it were not sent here."""
        events: list[ProxyEvent] = []
        if self.open_create is not None and not unsent:
            events += self._found([Finding(Kind.TRANSPORT, Severity.ERROR, UPSTREAM_FAILED, "the connection closed "
                                           f"before the answer to its response.create ended ({len(self.frames)} "
                                           "frame(s) of it came)")])
        secrets = [secret for message in self.messages if message["direction"] == "sent"
                   and isinstance(message["data"], dict) for secret in tool_secrets(create_body(message["data"]))]
        partial = folder / f"{self.name}.partial"
        self.redactor.within(*secrets).write_json(partial, self._document(close, unsent))
        partial.replace(folder / self.name)
        events.append(Recorded(self.name, Exchange("GET", self.opened.url, status=101, meta={
            "transport": TRANSPORT, "path": self.opened.path, "ended": self._ending(close)})))
        return events

    def _keep(self, direction: str, frame: str | bytes) -> None:
        size = len(frame.encode()) if isinstance(frame, str) else len(frame)
        if self.dropped or len(self.messages) >= MAX_MESSAGES or self.size + size > self.opened.limit:
            self.dropped += 1
            return
        self.size += size
        if isinstance(frame, bytes):
            self.messages.append({"direction": direction, "data": base64.b64encode(frame).decode(), "binary": True})
        else:
            self.messages.append({"direction": direction, "data": _parsed_or_text(frame)})

    def _found(self, findings: list[Finding]) -> list[ProxyEvent]:
        redactor = self.create_redactor or self.redactor
        return [Found.redacted(self.name, finding, redactor) for finding in findings]

    def _document(self, close: dict[str, Any] | None, unsent: int) -> dict[str, Any]:
        notes = [f"{self.dropped} frame(s) after the first {len(self.messages)} were forwarded and not recorded "
                 "(--max-recorded-request-mb plus --max-answer-mb)"] if self.dropped else []
        if unsent:
            notes.append(f"the last {unsent} frame(s) were forwarded and not recorded: the checks were behind")
        note = {"note": "; ".join(notes)} if notes else {}
        return {"transport": TRANSPORT, "request": {"url": self.opened.url},
                "meta": {"path": self.opened.path, "captured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                         **note},
                "messages": self.messages, "close": close}

    def _ending(self, close: dict[str, Any] | None) -> str:
        close = close or {}
        creates = sum(1 for m in self.messages if m["direction"] == "sent" and isinstance(m["data"], dict)
                      and m["data"].get("type") == "response.create")
        return f"{creates} create(s), closed by the {close.get('initiator', 'network')} ({close.get('code', 1006)})"


def _parsed_or_text(frame: str) -> Any:
    """A text frame as the JSON object it should be, or as it came."""
    try:
        value = read_json(frame)
    except Unreadable:
        return frame
    return value if isinstance(value, dict) else frame
