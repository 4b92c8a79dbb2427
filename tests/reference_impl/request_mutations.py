"""Requests as a hostile client writes them, for property tests: bodies OpenAI accepts (seeds),
each changed in one to three places (a value replaced by any JSON value, a key dropped, an
unknown key added), and the gateway they go to, which can reach nothing but the scripted model.

The judge, `verdict`: no 5xx; every 4xx is OpenAI's error envelope; a 2xx only for a body that
OpenAI's description of the request (`request_schema`, from the `openai` SDK) accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
from hypothesis import strategies as st

from responses_parity.harness.stack import ServerThread, reference_config
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.request_schema import responses_schema
from responses_parity.reference_impl.validation import validate_create

MCP = {"type": "mcp", "server_label": "calc", "server_url": "https://mcp.example.org/mcp", "require_approval": "never"}
SEEDS: list[dict[str, Any]] = [
    {"model": "m", "input": "Hi"},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
     "instructions": "Be brief.", "temperature": 0.5, "max_output_tokens": 64, "metadata": {"k": "v"}},
    {"model": "m", "input": "Hi", "tools": [MCP, {"type": "function", "name": "f", "parameters": {"type": "object"}}],
     "tool_choice": "auto", "max_tool_calls": 2, "parallel_tool_calls": False},
    {"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                             {"type": "function_call_output", "call_id": "c", "output": "4"}], "store": False},
    {"model": "m", "input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "strict": True,
                                                      "schema": {"type": "object", "properties": {}}}},
     "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"], "truncation": "auto"},
]
for seed in SEEDS:  # a seed OpenAI would refuse would make every verdict on its mutants meaningless
    validate_create(copy.deepcopy(seed))

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(
    max_size=12)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=3), max_leaves=8)


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside `value` (not `value` itself)."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield (*path, key)
        yield from _places(child, (*path, key))


def _parent(body: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        body = body[key]
    return body


@st.composite
def mutated_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_places(body))))
        parent, key = _parent(body, path), path[-1]
        change = draw(st.sampled_from(["replace", "drop", "add"]))
        if change == "replace":
            parent[key] = draw(JSON)
        elif change == "drop":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(JSON)
        else:
            parent.append(draw(JSON))
        if not body:
            break
    return body


def no_reach_gateway(upstream_url: str) -> ServerThread:
    """A reference gateway whose loop can reach only the scripted model: every address is
    outside its outbound policy, and its resolver knows no host."""
    async def knows_no_host(host: str) -> list[str]:
        return []

    config = reference_config(upstream_url, outbound_allow=(), outbound_block=("0.0.0.0/0", "::/0"),
                              max_concurrent_runs=64)
    return ServerThread(build_gateway_app(config, resolver=knows_no_host)).start()


def verdict(body: dict[str, Any], answer: httpx.Response) -> str | None:
    """What is wrong with the gateway's answer to `body`, or None."""
    if answer.status_code >= 500:
        return f"{answer.status_code}: {answer.text[:200]}"
    if answer.status_code >= 400:
        try:
            error = answer.json()["error"]
        except (ValueError, KeyError, TypeError):
            return f"{answer.status_code} without OpenAI's error envelope: {answer.text[:200]}"
        if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"} \
                or not isinstance(error["message"], str) or not isinstance(error["type"], str):
            return f"{answer.status_code} with a malformed error envelope: {error}"
        return None
    if (violation := responses_schema().first_violation(body)) is not None:
        return f"accepted ({answer.status_code}), although OpenAI refuses it: {violation.message}"
    return None
