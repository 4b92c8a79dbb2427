"""Remove secrets before anything is written: reports, saved exchanges, goldens.

Removed: values under secret-bearing keys at any depth (`authorization`, `api_key`, ...,
which covers MCP tools' `authorization` and request headers), and anything that looks like
an API key, a bearer token, or an OpenAI organization or project id wherever it appears.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
SECRET_KEYS = frozenset({"authorization", "api_key", "api-key", "x-api-key", "openai-organization",
                         "openai-project", "proxy-authorization", "cookie", "set-cookie"})
_SECRET_TEXT = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-~+/=]{8,}|\borg-[A-Za-z0-9]{8,}|\bproj_[A-Za-z0-9]{8,})"
)


def redact_text(text: str) -> str:
    return _SECRET_TEXT.sub(REDACTED, text)


def redact(value: Any) -> Any:
    """A copy of `value` with every secret replaced by `<redacted>`."""
    if isinstance(value, dict):
        return {key: (REDACTED if isinstance(key, str) and key.lower() in SECRET_KEYS and item is not None
                      else redact(item)) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
