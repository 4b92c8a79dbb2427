"""Identifiers in OpenAI's style: a type prefix and 48 hex digits (`resp_`, `msg_`, `mcp_` ...),
and files' own shape."""

from __future__ import annotations

import secrets
import string


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


_BASE62 = string.digits + string.ascii_letters


def new_file_id() -> str:
    """A file id as OpenAI writes them: `file-` and 22 letters and digits."""
    return "file-" + "".join(secrets.choice(_BASE62) for _ in range(22))
