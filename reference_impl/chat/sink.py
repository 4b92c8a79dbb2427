"""The chat surface's sink: a loop run as one chat completion.

Gateway tool activity is invisible on this surface; the client gets the model's last answer
(with the web pages it cites from this completion's searches as `url_citation` annotations,
and file markers removed: chat has no file citation), the client-executed tool calls it handed
back, and a finish_reason: `stop`, `tool_calls`, or
`length` when the model ran out of tokens or the gateway's rounds or time budget ran out (the
answer is then as far as it got). In `final_only` stream mode the finished completion is sent
as chunks of at most 64 bytes that never split a UTF-8 character.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..citations import Citable, annotate
from ..hosted_items import HostedKind
from ..hosted_tools import HostedOutcome
from ..loop.actions import Completed, Exhausted, Failed, Outcome
from ..loop.sink import LoopResult

CHUNK_BYTES = 64
_URL_CITATION_KEYS = ("end_index", "start_index", "title", "url")


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    prompt = (usage or {}).get("input_tokens", 0)
    completion = (usage or {}).get("output_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ChatSink:
    def __init__(self, model: str, completion_id: str, created: int) -> None:
        self.model = model
        self.completion_id = completion_id
        self.created = created
        self.text: str | None = None
        self.annotations: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.citable = Citable()

    # Only the model's text and the handed-back calls reach a chat client.
    def started(self) -> None: ...
    def list_tools_started(self, server_label: str) -> None: ...
    def list_tools_done(self, handle: Any, server_label: str, tools: list[dict[str, Any]], error: str | None) -> None:
        ...
    def message_started(self) -> None: ...
    def text_delta(self, handle: Any, delta: str) -> None: ...
    def reasoning_started(self) -> None: ...
    def summary_part_started(self, handle: Any, summary_index: int) -> None: ...
    def summary_delta(self, handle: Any, summary_index: int, delta: str) -> None: ...
    def summary_part_done(self, handle: Any, summary_index: int, text: str) -> None: ...
    def reasoning_done(self, handle: Any, summary: tuple[str, ...]) -> None: ...
    def mcp_call_started(self, server_label: str, name: str, arguments: str, approval_request_id: str | None) -> None:
        ...
    def mcp_call_done(self, handle: Any, output: str | None, error: dict[str, Any] | None) -> None: ...

    def hosted_call_started(self, kind: HostedKind) -> None: ...

    def hosted_call_done(self, handle: Any, kind: HostedKind, outcome: HostedOutcome) -> None:
        self.citable.learn(kind == "web_search", outcome.results)

    def message_done(self, handle: Any, text: str, incomplete: bool) -> None:
        self.text, annotations = annotate(text, self.citable)
        self.annotations = [{"type": "url_citation", "url_citation": {key: a[key] for key in _URL_CITATION_KEYS}}
                            for a in annotations if a["type"] == "url_citation"]

    def function_call(self, call_id: str, name: str, arguments: str) -> None:
        self.tool_calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})

    def approval_request(self, server_label: str, name: str, arguments: str) -> str:
        raise AssertionError("the chat surface binds no server that needs approval")

    def finished(self, outcome: Outcome, usage: dict[str, Any] | None) -> LoopResult:
        match outcome:
            case Failed(error=error):
                return LoopResult(error.body(), error)
            case Completed(incomplete_reason=None):
                finish_reason = "tool_calls" if self.tool_calls else "stop"
            case Completed() | Exhausted():
                finish_reason = "length"
        message: dict[str, Any] = {"role": "assistant", "content": self.text, "refusal": None,
                                   "annotations": self.annotations}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return LoopResult({
            "id": self.completion_id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": _usage(usage), "service_tier": "default", "system_fingerprint": None,
        })


def pieces(text: str, limit: int = CHUNK_BYTES) -> Iterator[str]:
    """The text in pieces of at most `limit` UTF-8 bytes, never splitting a character."""
    piece, size = "", 0
    for char in text:
        width = len(char.encode())
        if size + width > limit and piece:
            yield piece
            piece, size = "", 0
        piece += char
        size += width
    if piece:
        yield piece


def final_only_chunks(completion: dict[str, Any], include_usage: bool) -> Iterator[bytes]:
    """A finished completion as an OpenAI chunk stream, ending with `data: [DONE]`."""
    base = {key: completion[key] for key in ("id", "created", "model", "service_tier", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk = base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
        return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()

    yield frame({"role": "assistant", "content": "", "refusal": None})
    for piece in pieces(message.get("content") or ""):
        yield frame({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield frame({"tool_calls": [{"index": index, **call}]})
    yield frame({}, choice["finish_reason"])
    if include_usage:
        usage_chunk = base | {"choices": [], "usage": completion["usage"]}
        yield f"data: {json.dumps(usage_chunk, separators=(',', ':'))}\n\n".encode()
    yield b"data: [DONE]\n\n"
