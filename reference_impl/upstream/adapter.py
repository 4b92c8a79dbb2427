"""What every upstream adapter does: send one model turn, stream back `ModelEvent`s.

An adapter only translates wire formats. It makes no loop decisions; a failed model call
raises `UpstreamError` (with the upstream's status, or 502 when the upstream broke the
protocol), and the loop decides what the client sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx
from httpx_sse import EventSource, ServerSentEvent

from ..errors import UpstreamError
from .items import ItemDone, ItemStarted, Message, ModelEvent, TextDelta, ToolCall, TurnDone, TurnRequest


class UpstreamAdapter(Protocol):
    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        """The request body this adapter sends for the turn."""
        ...

    def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        """Run the turn; yield its events, ending with `TurnDone`."""
        ...


def upstream_error_from(response: httpx.Response, body: bytes) -> UpstreamError:
    """An `UpstreamError` carrying what the upstream said, in OpenAI's fields."""
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = error.get("message") if isinstance(error, dict) else None
    return UpstreamError(
        response.status_code,
        message or f"The upstream model returned HTTP {response.status_code}.",
        type=(error.get("type") if isinstance(error, dict) else None) or "server_error",
        code=error.get("code") if isinstance(error, dict) else None,
    )


def responses_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Token counts as a Responses `usage` block, every detail OpenAI sends included."""
    return {"input_tokens": input_tokens, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def closing_events(text: str | None, calls: list[ToolCall], incomplete: bool, usage: dict[str, Any] | None,
                   started: bool) -> list[ModelEvent]:
    """The end of a turn whose wire format sends its items only at the end: the message (its
    start and text too, unless already `started`), the tool calls, then `TurnDone`."""
    events: list[ModelEvent] = []
    if text is not None:
        if not started:
            events += [ItemStarted("message"), TextDelta(text)]
        events.append(ItemDone(Message("assistant", text), incomplete))
    for call in calls:
        events += [ItemStarted("function_call"), ItemDone(call)]
    reason = "max_output_tokens" if incomplete else None
    events.append(TurnDone("incomplete" if incomplete else "completed", reason, usage))
    return events


class HttpUpstream:
    """The HTTP part shared by the adapters: post a body, hand back JSON or SSE events."""

    def __init__(self, client: httpx.AsyncClient, url: str, api_key: str | None,
                 extra_headers: dict[str, str] | None = None) -> None:
        self._client = client
        self._url = url
        self._headers = ({"Authorization": f"Bearer {api_key}"} if api_key else {}) | (extra_headers or {})

    async def post_json(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as error:
            raise UpstreamError(502, f"The upstream model could not be reached: {error}") from error
        if response.status_code >= 400:
            raise upstream_error_from(response, response.content)
        try:
            return response.json()
        except ValueError as error:
            raise UpstreamError(502, "The upstream model returned a body that is not JSON.") from error

    async def post_stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The JSON payloads of the stream's events, up to `[DONE]` or the end of the stream."""
        try:
            async with self._client.stream("POST", self._url, json=body, headers=self._headers) as response:
                if response.status_code >= 400:
                    raise upstream_error_from(response, await response.aread())
                async for sse in EventSource(response).aiter_sse():
                    if sse.data == "[DONE]":
                        return
                    yield _payload(sse)
        except httpx.HTTPError as error:
            raise UpstreamError(502, f"The upstream model stream failed: {error}") from error


def _payload(sse: ServerSentEvent) -> dict[str, Any]:
    try:
        payload = json.loads(sse.data)
    except ValueError as error:
        raise UpstreamError(502, "The upstream model sent an event that is not JSON.") from error
    if not isinstance(payload, dict):
        raise UpstreamError(502, "The upstream model sent an event that is not a JSON object.")
    return payload
