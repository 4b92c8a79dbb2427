"""Identifiers in OpenAI's style: a type prefix and 48 hex digits (`resp_`, `msg_`, `mcp_` ...)."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"
