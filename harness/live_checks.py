"""The no-reference checks of a stream while it flows, event by event, for findings that
must not wait for its end (a proxy shows them while the client still reads).

Only what a prefix of a stream can already break is checked live: each event's framing and
SDK schema, and the `sequence_number` numbering so far. The rules that need the whole stream
(every `.added` closed, one terminal event, deltas adding up) run when it ends
(`checks.no_reference_findings`); `LiveStream.unseen` lets the caller leave out what was already
said live.
"""

from __future__ import annotations

import codecs
import re

from .checks import event_findings
from .findings import Finding
from .grammar import framing_conformance, sequence_conformance
from .sse import SseEvent, parse_sse

_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")


class LiveStream:
    """A `text/event-stream` body fed as its bytes arrive; `feed` returns the findings the
    events completed by those bytes add."""

    def __init__(self, chat: bool) -> None:
        self._chat = chat
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._events: list[SseEvent] = []
        self._seen: set[tuple[str, str]] = set()

    def feed(self, chunk: bytes) -> list[Finding]:
        self._pending += self._decoder.decode(chunk)
        ends = [match.end() for match in _EVENT_END.finditer(self._pending)]
        if not ends:
            return []
        complete, self._pending = self._pending[:ends[-1]], self._pending[ends[-1]:]
        start = len(self._events)
        self._events += parse_sse(complete)
        return self._new(self._findings_from(start))

    def _findings_from(self, start: int) -> list[Finding]:
        findings = framing_conformance(self._events)
        if not self._chat:
            findings += sequence_conformance(self._events)
        for position in range(start, len(self._events)):
            findings += event_findings(self._events[position], position, self._chat, current=True)
        return findings

    def _new(self, findings: list[Finding]) -> list[Finding]:
        fresh = []
        for finding in findings:
            if (finding.rule, finding.message) not in self._seen:
                self._seen.add((finding.rule, finding.message))
                fresh.append(finding)
        return fresh

    def unseen(self, findings: list[Finding]) -> list[Finding]:
        """Of `findings` (the whole stream's, once it ended), those not reported live."""
        return self._new(findings)
