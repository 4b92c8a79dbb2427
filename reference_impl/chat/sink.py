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
from typing import Any, assert_never

from ..citations import Citable, annotate
from ..loop.actions import Completed, Ending, Exhausted, Failed
from ..loop.events import ApprovalRequested, FunctionCallHandedBack, HostedCallDone, LoopEvent, MessageDone
from ..loop.sink import LoopResult, NoOpSink

CHUNK_BYTES = 64
_URL_CITATION_KEYS = ("end_index", "start_index", "title", "url")


def _usage(usage: dict[str, Any] | None) -> dict[str, int]:
    prompt = (usage or {}).get("input_tokens", 0)
    completion = (usage or {}).get("output_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ChatSink(NoOpSink):
    def __init__(self, model: str, completion_id: str, created: int) -> None:
        self.model = model
        self.completion_id = completion_id
        self.created = created
        self.text: str | None = None
        self.annotations: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.citable = Citable()

    def emit(self, event: LoopEvent) -> None:
        """Only the model's last text (citing what this completion's searches found) and the
        handed-back calls reach a chat client; everything else shows nothing."""
        match event:
            case HostedCallDone(kind=kind, outcome=outcome):
                self.citable.learn(kind == "web_search", outcome.results)
            case MessageDone(text=text):
                self.text, annotations = annotate(text, self.citable)
                self.annotations = [{"type": "url_citation",
                                     "url_citation": {key: a[key] for key in _URL_CITATION_KEYS}}
                                    for a in annotations if a["type"] == "url_citation"]
            case FunctionCallHandedBack(call_id=call_id, name=name, arguments=arguments):
                self.tool_calls.append({"id": call_id, "type": "function",
                                        "function": {"name": name, "arguments": arguments}})
            case ApprovalRequested():
                raise AssertionError("the chat surface binds no server that needs approval")
            case _:
                super().emit(event)

    def result(self, ending: Ending, usage: dict[str, Any] | None) -> LoopResult:
        """The completion, its finish_reason the ending's; a failed run is its error's body."""
        match ending:
            case Failed(error=error):
                return LoopResult(error.body(), error)
            case Completed(incomplete_reason=None):
                finish_reason = "tool_calls" if self.tool_calls else "stop"
            case Completed() | Exhausted():
                finish_reason = "length"
            case _:
                assert_never(ending)
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
