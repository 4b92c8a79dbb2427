"""The no-reference checks of a stream while it flows, event by event, for findings that
must not wait for its end (a proxy shows them while the client still reads).

Only what a prefix of a stream can already break is checked live: each event's framing and
SDK schema, and the `sequence_number` numbering so far. The rules that need the whole stream
(every `.added` closed, one terminal event, deltas adding up) run when it ends
(`checks.no_reference_findings`, told how many events were checked live, which it does not
check again); `LiveStream.unseen` lets the caller leave out what was already said live. A live
stream keeps no event once checked: its memory stays the same however long the stream runs
(but for the findings it reported, and an event still arriving).
"""

from __future__ import annotations

import codecs
import re

from ..model.findings import Finding
from ..wire.sse import parse_sse
from .checks import event_findings
from .grammar import SequenceNumbering, event_framing

_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")
_LONGEST_END = 4
"""Characters of an event end (`\\r\\n\\r\\n`): the part of what was pending that a new chunk may complete."""


class LiveStream:
    """A `text/event-stream` body fed as its bytes arrive; `feed` returns the findings the
    events completed by those bytes add."""

    def __init__(self, chat: bool) -> None:
        self._chat = chat
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._events = 0
        self._numbering = SequenceNumbering()
        self._seen: set[tuple[str, str]] = set()

    @property
    def events_checked(self) -> int:
        """How many events were complete, and checked, so far."""
        return self._events

    @property
    def next_sequence_number(self) -> int | None:
        """The `sequence_number` an event added now would carry (None on a stream without them)."""
        return self._numbering.next_number

    def feed(self, chunk: bytes) -> list[Finding]:
        searched_to = max(len(self._pending) - _LONGEST_END + 1, 0)
        self._pending += self._decoder.decode(chunk)
        ends = [match.end() for match in _EVENT_END.finditer(self._pending, searched_to)]
        if not ends:
            return []
        complete, self._pending = self._pending[:ends[-1]], self._pending[ends[-1]:]
        events, first = parse_sse(complete), self._events
        self._events += len(events)
        findings = [finding for offset, event in enumerate(events) for finding in event_framing(event, first + offset)]
        if not self._chat:
            for event in events:
                if event.payload is not None:
                    self._numbering.add(event.payload)
            findings += self._numbering.findings()
        for offset, event in enumerate(events):
            findings += event_findings(event, first + offset, self._chat, current=True)
        return self._new(findings)

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
