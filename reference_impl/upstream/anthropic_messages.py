"""The Anthropic Messages wire format upstream (`POST {base}/messages`), so the client keeps
speaking OpenAI's shapes while the model is reached the Anthropic way.

Tools go as `{name, description, input_schema}`; a call comes back as a `tool_use` block and
its output goes as a `tool_result` block in the next user message. Instructions and system
messages become `system`; consecutive messages of one role are merged, as the API wants roles
to alternate. Reasoning has no counterpart here and stays out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ..errors import UpstreamError
from ..json_text import rewritable_json
from .adapter import closing_events, responses_usage
from .http import HttpUpstream, UpstreamClient, request_content
from .items import ItemStarted, Message, ModelEvent, TextDelta, ToolCall, ToolOutput, TurnRequest

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def _text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def anthropic_messages(turn: TurnRequest) -> tuple[str | None, list[dict[str, Any]]]:
    """(system, messages) for the turn's transcript."""
    system = [turn.instructions] if turn.instructions else []
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in turn.transcript:
        match item:
            case Message(role="system" | "developer", content=content):
                system.append(_text(content))
            case Message(role=role, content=content):
                add("assistant" if role == "assistant" else "user", {"type": "text", "text": _text(content)})
            case ToolCall(call_id=call_id, name=name, arguments=arguments):
                add("assistant", {"type": "tool_use", "id": call_id, "name": name,
                                  "input": _tool_input(call_id, arguments)})
            case ToolOutput(call_id=call_id, output=output):
                add("user", {"type": "tool_result", "tool_use_id": call_id, "content": _text(output)})
    return ("\n\n".join(system) or None), messages


def _tool_input(call_id: str, arguments: str) -> dict[str, Any]:
    """A function call's arguments as a `tool_use` block's `input`. OpenAI's `arguments` is any
    string; Anthropic's `input` is an object, so arguments that are no JSON object (a client's
    function call may carry any) are refused as the model's API would refuse them, a 400."""
    try:
        value = rewritable_json(arguments or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UpstreamError(400, f"The arguments of function call {call_id!r} are not a JSON object, which an "
                                 "Anthropic model's tool_use input must be.", type="invalid_request_error")
    return value


def allowed_names(choice: Any) -> set[str] | None:
    """The tool names an `allowed_tools` choice permits (Anthropic has no such choice, so the
    adapter offers only those tools), or None when every tool is allowed."""
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return {tool.get("name") for tool in choice.get("tools") or []}
    return None


def anthropic_tool_choice(choice: Any, parallel: bool) -> dict[str, Any]:
    if choice == "required" or (isinstance(choice, dict) and choice.get("mode") == "required"):
        mapped: dict[str, Any] = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        mapped = {"type": "tool", "name": choice.get("name")}
    else:
        mapped = {"type": "auto"}
    return mapped | ({} if parallel else {"disable_parallel_tool_use": True})


class AnthropicMessagesAdapter:
    def __init__(self, client: UpstreamClient, base_url: str, api_key: str | None) -> None:
        self._http = HttpUpstream(client, base_url.rstrip("/") + "/messages", None,
                                  extra_headers={"anthropic-version": ANTHROPIC_VERSION}
                                  | ({"x-api-key": api_key} if api_key else {}))

    def payload(self, turn: TurnRequest) -> dict[str, Any]:
        system, messages = anthropic_messages(turn)
        body: dict[str, Any] = {"model": turn.model, "messages": messages, "stream": turn.stream,
                                "max_tokens": turn.sampling.get("max_output_tokens") or DEFAULT_MAX_TOKENS}
        if system is not None:
            body["system"] = system
        allowed = allowed_names(turn.tool_choice)
        tools = [t for t in turn.tools if allowed is None or t.name in allowed]
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description or "",
                              "input_schema": t.parameters or {"type": "object"}} for t in tools]
            body["tool_choice"] = anthropic_tool_choice(turn.tool_choice, turn.parallel_tool_calls)
        for key in ("temperature", "top_p"):
            if key in turn.sampling:
                body[key] = turn.sampling[key]
        return body

    async def stream_turn(self, turn: TurnRequest) -> AsyncIterator[ModelEvent]:
        content = await request_content(lambda: self.payload(turn), len(turn.transcript))
        if not turn.stream:
            message = await self._http.post_json(content)
            blocks = message.get("content") or []
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [ToolCall(b["id"], b["name"], json.dumps(b.get("input") or {}, separators=(",", ":")))
                     for b in blocks if b.get("type") == "tool_use"]
            has_text = any(b.get("type") == "text" for b in blocks)
            for event in closing_events(text if has_text else None, calls, message.get("stop_reason") == "max_tokens",
                                        _usage(message.get("usage")), started=False):
                yield event
            return
        blocks: dict[int, dict[str, Any]] = {}
        stop_reason: str | None = None
        usage: dict[str, Any] = {}
        text_started = False
        async for event in self._http.post_stream(content):
            kind = event.get("type")
            if kind == "error":
                error = event.get("error") or {}
                raise UpstreamError(500, error.get("message") or "The upstream model failed.", code=error.get("type"))
            if kind == "message_start":
                usage |= (event.get("message") or {}).get("usage") or {}
            elif kind == "content_block_start":
                block = dict(event.get("content_block") or {})
                block["partial_json"] = ""
                blocks[event.get("index", len(blocks))] = block
                if block.get("type") == "text" and not text_started:
                    text_started = True
                    yield ItemStarted("message")
            elif kind == "content_block_delta":
                delta = event.get("delta") or {}
                block = blocks.get(event.get("index", 0), {})
                if delta.get("type") == "text_delta":
                    block["text"] = block.get("text", "") + delta.get("text", "")
                    yield TextDelta(delta.get("text", ""))
                elif delta.get("type") == "input_json_delta":
                    block["partial_json"] += delta.get("partial_json", "")
            elif kind == "message_delta":
                stop_reason = (event.get("delta") or {}).get("stop_reason") or stop_reason
                usage |= event.get("usage") or {}
            elif kind == "message_stop":
                break
        if stop_reason is None:
            raise UpstreamError(502, "The upstream model stream ended without a stop_reason.")
        ordered = [blocks[index] for index in sorted(blocks)]
        text = "".join(b.get("text", "") for b in ordered if b.get("type") == "text")
        calls = [ToolCall(b["id"], b["name"], b["partial_json"] or "{}")
                 for b in ordered if b.get("type") == "tool_use"]
        for event in closing_events(text if text_started else None, calls, stop_reason == "max_tokens",
                                    _usage(usage), started=True):
            yield event


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    return responses_usage((usage or {}).get("input_tokens", 0), (usage or {}).get("output_tokens", 0))
