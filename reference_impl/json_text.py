"""The JSON the gateway writes: compact, its text as it is (no `\\u` escapes), and no NaN or
Infinity (not JSON). The bodies it sends the model, the responses it stores and answers: a
response is encoded once, for the store and for its JSON answer."""

from __future__ import annotations

import json

from starlette.responses import Response

compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class JsonText(Response):
    """A JSON answer from text already encoded (what Starlette's `JSONResponse` would send)."""

    media_type = "application/json"
