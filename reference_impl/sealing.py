"""Opaque tokens only this gateway reads back: the `encrypted_content` of compaction and
reasoning items.

A token is Fernet (AES-128-CBC and HMAC-SHA256, starting `gAAAAA` as OpenAI's do) over
`{"kind": ..., "content": ...}`, sealed with a key the store keeps, so a token outlives a
restart. A token changed anywhere, sealed by another gateway, or of another kind (a reasoning
token offered as a compaction item) is refused with OpenAI's 400, `invalid_encrypted_content`
("The encrypted content gAAA...xxxx could not be verified.", as api.openai.com words it:
openai/codex#8145).
"""

from __future__ import annotations

import json

from dataclasses import dataclass
from typing import Any, Literal

from cryptography.fernet import Fernet, InvalidToken

from .errors import InvalidRequest

KEY_NAME = "compaction"
"""The name the store keeps the key under (compaction items were the first tokens)."""

Kind = Literal["compaction", "reasoning"]


def new_key() -> str:
    return Fernet.generate_key().decode()


def _abbreviated(token: str) -> str:
    return f"{token[:4]}...{token[-4:]}" if len(token) > 8 else token


@dataclass(frozen=True)
class Sealer:
    key: str

    def seal(self, kind: Kind, content: Any) -> str:
        """`content` (JSON) as a token of `kind`."""
        plain = json.dumps({"kind": kind, "content": content}, separators=(",", ":"))
        return Fernet(self.key.encode()).encrypt(plain.encode()).decode()

    def open(self, token: Any, kind: Kind) -> Any:
        """What a token of `kind` holds; OpenAI's 400 for anything this gateway did not seal as it is."""
        try:
            sealed = json.loads(Fernet(self.key.encode()).decrypt(str(token).encode()))
        except (InvalidToken, UnicodeError, ValueError) as problem:
            raise _unverified(token) from problem
        if not isinstance(sealed, dict) or sealed.get("kind") != kind:
            raise _unverified(token)
        return sealed.get("content")


def _unverified(token: Any) -> InvalidRequest:
    return InvalidRequest(f"The encrypted content {_abbreviated(str(token))} could not be verified.",
                          param=None, code="invalid_encrypted_content")
