"""The JSON the gateway writes, compact and never with NaN or Infinity (not JSON), and how it
reads JSON it did not write but will write again.

- `compact_json`: what it sends the model, its text as it is (as httpx's `json=` sends it);
- `escaped_json`: the responses it stores and every JSON answer (`JsonAnswer`, `JsonText`),
  every character outside ASCII escaped (as its streams' events are), so any text survives,
  even half a surrogate pair a model's output may hold (no UTF-8 can: unescaped, it could be
  neither stored nor answered). A response is encoded once, for the store and for its JSON
  answer.
- `rewritable_json`: the model's answers and a function call's arguments, read without the NaN
  or Infinity Python's parser accepts and neither encoder above can write.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse, Response

from ..openai_contract.strict_json import DECODER

compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
escaped_json = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def rewritable_json(text: bytes | str) -> Any:
    """`text` (UTF-8 when bytes) as JSON the gateway can write again: no NaN or Infinity
    (`strict_json.DECODER`; strings as they are, half a surrogate pair included). A `ValueError`
    for anything else that is not JSON, nesting too deep for the parser included."""
    try:
        return DECODER.decode(text if isinstance(text, str) else text.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None


class JsonAnswer(JSONResponse):
    """Starlette's JSON answer, written as `escaped_json` writes (Starlette's writes UTF-8, and
    fails on text no UTF-8 can hold)."""

    def render(self, content: Any) -> bytes:
        return escaped_json(content).encode()


class JsonText(Response):
    """A JSON answer of text already encoded (where Starlette's `JSONResponse` encodes a value)."""

    media_type = "application/json"
