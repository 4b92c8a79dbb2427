"""One HTTP exchange with a target, and its file format.

The file format is shared by goldens and by exchanges captured elsewhere:
`{"request": {"method", "url", "body"}, "response": {"status", "headers", "body", "sse"}}`.
The harness adds `transport_error`, `defects` and `truncated_after_bytes` (the capture limit
cut the answer there) when they apply. Other keys are ignored; the request body, the status or
the headers may be null when a capture did not keep them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .decode import Defect
from .sse import SseEvent, parse_sse

KEPT_HEADERS = ("content-type", "openai-processing-ms", "openai-version", "x-request-id", "retry-after")
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class Exchange:
    method: str
    url: str
    request_body: Any = None
    status: int | None = None
    headers: dict[str, str] | None = None
    """Every response header (names in lower case); a capture may keep fewer."""
    body: Any = None
    """The JSON body, or the raw text of a body that is not JSON."""
    sse: str | None = None
    """The raw `text/event-stream` body, when the target streamed."""
    transport_error: str | None = None
    """Why no complete answer arrived (timeout, connection reset, capture limit); None when
    one did."""
    defects: list[Defect] = field(default_factory=list)
    """What is wrong with the bytes that arrived (encoding, JSON, content type, framing)."""
    truncated_after: int | None = None
    """The capture limit ended the answer after this many bytes; the body or stream kept is
    that much of it."""
    disconnected: bool = False
    """The harness went away on purpose before the answer ended (a scenario's `disconnect`)."""
    elapsed_s: float = 0.0
    event_times_s: list[float] = field(default_factory=list)
    """When each event of a live stream arrived, in seconds after the request was sent, one
    per event of `events` (empty when not recorded: a stored exchange, a JSON answer)."""
    meta: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def events(self) -> list[SseEvent]:
        return parse_sse(self.sse) if self.sse is not None else []

    @property
    def streamed(self) -> bool:
        return self.sse is not None

    @property
    def unreadable(self) -> bool:
        """The answer is not what it should be at all (its `defects` say why): a body that is
        not JSON, a stream without an event."""
        if not self.defects:
            return False
        return not self.events if self.streamed else isinstance(self.body, str)

    @property
    def answered_create_without_object(self) -> bool:
        """A create request (a Response or a chat completion) answered 2xx, unstreamed, with a
        body that is not a JSON object at all (null, text, a list)."""
        body = self.request_body
        creates = self.method == "POST" and isinstance(body, dict) and "model" in body and (
            "input" in body or "messages" in body)
        ok = self.status is not None and 200 <= self.status < 300
        return creates and ok and not self.streamed and self.transport_error is None and \
            not isinstance(self.body, dict)

    def terminal_event(self) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.payload is not None and event.type in TERMINAL_EVENTS:
                return event.payload
        return None

    def response_object(self) -> dict[str, Any] | None:
        """The Response object: the JSON body, or the response the terminal event carries."""
        if self.streamed:
            terminal = self.terminal_event()
            return terminal.get("response") if terminal else None
        return self._json_response()

    def latest_response(self) -> dict[str, Any] | None:
        """The Response object, or for a stream cut short the newest snapshot it carried."""
        if self.streamed:
            snapshots = [e.payload["response"] for e in self.events
                         if e.payload is not None and isinstance(e.payload.get("response"), dict)]
            return snapshots[-1] if snapshots else None
        return self._json_response()

    def _json_response(self) -> dict[str, Any] | None:
        if isinstance(self.body, dict) and self.body.get("object") == "response":
            return self.body
        return None

    def to_file(self) -> dict[str, Any]:
        """The exchange in the file format; of the headers only those in `KEPT_HEADERS`."""
        headers = None if self.headers is None else {k: v for k, v in self.headers.items() if k in KEPT_HEADERS}
        return {
            "request": {"method": self.method, "url": self.url, "body": self.request_body},
            "response": {"status": self.status, "headers": headers, "body": None if self.streamed else self.body,
                         "sse": self.sse},
            **({"transport_error": self.transport_error} if self.transport_error else {}),
            **({"defects": [defect.to_file() for defect in self.defects]} if self.defects else {}),
            **({"truncated_after_bytes": self.truncated_after} if self.truncated_after is not None else {}),
            **({"disconnected": True} if self.disconnected else {}),
            **({"meta": self.meta} if self.meta else {}),
        }

    @classmethod
    def from_file(cls, data: dict[str, Any]) -> Exchange:
        request = data.get("request") or {}
        response = data.get("response") or {}
        return cls(
            method=request.get("method") or "POST",
            url=request.get("url") or "",
            request_body=request.get("body"),
            status=response.get("status"),
            headers=response.get("headers"),
            body=response.get("body"),
            sse=response.get("sse"),
            transport_error=data.get("transport_error"),
            defects=[Defect.from_file(defect) for defect in data.get("defects") or []],
            truncated_after=data.get("truncated_after_bytes"),
            disconnected=bool(data.get("disconnected")),
            meta=data.get("meta") or {},
        )
