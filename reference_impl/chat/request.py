"""A chat completion request: validated, and converted to what the loop reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..chain import Chain, History
from ..client import FunctionTool
from ..errors import InvalidRequest
from ..loop.state import LoopRequest
from ..upstream.items import Message, ToolCall, ToolOutput, TranscriptItem
from ..refusals import chat_schema, missing


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: tuple[FunctionTool, ...]
    tool_choice: Any
    parallel_tool_calls: bool
    stream: bool
    include_usage: bool
    raw: dict[str, Any]

    def loop_request(self) -> LoopRequest:
        sampling = {key: self.raw[key] for key in ("temperature", "top_p", "user") if self.raw.get(key) is not None}
        max_tokens = self.raw.get("max_completion_tokens") or self.raw.get("max_tokens")
        if max_tokens is not None:
            sampling["max_output_tokens"] = max_tokens
        return LoopRequest(self.model, None, self.tools, _responses_tool_choice(self.tool_choice),
                           self.parallel_tool_calls, False, sampling)

    def history(self) -> History:
        """The messages as the model's transcript (there is no stored chain on this surface)."""
        transcript: list[TranscriptItem] = []
        for message in self.messages:
            role, content = message["role"], message.get("content")
            if role == "tool":
                transcript.append(ToolOutput(message["tool_call_id"], _text(content)))
                continue
            if content is not None and (role != "assistant" or _text(content)):
                transcript.append(Message(role, content if isinstance(content, str) else _text(content)))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                transcript.append(ToolCall(call["id"], function.get("name", ""), function.get("arguments", "")))
        return History(Chain(tuple(transcript)), (), new_from=len(transcript))


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _responses_tool_choice(choice: Any) -> Any:
    """A Chat `tool_choice` written the way the loop (and the Responses API) writes it."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "name": (choice.get("function") or {}).get("name")}
    return choice


def validate_chat(body: Any) -> ChatRequest:
    """The validated request (OpenAI's description of a chat completion body, `request_schema`),
    or the `InvalidRequest` OpenAI would answer with; a 400 for tools this gateway cannot run."""
    if not isinstance(body, dict):
        raise InvalidRequest("We could not parse the JSON body of your request. The OpenAI API expects a JSON "
                             "payload (an object).")
    if not isinstance(body.get("model"), str):
        raise InvalidRequest("you must provide a model parameter")
    messages = body.get("messages")
    if messages is None:
        raise missing("messages")
    if (violation := chat_schema().first_violation(body)) is not None:
        raise violation
    tools: list[FunctionTool] = []
    for index, tool in enumerate(body.get("tools") or []):
        if tool["type"] != "function":
            raise InvalidRequest(f"The reference gateway does not support tools of type '{tool['type']}'.",
                                 param=f"tools[{index}].type", code="unsupported_value")
        function = tool["function"]
        tools.append(FunctionTool(function["name"], function.get("description"), function.get("parameters"),
                                  function.get("strict")))
    return ChatRequest(
        model=body["model"],
        messages=messages,
        tools=tuple(tools),
        tool_choice=body.get("tool_choice", "auto"),
        parallel_tool_calls=body.get("parallel_tool_calls", True) is not False,
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        raw=body,
    )
