"""Every check that needs no reference, on one exchange: the stream grammar, the SDK schema of
whatever the answer carries (Response, events, error envelope, chat completion, chunks), and
that an MCP call names only an approval its request granted.

Used by the engine on each step and by `parity check-exchange` on captured files. A part the
capture did not keep (status, request, body) skips the checks that need it, with a note.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..model.contract import approved_requests, is_chat_answer
from ..model.findings import Finding, Kind, Severity
from ..wire.exchange import Exchange
from ..wire.sse import SseEvent
from .grammar import check_chat_stream, check_stream
from .schemas import Where, check_error_envelope, check_event, check_payload


def resumed_after(url: str) -> int | None:
    """N for a resumed stream (`...?stream=true&starting_after=N`), else None."""
    values = parse_qs(urlsplit(url).query).get("starting_after")
    return int(values[0]) if values and values[0].lstrip("-").isdigit() else None


def _note(message: str) -> Finding:
    return Finding(Kind.SCHEMA, Severity.NOTE, "exchange.incomplete_capture", message)


def _is_error_answer(exchange: Exchange) -> bool:
    if exchange.status is not None:
        return exchange.status >= 400
    body: Any = exchange.body
    return isinstance(body, dict) and "error" in body and body.get("object") is None


def event_findings(event: SseEvent, position: int, chat: bool, current: bool = False) -> list[Finding]:
    """The SDK schema findings of the `position`th event of a stream (a chunk on the chat
    surface, where an `error` event has no schema)."""
    payload = event.payload
    if payload is None:
        return []
    if chat:
        return [] if "error" in payload else check_payload("chat.completion.chunk", payload,
                                                           Where(f"chunk {position}", "chunk"), current)
    return check_event(payload, position, current)


def delivery_findings(exchange: Exchange) -> list[Finding]:
    """What went wrong in getting the answer: its bytes (`Exchange.defects`), and why it did not
    arrive whole (`Exchange.transport_error`)."""
    findings = [Finding(Kind.WIRE, Severity.ERROR, f"wire.{defect.rule}", defect.message)
                for defect in exchange.defects]
    if exchange.transport_error:
        findings.append(Finding(Kind.TRANSPORT, Severity.ERROR, "transport", exchange.transport_error))
    return findings


def stream_findings(exchange: Exchange, chat: bool, current: bool = False, events_checked: int = 0) -> list[Finding]:
    """The stream's grammar, and the SDK schema of each event past the first `events_checked`."""
    grammar = check_chat_stream(exchange.events) if chat else check_stream(exchange.events,
                                                                           resumed_after(exchange.url))
    return grammar + [finding for position, event in enumerate(exchange.events) if position >= events_checked
                      for finding in event_findings(event, position, chat, current)]


def approval_link_findings(exchange: Exchange) -> list[Finding]:
    """An `mcp_call` that names an approval request names one its request approved (when the
    capture kept the request)."""
    response = exchange.response_object()
    if not isinstance(exchange.request_body, dict) or response is None:
        return []
    approved = approved_requests(exchange.request_body)
    return [Finding(Kind.ITEMS, Severity.ERROR, "approval_link",
                    f"output[{index}]: the mcp_call names approval request {item['approval_request_id']!r}, which "
                    "this request did not approve", expected=sorted(approved), actual=item["approval_request_id"],
                    key="an mcp_call names an approval request its request did not approve")
            for index, item in enumerate(response.get("output") or [])
            if isinstance(item, dict) and item.get("type") == "mcp_call" and item.get("approval_request_id")
            and item["approval_request_id"] not in approved]


OWN_OBJECTS = ("response.compaction", "response.input_tokens")
"""The answers of `POST /v1/responses/compact` and `/input_tokens`, checked as the SDK types them."""


def compaction_window_findings(body: dict[str, Any]) -> list[Finding]:
    """A compacted window is OpenAI's: every user message, then one compaction item (the SDK's
    description of `output`, and every compaction OpenAI answered in the recordings)."""
    output = body.get("output") if body.get("object") == "response.compaction" else None
    if not isinstance(output, list):
        return []
    shapes = [(item.get("type"), item.get("role")) if isinstance(item, dict) else (None, None) for item in output]
    wrong = [f"output[{index}] is {kind}" + (f" ({role})" if role else "") for index, (kind, role) in
             enumerate(shapes[:-1]) if (kind, role) != ("message", "user")]
    if not shapes or shapes[-1][0] != "compaction":
        wrong.append("its last item is no compaction item")
    if not wrong:
        return []
    return [Finding(Kind.SCHEMA, Severity.ERROR, "schema.compaction_window",
                    f"the compacted window is not every user message then one compaction item: {'; '.join(wrong)}")]


def no_reference_findings(exchange: Exchange, chat: bool | None = None, *, current: bool = False,
                          events_checked: int = 0) -> list[Finding]:
    """Grammar and schema findings for a complete answer (`chat`: the Chat Completions surface;
    None: tell from the answer itself). `current`: the answer came just now from a target,
    so a field the SDK requires and it lacks is a warning; otherwise it is traffic recorded
    earlier, and such a field is drift (a note). `events_checked`: a stream's first events
    whose schemas were checked already (as they arrived)."""
    if exchange.transport_error or exchange.disconnected:
        return []
    chat = is_chat_answer(exchange) if chat is None else chat
    findings = [] if exchange.status is not None else [_note("the capture kept no HTTP status; whether the "
                                                             "answer is an error is told from its body")]
    if not chat:
        findings += approval_link_findings(exchange)
    if exchange.streamed:
        return findings + stream_findings(exchange, chat, current, events_checked)
    body = exchange.body
    if body is None:
        return [*findings, _note("the capture kept no response body; schema checks are skipped")]
    if _is_error_answer(exchange):
        return findings + check_error_envelope(body, current=current)
    if isinstance(body, dict) and body.get("object") == "response" and "deleted" not in body:
        return findings + check_payload("response", body, "body", current)
    if chat and isinstance(body, dict) and body.get("object") == "chat.completion":
        return findings + check_payload("chat.completion", body, "body", current)
    if isinstance(body, dict) and body.get("object") in OWN_OBJECTS:
        return findings + check_payload(body["object"], body, "body", current) + compaction_window_findings(body)
    if exchange.answered_create_without_object:
        wanted = "chat.completion" if chat else "Response"
        findings.append(Finding(Kind.SCHEMA, Severity.ERROR, "schema.response_object",
                                f"the {exchange.status} answer to a create request is not a {wanted} object "
                                f"but {(body if isinstance(body, str) else json.dumps(body))[:80]}"))
    return findings
