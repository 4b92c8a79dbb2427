"""The OpenAI Responses wire format upstream.

Two ways to continue a conversation upstream:
- `replay` sends the whole transcript every turn with `store: false`;
- `previous_response_id` chains on the upstream's own store and sends only what was added
  since the last model turn and did not come from the model (tool outputs, user messages),
  with `store: true`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..config import UpstreamChaining
from ..errors import UpstreamError
from .http import HttpUpstream, UpstreamClient, request_content
from .items import (
    ItemDone, ItemStarted, Message, ModelEvent, Reasoning, SummaryDelta, SummaryPartDone, SummaryPartStarted,
    TextDelta, ToolCall, ToolOutput, TranscriptItem, TurnDone, TurnRequest,
)


def wire_item(item: TranscriptItem) -> dict[str, Any] | None:
    """A transcript item as a Responses input item (reasoning without its encrypted content
    cannot be replayed, so it is left out)."""
    match item:
        case Message(role=role, content=content):
            return {"type": "message", "role": role, "content": content}
        case ToolCall(call_id=call_id, name=name, arguments=arguments):
            return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
        case ToolOutput(call_id=call_id, output=output):
            return {"type": "function_call_output", "call_id": call_id, "output": output}
        case Reasoning(id=item_id, summary=summary, encrypted_content=encrypted) if encrypted:
            return {"type": "reasoning", "id": item_id, "encrypted_content": encrypted,
                    "summary": [{"type": "summary_text", "text": text} for text in summary]}
    return None


def said_by_model(item: TranscriptItem) -> bool:
    """Whether the item is the model's own output (which a chained upstream already holds)."""
    return isinstance(item, ToolCall | Reasoning) or (isinstance(item, Message) and item.role == "assistant")


def transcript_item(item: dict[str, Any]) -> Message | ToolCall | Reasoning | None:
    """A Responses output item as a transcript item."""
    kind = item.get("type")
    if kind == "message":
        text = "".join(part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict))
        return Message("assistant", text, item.get("id"))
    if kind == "function_call":
        return ToolCall(item["call_id"], item["name"], item.get("arguments") or "", item.get("id"))
    if kind == "reasoning":
        summary = tuple(part.get("text", "") for part in item.get("summary") or [])
        return Reasoning(item.get("id") or "", summary, item.get("encrypted_content"))
    return None


def _started_kind(item: dict[str, Any]) -> str | None:
    return item.get("type") if item.get("type") in ("message", "reasoning", "function_call") else None


class ResponsesAdapter:
    def __init__(self, client: UpstreamClient, base_url: str, api_key: str | None,
                 chaining: UpstreamChaining) -> None:
        self._http = HttpUpstream(client, base_url.rstrip("/") + "/responses", api_key)
        self._chaining = chaining

    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        chained = self._chaining == "previous_response_id" and turn.previous_response_id is not None
        items = [i for i in turn.transcript[turn.new_from:] if not said_by_model(i)] if chained else turn.transcript
        body: dict[str, Any] = {
            "model": turn.model,
            "input": [wired for item in items if (wired := wire_item(item)) is not None],
            "stream": turn.stream,
            "store": self._chaining == "previous_response_id",
        }
        if chained:
            body["previous_response_id"] = turn.previous_response_id
        if turn.instructions is not None:
            body["instructions"] = turn.instructions
        if turn.tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.parameters, "strict": t.strict} for t in turn.tools]
            body["tool_choice"] = turn.tool_choice
            body["parallel_tool_calls"] = turn.parallel_tool_calls
        return body | turn.sampling

    async def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        content = await request_content(lambda: self.payload(turn), len(turn.transcript))
        if not turn.stream:
            for event in _events_of(await self._http.post_json(content)):
                yield event
            return
        error: dict[str, Any] | None = None
        async for event in self._http.post_stream(content):
            kind = event.get("type")
            if kind == "error":
                error = event.get("error") if isinstance(event.get("error"), dict) else event
            elif kind == "response.failed":
                failed = (event.get("response") or {}).get("error") or error or {}
                raise UpstreamError(500, failed.get("message") or "The upstream model failed.",
                                    code=failed.get("code"))
            elif (translated := _translate(event)) is not None:
                yield translated
                if isinstance(translated, TurnDone):
                    return
        raise UpstreamError(502, "The upstream model stream ended before its terminal event.")


def _translate(event: dict[str, Any]) -> ModelEvent | None:
    kind = event.get("type")
    if kind == "response.output_item.added":
        started = _started_kind(event.get("item") or {})
        return ItemStarted(started) if started else None  # type: ignore[arg-type]
    if kind == "response.output_text.delta":
        return TextDelta(event.get("delta", ""))
    if kind == "response.reasoning_summary_part.added":
        return SummaryPartStarted(event.get("summary_index", 0))
    if kind == "response.reasoning_summary_text.delta":
        return SummaryDelta(event.get("summary_index", 0), event.get("delta", ""))
    if kind == "response.reasoning_summary_part.done":
        return SummaryPartDone(event.get("summary_index", 0), (event.get("part") or {}).get("text", ""))
    if kind == "response.output_item.done":
        item = event.get("item") or {}
        converted = transcript_item(item)
        return ItemDone(converted, item.get("status") == "incomplete") if converted else None
    if kind in ("response.completed", "response.incomplete"):
        return _turn_done(event.get("response") or {})
    return None


def _turn_done(response: dict[str, Any]) -> TurnDone:
    incomplete = response.get("status") == "incomplete"
    reason = (response.get("incomplete_details") or {}).get("reason") if incomplete else None
    return TurnDone("incomplete" if incomplete else "completed", reason, response.get("usage"), response.get("id"))


def _events_of(response: dict[str, Any]) -> list[ModelEvent]:
    """The events a non-streamed response would have streamed (one delta per text)."""
    if response.get("status") == "failed":
        failed = response.get("error") or {}
        raise UpstreamError(500, failed.get("message") or "The upstream model failed.", code=failed.get("code"))
    events: list[ModelEvent] = []
    for raw in response.get("output") or []:
        item = transcript_item(raw)
        if item is None:
            continue
        events.append(ItemStarted(_started_kind(raw)))  # type: ignore[arg-type]
        if isinstance(item, Message) and item.content:
            events.append(TextDelta(str(item.content)))
        if isinstance(item, Reasoning):
            for index, text in enumerate(item.summary):
                events += [SummaryPartStarted(index), SummaryDelta(index, text), SummaryPartDone(index, text)]
        events.append(ItemDone(item, raw.get("status") == "incomplete"))
    events.append(_turn_done(response))
    return events
