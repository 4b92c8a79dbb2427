"""The Responses surface's sink: the loop's events as `response.*` events, in OpenAI's shapes
and order, appended to the event log (which numbers them), and the Response object itself.
This is the one place output indices are given and Response snapshots are built.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, assert_never

from .citations import Citable, Piece, StreamingCitations
from .client import CreateRequest, response_object
from .errors import GatewayError, UpstreamError
from .hosted_items import INCLUDE_FILE_RESULTS, INCLUDE_WEB_SOURCES, HostedKind, kept_sources
from .hosted_tools import HostedOutcome
from .ids import new_id
from .loop.actions import Completed, Ending, Exhausted, Failed
from .loop.events import (
    ApprovalRequested, Compacted, FunctionCallHandedBack, HostedCallDone, HostedCallStarted, ListingDone,
    ListingStarted, LoopEvent, McpCallDone, McpCallStarted, MessageDone, MessageStarted, ReasoningDone,
    ReasoningStarted, RunStarted,
)
from .loop.sink import LoopResult
from .reasoning_items import INCLUDE_ENCRYPTED_REASONING, sealed_reasoning
from .sealing import Sealer
from .upstream.items import Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted, TextDelta

H = TypeVar("H", bound="Open")


class EventLogLike(Protocol):
    def append(self, event_type: str, fields: dict[str, Any]) -> None: ...


def _text_part(text: str = "", annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "annotations": list(annotations or []), "logprobs": [], "text": text}


@dataclass(frozen=True)
class Open:
    """An item the client has seen added and not yet done."""

    index: int
    item_id: str


@dataclass(frozen=True)
class OpenMessage(Open):
    """A message being streamed: its text goes through the response's citations."""

    citations: StreamingCitations
    annotations: list[dict[str, Any]]


@dataclass(frozen=True)
class OpenMcpCall(Open):
    """An MCP call running: its item as added, with its arguments."""

    item: dict[str, Any]


def _padding() -> str:
    """A delta's `obfuscation`: random characters of a random length, as OpenAI pads its deltas
    so that their sizes do not tell what they carry (recorded on every delta kind since August
    2025, over SSE and WebSocket)."""
    return secrets.token_urlsafe(12)[:secrets.randbelow(16) + 1]


def _the(handle: H | None) -> H:
    """The open item an event refers to (the driver opens it before it says more of it)."""
    assert handle is not None, "an event about an item that is not open"
    return handle


class ResponsesSink:
    def __init__(self, log: EventLogLike | None, request: CreateRequest, response_id: str, created_at: int,
                 sealer: Sealer) -> None:
        """`log`: where the events go; None for a response no one reads as events (neither
        streamed nor kept for a later stream), which builds none, only its output items and
        its final Response."""
        self._log = log
        self._sealer = sealer
        self.request = request
        self.response_id = response_id
        self.created_at = created_at
        self.output: list[dict[str, Any] | None] = []
        """Client-visible items by output index; None while an item is still open."""
        self.citable = Citable()
        """What this response's hosted searches found, for the messages that cite it."""
        self.web_searches = 0
        self._kept: dict[str, dict[str, Any]] = {}
        """What a conversation keeps of each hosted search, by item id, whatever `include` shows
        the client: a file search's `results`, a web search's `action` with its pages as sources."""
        self._message: OpenMessage | None = None
        self._reasoning: Open | None = None
        self._listings: dict[str, Open] = {}
        """Tool listings under way, by server label."""
        self._hosted_calls: dict[str, Open] = {}
        self._mcp_calls: dict[str, OpenMcpCall] = {}
        """Gateway calls under way, by the model's call id."""
        options = request.raw.get("stream_options") or {}
        self._obfuscated = options.get("include_obfuscation", True) is not False
        """Whether delta events carry `obfuscation` (OpenAI's default; `stream_options` turns it off)."""

    def snapshot(self, status: str, output: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        return response_object(self.request, response_id=self.response_id, created_at=self.created_at,
                               status=status, output=output or [], web_searches=self.web_searches, **extra)

    def _send(self, event_type: str, **fields: Any) -> None:
        if self._log is None:
            return
        if self._obfuscated and event_type.endswith(".delta"):
            fields["obfuscation"] = _padding()
        self._log.append(event_type, fields)

    def emit(self, event: LoopEvent) -> None:
        match event:
            case RunStarted():
                self._started()
            case ListingStarted(server_label=label):
                self._listings[label] = self._listing_started(label)
            case ListingDone(server_label=label, tools=tools, error=error):
                self._listing_done(self._listings.pop(label), label, list(tools), error)
            case MessageStarted():
                self._message = self._message_started()
            case TextDelta(delta=delta):
                message = _the(self._message)
                self._show(message, message.citations.feed(delta))
            case MessageDone(text=text, incomplete=incomplete):
                self._message_done(_the(self._message), text, incomplete)
                self._message = None
            case ReasoningStarted():
                self._reasoning = self._reasoning_started()
            case SummaryPartStarted(index=index):
                self._summary_part_started(_the(self._reasoning), index)
            case SummaryDelta(index=index, delta=delta):
                self._summary_delta(_the(self._reasoning), index, delta)
            case SummaryPartDone(index=index, text=text):
                self._summary_part_done(_the(self._reasoning), index, text)
            case ReasoningDone(reasoning=reasoning):
                self._reasoning_done(_the(self._reasoning), reasoning)
                self._reasoning = None
            case McpCallStarted(call_id=call_id, server_label=label, name=name, arguments=arguments,
                                approval_request_id=approval_request_id):
                self._mcp_calls[call_id] = self._mcp_call_started(label, name, arguments, approval_request_id)
            case McpCallDone(call_id=call_id, output=output, error=error):
                self._mcp_call_done(self._mcp_calls.pop(call_id), output, error)
            case HostedCallStarted(call_id=call_id, kind=kind):
                self._hosted_calls[call_id] = self._hosted_call_started(kind)
            case HostedCallDone(call_id=call_id, kind=kind, outcome=outcome):
                self._hosted_call_done(self._hosted_calls.pop(call_id), kind, outcome)
            case FunctionCallHandedBack(call_id=call_id, name=name, arguments=arguments):
                self._function_call(call_id, name, arguments)
            case ApprovalRequested(request_id=request_id, server_label=label, name=name, arguments=arguments):
                item = {"id": request_id, "type": "mcp_approval_request", "arguments": arguments, "name": name,
                        "server_label": label}
                self.done(self.added(item), item)
            case Compacted(item=item):
                self.done(self.added(item), item)
            case _:
                assert_never(event)

    def result(self, ending: Ending, usage: dict[str, Any] | None) -> LoopResult:
        """The run's end as a terminal event and the final Response: the gateway running out of
        a budget of its own is a server error here (OpenAI has no such ending)."""
        output = self.finished_output()
        match ending:
            case Completed(incomplete_reason=None):
                response = self.snapshot("completed", output, usage=usage)
                self._send("response.completed", response=response)
                return LoopResult(response)
            case Completed(incomplete_reason=reason):
                response = self.snapshot("incomplete", output, usage=usage, incomplete_reason=reason)
                self._send("response.incomplete", response=response)
                return LoopResult(response)
            case Failed(error=error):
                return self._failed(error, output, usage)
            case Exhausted(budget=budget):
                return self._failed(UpstreamError(500, f"The gateway stopped the loop: its {budget} budget ran out."),
                                    output, usage)
            case _:
                assert_never(ending)

    def _started(self) -> None:
        if self._log is None:
            return
        if self.request.background:
            queued = self.snapshot("queued")
            self._send("response.created", response=queued)
            self._send("response.queued", response=queued)
        else:
            self._send("response.created", response=self.snapshot("in_progress"))
        self._send("response.in_progress", response=self.snapshot("in_progress"))

    def _failed(self, error: GatewayError, output: list[dict[str, Any]], usage: dict[str, Any] | None) -> LoopResult:
        self._error(error.type, error.code, error.message, error.param)
        response = self.snapshot("failed", output, usage=usage, error=error.response_error())
        self._send("response.failed", response=response)
        return LoopResult(response, error)

    def added(self, item: dict[str, Any]) -> int:
        index = len(self.output)
        self.output.append(None)
        self._send("response.output_item.added", output_index=index, item=item)
        return index

    def done(self, index: int, item: dict[str, Any]) -> None:
        self.output[index] = item
        self._send("response.output_item.done", output_index=index, item=item)

    def finished_output(self) -> list[dict[str, Any]]:
        return [item for item in self.output if item is not None]

    def kept_output(self, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Output items as a conversation keeps them: hosted searches with what they found (see
        `hosted_items.as_listed`), so a later turn reads them as the model did."""
        return [item | self._kept.get(item.get("id"), {}) for item in output]

    # -- messages --------------------------------------------------------------------------

    def _message_started(self) -> OpenMessage:
        item_id = new_id("msg")
        index = self.added({"id": item_id, "type": "message", "status": "in_progress", "content": [],
                            "role": "assistant"})
        self._send("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                   part=_text_part())
        return OpenMessage(index, item_id, StreamingCitations(self.citable), [])

    def _show(self, handle: OpenMessage, pieces: list[Piece]) -> None:
        """Each piece's cleaned text as a delta, then the annotations completed where it ends."""
        for text, completed in pieces:
            if text:
                self._send("response.output_text.delta", item_id=handle.item_id, output_index=handle.index,
                           content_index=0, delta=text, logprobs=[])
            for annotation in completed:
                self._send("response.output_text.annotation.added", item_id=handle.item_id,
                           output_index=handle.index, content_index=0, annotation_index=len(handle.annotations),
                           annotation=annotation)
                handle.annotations.append(annotation)

    def _message_done(self, handle: OpenMessage, text: str, incomplete: bool) -> None:
        """`text` is the model's whole text: its deltas, if any came, added up to it."""
        if not handle.citations.fed:
            self._show(handle, handle.citations.feed(text))
        self._show(handle, handle.citations.finish())
        item_id, index, text, annotations = handle.item_id, handle.index, handle.citations.shown, handle.annotations
        self._send("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                   text=text, logprobs=[])
        self._send("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                   part=_text_part(text, annotations))
        self.done(index, {"id": item_id, "type": "message", "status": "incomplete" if incomplete else "completed",
                          "content": [_text_part(text, annotations)], "role": "assistant"})

    # -- reasoning -------------------------------------------------------------------------

    def _reasoning_started(self) -> Open:
        item_id = new_id("rs")
        return Open(self.added({"id": item_id, "type": "reasoning", "content": [], "summary": []}), item_id)

    def _summary_part_started(self, handle: Open, summary_index: int) -> None:
        self._send("response.reasoning_summary_part.added", item_id=handle.item_id, output_index=handle.index,
                   summary_index=summary_index, part={"type": "summary_text", "text": ""})

    def _summary_delta(self, handle: Open, summary_index: int, delta: str) -> None:
        self._send("response.reasoning_summary_text.delta", item_id=handle.item_id, output_index=handle.index,
                   summary_index=summary_index, delta=delta)

    def _summary_part_done(self, handle: Open, summary_index: int, text: str) -> None:
        self._send("response.reasoning_summary_text.done", item_id=handle.item_id, output_index=handle.index,
                   summary_index=summary_index, text=text)
        self._send("response.reasoning_summary_part.done", item_id=handle.item_id, output_index=handle.index,
                   summary_index=summary_index, part={"type": "summary_text", "text": text})

    def _reasoning_done(self, handle: Open, reasoning: Reasoning) -> None:
        """The reasoning item as OpenAI's of 2026: an empty `content` (the reasoning text is not
        shown), the summary's parts, and `encrypted_content` when `include` asks for it."""
        item = {"id": handle.item_id, "type": "reasoning", "content": [],
                "summary": [{"type": "summary_text", "text": text} for text in reasoning.summary]}
        if INCLUDE_ENCRYPTED_REASONING in self.request.include:
            item["encrypted_content"] = sealed_reasoning(self._sealer, reasoning)
        self.done(handle.index, item)

    # -- tools -----------------------------------------------------------------------------

    def _function_call(self, call_id: str, name: str, arguments: str) -> None:
        """A client-executed function call, whole: added, arguments, done."""
        item = {"id": new_id("fc"), "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": name}
        index = self.added(item)
        self._send("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                   delta=arguments)
        self._send("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                   arguments=arguments)  # without `name`, as every recorded one
        self.done(index, item | {"status": "completed", "arguments": arguments})

    def _hosted_call_started(self, kind: HostedKind) -> Open:
        """The call's item added (OpenAI's: a web search's `action` holds only its type until
        done, a file search's `queries` are empty), then its in_progress and searching phases."""
        item_id = new_id("ws" if kind == "web_search" else "fs")
        item: dict[str, Any] = {"id": item_id, "type": f"{kind}_call", "status": "in_progress"}
        item |= {"action": {"type": "search"}} if kind == "web_search" else {"queries": [], "results": None}
        index = self.added(item)
        for phase in ("in_progress", "searching"):
            self._send(f"response.{kind}_call.{phase}", item_id=item_id, output_index=index)
        return Open(index, item_id)

    def _hosted_call_done(self, handle: Open, kind: HostedKind, outcome: HostedOutcome) -> None:
        """A search that failed has status `failed` and no phase after `searching` (OpenAI has
        no failed event for these calls); what one found becomes citable."""
        if outcome.error is None:
            self._send(f"response.{kind}_call.completed", item_id=handle.item_id, output_index=handle.index)
        item: dict[str, Any] = {"id": handle.item_id, "type": f"{kind}_call",
                                "status": "failed" if outcome.error else "completed"}
        results = list(outcome.results)
        if kind == "web_search":
            self.web_searches += 1
            action: dict[str, Any] = {"type": "search", "query": outcome.queries[0] if outcome.queries else ""}
            if INCLUDE_WEB_SOURCES in self.request.include:
                action["sources"] = [{"type": "url", "url": page["url"]} for page in results]
            item["action"] = action
            self._kept[handle.item_id] = {"action": action | {"sources": kept_sources(results)}}
        else:
            item |= {"queries": list(outcome.queries),
                     "results": results if INCLUDE_FILE_RESULTS in self.request.include else None}
            self._kept[handle.item_id] = {"results": results}
        self.citable.learn(kind == "web_search", results)
        self.done(handle.index, item)

    def _listing_started(self, server_label: str) -> Open:
        item_id = new_id("mcpl")
        index = self.added({"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": []})
        self._send("response.mcp_list_tools.in_progress", item_id=item_id, output_index=index)
        return Open(index, item_id)

    def _listing_done(self, handle: Open, server_label: str, tools: list[dict[str, Any]], error: str | None) -> None:
        self._send("response.mcp_list_tools.failed" if error else "response.mcp_list_tools.completed",
                   item_id=handle.item_id, output_index=handle.index)
        item: dict[str, Any] = {"id": handle.item_id, "type": "mcp_list_tools", "server_label": server_label,
                                "tools": tools}
        if error:
            item["error"] = error
        self.done(handle.index, item)

    def _mcp_call_started(self, server_label: str, name: str, arguments: str,
                          approval_request_id: str | None) -> OpenMcpCall:
        item = {"id": new_id("mcp"), "type": "mcp_call", "status": "in_progress",
                "approval_request_id": approval_request_id, "arguments": "", "error": None, "name": name,
                "output": None, "server_label": server_label}
        index = self.added(item)
        self._send("response.mcp_call.in_progress", item_id=item["id"], output_index=index)
        self._send("response.mcp_call_arguments.delta", item_id=item["id"], output_index=index, delta=arguments)
        self._send("response.mcp_call_arguments.done", item_id=item["id"], output_index=index, arguments=arguments)
        return OpenMcpCall(index, item["id"], item | {"arguments": arguments})

    def _mcp_call_done(self, handle: OpenMcpCall, output: str | None, error: dict[str, Any] | None) -> None:
        index, item = handle.index, handle.item
        failed = error is not None
        self._send("response.mcp_call.failed" if failed else "response.mcp_call.completed",
                   item_id=item["id"], output_index=index)
        self.done(index, item | {"status": "failed" if failed else "completed", "output": output, "error": error})

    def _error(self, error_type: str, code: str | None, message: str, param: str | None) -> None:
        """OpenAI's in-stream `error` event, nested as real streams carry it."""
        self._send("error", error={"type": error_type, "code": code, "message": message, "param": param})
