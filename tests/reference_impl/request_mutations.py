"""Requests as a hostile client writes them, for property tests, on every endpoint family: bodies
OpenAI accepts (seeds, per JSON body), each changed in one to three places (a value replaced by
any JSON value, a key dropped, an unknown key added); query strings of any values; upload forms
of any parts. And the gateway they go to, which can reach nothing but the scripted model and
the search fixture, and runs chat completions through its loop (so they are checked).

The judge, `verdict`: no 5xx; every 4xx is OpenAI's error envelope; a 2xx only for a request
OpenAI's description accepts (`harness.probe.verdict`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx2
from hypothesis import strategies as st

from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.probe.forms import FILE, PURPOSE, Part
from responses_parity.harness.probe.run import PROBED_GATEWAY
from responses_parity.harness.probe.send import Outcome, outcome
from responses_parity.harness.probe.surfaces import BodySurface, QueryParameter, body_surfaces, placeholder
from responses_parity.harness.probe.verdict import judged
from responses_parity.harness.wire.decode import read_body
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.reference_impl import build_gateway_app
from responses_parity.openai_contract.request_schema import sdk_literal
from responses_parity.reference_impl.files import EXPIRY_RANGE_S, FORM_FIELDS

MCP = {"type": "mcp", "server_label": "calc", "server_url": "https://mcp.example.org/mcp", "require_approval": "never"}
FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object"}}
MESSAGE = {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
CHUNKING = {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50}}
ATTACHABLE = placeholder("attachable_file_id")
SEEDS: dict[str, list[dict[str, Any]]] = {
    "responses": [
        {"model": "m", "input": "Hi"},
        {"model": "m", "input": [MESSAGE], "instructions": "Be brief.", "temperature": 0.5, "max_output_tokens": 64,
         "metadata": {"k": "v"}, "safety_identifier": "user-1"},
        {"model": "m", "input": "Hi", "tools": [MCP, FUNCTION], "tool_choice": "auto", "max_tool_calls": 2,
         "parallel_tool_calls": False},
        {"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                                 {"type": "function_call_output", "call_id": "c", "output": "4"}], "store": False},
        {"model": "m", "input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "strict": True,
                                                          "schema": {"type": "object", "properties": {}}}},
         "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"], "truncation": "auto",
         "context_management": [{"type": "compaction", "compact_threshold": 1000}]},
        {"model": "m", "input": [MESSAGE, {"type": "file_search_call", "id": "fs_1", "status": "completed",
                                           "queries": ["q"], "results": [{"text": "t", "score": 0.5}]}]},
    ],
    "chat": [
        {"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
        {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [
            {"type": "text", "text": "Hi"}]}], "temperature": 0.5, "top_p": 0.9, "seed": 7, "stop": ["x"],
         "max_completion_tokens": 64, "metadata": {"k": "v"}},
        {"model": "m", "messages": [{"role": "user", "content": "Hi"}],
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
         "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": False},
    ],
    "conversations": [{"items": [MESSAGE], "metadata": {"k": "v"}}],
    "conversations.update": [{"metadata": {"k": "v", "other": "w"}}],
    "conversations.items.create": [{"items": [MESSAGE, {"type": "function_call", "call_id": "c", "name": "f",
                                                        "arguments": "{}"}]}],
    "vector_stores": [{"name": "v", "metadata": {"k": "v"}, "file_ids": [ATTACHABLE], "chunking_strategy": CHUNKING,
                       "expires_after": {"anchor": "last_active_at", "days": 7}}],
    "vector_stores.update": [{"name": "v", "metadata": {"k": "v"}, "expires_after": {"anchor": "last_active_at",
                                                                                      "days": 30}}],
    "vector_stores.files.create": [{"file_id": ATTACHABLE, "attributes": {"parity": 2, "kind": "memo"},
                                    "chunking_strategy": CHUNKING}],
    "vector_stores.files.update": [{"attributes": {"parity": 3, "flag": True}}],
    "vector_stores.file_batches.create": [
        {"file_ids": [ATTACHABLE], "attributes": {"k": "v"}, "chunking_strategy": {"type": "auto"}},
        {"files": [{"file_id": ATTACHABLE, "attributes": {"k": 1}}]}],
    "vector_stores.search": [{"query": ["parity", "number"], "max_num_results": 5, "rewrite_query": False,
                              "ranking_options": {"ranker": "auto", "score_threshold": 0.1},
                              "filters": {"type": "and", "filters": [{"type": "gte", "key": "parity", "value": 1},
                                                                     {"type": "in", "key": "parity",
                                                                      "value": [1, "parity"]}]}}],
}
"""Bodies OpenAI accepts, per JSON body (`surfaces.body_surfaces`), placeholders for the
objects they name."""
FAMILIES = {family: [s for s in body_surfaces() if s.family == family and s.name in SEEDS]
            for family in dict.fromkeys(s.family for s in body_surfaces())}
for _surface in body_surfaces():  # a seed OpenAI would refuse would make every verdict on its mutants meaningless
    assert all(not _surface.refuses(seed) for seed in SEEDS[_surface.name]), _surface.name

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(
    max_size=12)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=3), max_leaves=8)
QUERY_VALUES = st.one_of(st.text(max_size=12), st.integers(-5, 20_000).map(str), st.sampled_from(
    ["true", "false", "asc", "desc", "file_search_call.results", "completed", "9" * 400, ""]))


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
def mutated_bodies(draw: st.DrawFn, seeds: list[dict[str, Any]] = SEEDS["responses"]) -> dict[str, Any]:
    body = copy.deepcopy(draw(st.sampled_from(seeds)))
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


@st.composite
def surface_bodies(draw: st.DrawFn, family: str) -> tuple[BodySurface, dict[str, Any]]:
    """A body of one of the family's surfaces, mutated."""
    surface = draw(st.sampled_from(FAMILIES[family]))
    return surface, draw(mutated_bodies(SEEDS[surface.name]))


@st.composite
def queries(draw: st.DrawFn, parameters: tuple[QueryParameter, ...]) -> dict[str, str]:
    """Some of the parameters (and maybe one OpenAI does not describe), each with any value."""
    chosen = draw(st.lists(st.sampled_from(parameters), max_size=3, unique=True))
    query = {(f"{p.name}[]" if p.kind == "array" else p.name): draw(QUERY_VALUES) for p in chosen}
    if draw(st.booleans()):
        query[draw(st.text(min_size=1, max_size=8))] = draw(QUERY_VALUES)
    return query


def query_refused(parameters: tuple[QueryParameter, ...], query: dict[str, str]) -> bool:
    """Whether OpenAI's description refuses a query (a parameter it does not describe it ignores)."""
    described = {(f"{p.name}[]" if p.kind == "array" else p.name): p for p in parameters}
    return any(described[key].refuses(value) for key, value in query.items() if key in described)


PART_NAMES = (*FORM_FIELDS, "expires_after", "other")
PART_VALUES = st.one_of(st.sampled_from([b"assistants", b"batch", b"created_at", b"3600", b"2592000", b"9" * 300]),
                        st.binary(max_size=12))


@st.composite
def forms(draw: st.DrawFn) -> list[Part]:
    """A valid upload with its parts dropped, duplicated or replaced, and parts added."""
    parts = [FILE, PURPOSE, *draw(st.lists(st.tuples(st.sampled_from(PART_NAMES), PART_VALUES,
                                                     st.none() | st.just("x.txt")), max_size=4))]
    return [part for part in parts if draw(st.integers(0, 4)) > 0]  # each part dropped one time in five


def form_refused(parts: list[Part]) -> bool | None:
    """Whether OpenAI's description of an upload refuses these parts (a file part, a purpose it
    describes, no other field, `expires_after` with both its fields in range); None when it does
    not say (a part given twice, a field sent as a file)."""
    names = [name for name, _, _ in parts]
    if len(names) != len(set(names)) or any(filename is not None for name, _, filename in parts if name != "file"):
        return None
    fields = {name: content for name, content, _ in parts}
    if names.count("file") != 1 or next(part for part in parts if part[0] == "file")[2] is None:
        return True
    purpose = fields.get("purpose", b"").decode(errors="replace")
    if purpose not in sdk_literal("FilePurpose") or set(fields) - set(FORM_FIELDS):
        return True
    anchor, seconds = fields.get("expires_after[anchor]"), fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return False
    if anchor != b"created_at" or seconds is None or not (seconds.isascii() and seconds.isdigit()):
        return True
    low, high = EXPIRY_RANGE_S
    return len(seconds) > len(str(high)) or not low <= int(seconds) <= high


def probed_gateway(upstream_url: str, search_url: str | None) -> ServerThread:
    """A reference gateway whose loop can reach only the scripted model and the search fixture:
    every address is outside its outbound policy and its resolver knows no host; chat
    completions run through its loop (`harness.probe.run.PROBED_GATEWAY`)."""
    async def knows_no_host(host: str) -> list[str]:
        return []

    config = reference_config(upstream_url, search_url, outbound_allow=(), outbound_block=("0.0.0.0/0", "::/0"),
                              max_concurrent_runs=64, **PROBED_GATEWAY)
    return ServerThread(build_gateway_app(config, resolver=knows_no_host)).start()


def answered(answer: httpx2.Response) -> Outcome:
    """An HTTP answer at the error-contract level (`harness.probe.send.Outcome`)."""
    content_type = answer.headers.get("content-type")
    streamed = "text/event-stream" in (content_type or "")
    body, defects = (None, []) if streamed else read_body(answer.content, content_type)
    return outcome(Exchange(method=answer.request.method, url=str(answer.url), status=answer.status_code, body=body,
                            defects=defects, sse=answer.text if streamed else None))


def verdict(refused: bool | None, answer: httpx2.Response) -> str | None:
    """What is wrong with the gateway's answer to a request OpenAI's description refuses or not
    (None: it does not say), or None."""
    if (kind := judged(answered(answer), bool(refused))) is not None:
        return f"{kind}: {answer.status_code} {answer.text[:200]}"
    return None
