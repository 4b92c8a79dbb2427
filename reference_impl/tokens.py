"""Counting the tokens of what a model would read, with OpenAI's o200k_base tokenizer (tiktoken),
for `POST /v1/responses/input_tokens` and the `compact_threshold` of `context_management`.

The vocabulary ships in this package (`vocabulary/`, named as tiktoken's cache names the file
it fetches: the SHA-1 of its URL), so nothing is downloaded at run time: tiktoken reads it as
its cache and checks it against the SHA-256 it pins. No well-kept package on PyPI ships it.

The count follows what OpenAI's recorded counts show (gpt-4.1-mini, `nonstream-input-tokens`):
5 for the request, 3 for each item the model reads (the instructions are one) and its text's
tokens; function tools as the model is shown them (a TypeScript-like namespace of their
signatures). Images and files count nothing here (the reference does not read them).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import tiktoken

from .upstream.items import Message, Reasoning, ToolCall, ToolOutput, ToolSpec, TranscriptItem

ENCODING = "o200k_base"
VOCABULARY = Path(__file__).with_name("vocabulary")
PER_REQUEST = 5
PER_ITEM = 3
_LOADING = threading.Lock()


@cache
def encoding() -> tiktoken.Encoding:
    """o200k_base, from the vocabulary this package ships (tiktoken's cache directory is pointed
    at it while it loads; it is restored after)."""
    with _LOADING:
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(VOCABULARY)
        try:
            return tiktoken.get_encoding(ENCODING)
        finally:
            if before is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


def text_tokens(text: str) -> int:
    """The tokens of `text` (special tokens in it are counted as text)."""
    return len(encoding().encode(text, disallowed_special=()))


def _text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))


def item_text(item: TranscriptItem) -> str:
    """What the model reads of one transcript item."""
    match item:
        case Message(content=content):
            return _text(content)
        case ToolCall(name=name, arguments=arguments):
            return f"{name}{arguments}"
        case ToolOutput(output=output):
            return _text(output)
        case Reasoning(summary=summary):
            return "".join(summary)


def _type_name(schema: Any) -> str:
    kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
    return " | ".join(map(str, kind)) if isinstance(kind, list) else str(kind)


def _tool_signature(tool: ToolSpec) -> str:
    properties = (tool.parameters or {}).get("properties") or {}
    fields = "".join(f"{name}: {_type_name(schema)},\n" for name, schema in properties.items())
    description = f"// {tool.description}\n" if tool.description else ""
    return f"{description}type {tool.name} = (_: {{\n{fields}}}) => any;\n\n"


def tools_text(tools: Sequence[ToolSpec]) -> str:
    """Function tools as the model is shown them."""
    if not tools:
        return ""
    return ("# Tools\n\n## functions\n\nnamespace functions {\n\n" + "".join(map(_tool_signature, tools))
            + "} // namespace functions\n")


def count(instructions: str | None, transcript: Iterable[TranscriptItem], tools: Sequence[ToolSpec] = ()) -> int:
    """The tokens a model reads of a request: its instructions, its transcript, its tools."""
    texts = ([instructions] if instructions else []) + [item_text(item) for item in transcript]
    tool_tokens = text_tokens(tools_text(tools)) if tools else 0
    return PER_REQUEST + sum(PER_ITEM + text_tokens(text) for text in texts) + tool_tokens
