"""A reasoning item's `encrypted_content`: what a client keeps so that a stateless request
(`store: false`) can give the model its reasoning back.

OpenAI adds it only when `include` asks for `reasoning.encrypted_content` (recorded: the key is
absent otherwise). The reference seals the summary with the upstream model's own token, if its
model gave one (`sealing.py`); sent back as input, the item is read from its token, so a
client cannot put words in the model's reasoning.
"""

from __future__ import annotations

from typing import Any

from .sealing import Sealer
from .upstream.items import Reasoning

INCLUDE_ENCRYPTED_REASONING = "reasoning.encrypted_content"


def sealed_reasoning(sealer: Sealer, reasoning: Reasoning) -> str:
    return sealer.seal("reasoning", {"summary": list(reasoning.summary), "model": reasoning.encrypted_content})


def replayed_reasoning(item: dict[str, Any], sealer: Sealer) -> Reasoning:
    """A reasoning input item as the transcript holds it: from its token when it has one (OpenAI's
    400 when the token is not this gateway's), else from its summary."""
    if item.get("encrypted_content") is None:
        summary = tuple(part.get("text", "") for part in item.get("summary") or [])
        return Reasoning(item["id"], summary, None)
    sealed = sealer.open(item["encrypted_content"], "reasoning")
    model_token = sealed.get("model") if isinstance(sealed, dict) else None
    summary = sealed.get("summary") if isinstance(sealed, dict) else None
    return Reasoning(item["id"], tuple(map(str, summary or ())), model_token if isinstance(model_token, str) else None)
