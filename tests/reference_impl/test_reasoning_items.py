"""Reasoning items' `encrypted_content` in the reference gateway, driven with the official
`openai` SDK: present only when `include` asks, opened when a stateless request sends it back,
and never taken for a token of another kind (a compaction item's) or from another gateway.
The scenario `reasoning-encrypted-content` holds the same behaviour against OpenAI's recordings."""

from __future__ import annotations

from typing import Any

import pytest
from openai import BadRequestError, OpenAI
from scripted_runs import scripted

from responses_parity.fixtures.upstream.script import run_marker
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl.errors import InvalidRequest
from responses_parity.reference_impl.sealing import Sealer, new_key

REASONED = {"reasoning": "91 is 7 times 13.", "text": "No."}


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="k", max_retries=0)


def _reasoning_item(client: OpenAI, stack: Stack, **extra: Any) -> dict[str, Any]:
    run = scripted(stack, [REASONED])
    response = client.responses.create(model="parity-model", input=f"Is 91 prime? {run_marker(run, 0)}",
                                       store=False, reasoning={"summary": "auto"}, **extra)
    return next(item.model_dump(exclude_none=True) for item in response.output if item.type == "reasoning")


def _refusal(client: OpenAI, input_items: list[dict[str, Any]]) -> dict[str, Any]:
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="parity-model", store=False, input=input_items)
    assert isinstance(refused.value.body, dict)
    return refused.value.body


def test_encrypted_content_only_when_include_asks(stack: Stack, client: OpenAI) -> None:
    assert "encrypted_content" not in _reasoning_item(client, stack)
    assert _reasoning_item(client, stack, include=["reasoning.encrypted_content"])["encrypted_content"].startswith(
        "gAAAAA")


def test_a_reasoning_token_is_not_a_compaction_item(stack: Stack, client: OpenAI) -> None:
    token = _reasoning_item(client, stack, include=["reasoning.encrypted_content"])["encrypted_content"]
    error = _refusal(client, [{"type": "compaction", "encrypted_content": token},
                              {"role": "user", "content": "Go on."}])
    assert (error["code"], error["param"]) == ("invalid_encrypted_content", None)


def test_a_compaction_token_is_not_reasoning(stack: Stack, client: OpenAI) -> None:
    run = scripted(stack, [{"text": "Summary."}])
    compaction = client.responses.compact(model="parity-model", input=f"Hi {run_marker(run, 0)}").output[-1]
    error = _refusal(client, [{"role": "user", "content": "Hi"},
                              {"type": "reasoning", "summary": [], "encrypted_content": compaction.encrypted_content},
                              {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Go on."}])
    assert (error["code"], error["param"]) == ("invalid_encrypted_content", None)


def test_a_token_opens_only_with_the_key_and_kind_it_was_sealed_with() -> None:
    sealer = Sealer(new_key())
    token = sealer.seal("reasoning", {"summary": ["Because."], "model": None})
    assert sealer.open(token, "reasoning") == {"summary": ["Because."], "model": None}
    for opened_by, kind in ((sealer, "compaction"), (Sealer(new_key()), "reasoning")):
        with pytest.raises(InvalidRequest, match="could not be verified"):
            opened_by.open(token, kind)
