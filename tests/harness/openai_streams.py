"""Event streams shaped like real OpenAI ones (facts from the recordings the scenarios cite),
built by hand for grammar tests."""

from __future__ import annotations

import json
from typing import Any


def response(status: str, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "output": output or [],
            "usage": None if status == "in_progress" else {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}


def message_item(text: str, status: str = "completed") -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]}


def text_events(pieces: list[str], numbered: bool = True, obfuscation: bool = True) -> list[dict[str, Any]]:
    text = "".join(pieces)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    events = [
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.in_progress", "response": response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0,
         "item": message_item("", "in_progress") | {"content": []}},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "part": part},
    ]
    for piece in pieces:
        delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                 "delta": piece, "logprobs": []}
        events.append(delta | ({"obfuscation": "xYz12"} if obfuscation else {}))
    events += [
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "text": text, "logprobs": []},
        {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "part": part | {"text": text}},
        {"type": "response.output_item.done", "output_index": 0, "item": message_item(text)},
        {"type": "response.completed", "response": response("completed", [message_item(text)])},
    ]
    return numbered_events(events) if numbered else events


def numbered_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": e["type"], "sequence_number": i,
             **{k: v for k, v in e.items() if k not in ("type", "sequence_number")}}
            for i, e in enumerate(events)]


def sse_text(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e.get('type', 'unknown')}\ndata: {json.dumps(e)}\n\n" for e in events)


def one_item_events(added: dict[str, Any], middle: list[dict[str, Any]], done: dict[str, Any]) -> list[dict[str, Any]]:
    """A numbered stream of one output item: created, in_progress, its output_item.added, the
    `middle` events, its output_item.done, then response.completed listing it."""
    return numbered_events([
        {"type": "response.created", "response": response("in_progress")},
        {"type": "response.in_progress", "response": response("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        *middle,
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": response("completed", [done])},
    ])
