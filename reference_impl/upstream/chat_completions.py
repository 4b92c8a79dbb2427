"""The OpenAI Chat Completions wire format upstream (replays the whole transcript each turn).

Consecutive tool calls become one assistant message with `tool_calls`; tool outputs become
`tool` messages; reasoning items have no Chat form and stay out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..errors import UpstreamError
from .adapter import closing_events, responses_usage
from .http import HttpUpstream, UpstreamClient, request_content
from .items import ItemStarted, Message, ModelEvent, TextDelta, ToolCall, ToolOutput, TurnRequest


def _text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def chat_messages(turn: TurnRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if turn.instructions is not None:
        messages.append({"role": "system", "content": turn.instructions})
    for item in turn.transcript:
        match item:
            case Message(role=role, content=content):
                messages.append({"role": role, "content": _text(content)})
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                last = messages[-1] if messages else None
                if last is not None and last["role"] == "assistant":
                    last.setdefault("tool_calls", []).append(call)
                else:
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            case ToolOutput(call_id=call_id, output=output):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(output)})
    return messages


def chat_tool_choice(choice: Any) -> Any:
    """A Responses `tool_choice` in Chat's shape."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        tools = [{"type": "function", "function": {"name": t.get("name")}} for t in choice.get("tools") or []]
        return {"type": "allowed_tools", "allowed_tools": {"mode": choice.get("mode"), "tools": tools}}
    return choice


def chat_response_format(text: Any) -> dict[str, Any] | None:
    """A Responses `text.format` in Chat's shape (`response_format`); None for plain text."""
    text_format = text.get("format") if isinstance(text, dict) else None
    if not isinstance(text_format, dict) or text_format.get("type") not in ("json_schema", "json_object"):
        return None
    if text_format["type"] == "json_object":
        return {"type": "json_object"}
    schema = {key: text_format[key] for key in ("name", "description", "schema", "strict") if key in text_format}
    return {"type": "json_schema", "json_schema": schema}


class ChatCompletionsAdapter:
    def __init__(self, client: UpstreamClient, base_url: str, api_key: str | None) -> None:
        self._http = HttpUpstream(client, base_url.rstrip("/") + "/chat/completions", api_key)

    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": turn.model, "messages": chat_messages(turn), "stream": turn.stream}
        if turn.stream:
            body["stream_options"] = {"include_usage": True}
        if turn.tools:
            body["tools"] = [{"type": "function", "function": {  # Chat's description is a string or absent
                "name": t.name, **({"description": t.description} if t.description is not None else {}),
                "parameters": t.parameters or {"type": "object"}}} for t in turn.tools]
            body["tool_choice"] = chat_tool_choice(turn.tool_choice)
            body["parallel_tool_calls"] = turn.parallel_tool_calls
        for key in ("temperature", "top_p", "user"):
            if key in turn.sampling:
                body[key] = turn.sampling[key]
        if "max_output_tokens" in turn.sampling:
            body["max_completion_tokens"] = turn.sampling["max_output_tokens"]
        if (response_format := chat_response_format(turn.sampling.get("text"))) is not None:
            body["response_format"] = response_format
        return body

    async def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        content = await request_content(lambda: self.payload(turn), len(turn.transcript))
        if not turn.stream:
            response = await self._http.post_json(content)
            choice = (response.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            text = message.get("content")
            calls = [(c.get("id", ""), (c.get("function") or {}).get("name", ""),
                      (c.get("function") or {}).get("arguments", "")) for c in message.get("tool_calls") or []]
            calls = [ToolCall(*call) for call in calls]
            for event in closing_events(text, calls, choice.get("finish_reason") == "length",
                                        _usage(response.get("usage")), started=False):
                yield event
            return
        text: str | None = None
        calls: dict[int, list[str]] = {}
        finish_reason: str | None = None
        usage: dict[str, Any] | None = None
        async for chunk in self._http.post_stream(content):
            if isinstance(chunk.get("error"), dict):
                raise UpstreamError(500, chunk["error"].get("message") or "The upstream model failed.",
                                    code=chunk["error"].get("code"))
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    if text is None:
                        text = ""
                        yield ItemStarted("message")
                    text += delta["content"]
                    yield TextDelta(delta["content"])
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(call.get("index", 0), ["", "", ""])
                    slot[0] = call.get("id") or slot[0]
                    function = call.get("function") or {}
                    slot[1] = function.get("name") or slot[1]
                    slot[2] += function.get("arguments") or ""
                finish_reason = choice.get("finish_reason") or finish_reason
        if finish_reason is None:
            raise UpstreamError(502, "The upstream model stream ended without a finish_reason.")
        ordered = [ToolCall(*calls[index]) for index in sorted(calls)]
        for event in closing_events(text, ordered, finish_reason == "length", _usage(usage), started=True):
            yield event


def _usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    return responses_usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)) if usage else None
