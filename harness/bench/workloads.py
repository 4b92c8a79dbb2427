"""The four workloads, each measured against a target and against its floor (what the same work
costs without a gateway), in batches:

- `text` (W1): a non-streamed text response, one request at a time. Floor: the scripted
  upstream answering the same body.
- `stream` (W2): the same streamed: the first event and the whole stream. Floor: the upstream.
- `throughput` (W3): W1's request, `concurrency` at a time. Floor: the upstream.
- `mcp` (W4): one MCP tool round trip (`calc.add`, no approval) and a closing text. Floor: the
  client doing the same work itself on an MCP session it keeps open: `tools/list`, the model's
  call, `tools/call`, the model's closing turn.
- `socket` (W5): W2's response over WebSocket mode, one create at a time on a socket opened
  once per batch: the first frame and the whole response. Floor: the upstream's own socket.
- `chain_socket` and `chain_http` (W5): a `CHAIN_TURNS`-turn `previous_response_id` chain, a
  sample being the whole chain, on one socket and as streamed HTTP requests (measured in the
  same rounds, so the two compare). Floor: the upstream doing the same chain the same way.

A request counts when it is answered 2xx with what the workload asked for (a completed
response; for `mcp`, an `mcp_call` item; for `stream` and `socket`, a terminal event; for a
chain, every turn completed); anything else is an error, kept with what was wrong, and is not
a sample.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import websockets
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from ...fixtures.upstream.script import ModelTurn, RunScript, ToolCallSpec, run_marker
from ..engine.rewrites import Rewrites
from ..scenario.fixtures import McpFixture
from .client import Answer, Client, ClientError

Workload = Literal["text", "stream", "throughput", "mcp", "socket", "chain_socket", "chain_http"]
WORKLOADS: tuple[Workload, ...] = ("text", "stream", "throughput", "mcp", "socket", "chain_socket", "chain_http")
LABELS: dict[Workload, str] = {"text": "W1 text", "stream": "W2 stream", "throughput": "W3 throughput",
                               "mcp": "W4 MCP round trip", "socket": "W5 a response over an open socket",
                               "chain_socket": "W5 a 20-turn chain on one socket",
                               "chain_http": "W5 the same chain over HTTP (streamed)"}
SOCKET_WORKLOADS: frozenset[Workload] = frozenset({"socket", "chain_socket"})
"""The workloads in WebSocket mode (a target that lacks it cannot run them)."""
FIXTURE = "calc"
CHAIN_TURNS = 20
TEXT_SCRIPT = RunScript(steps=[[ModelTurn(text="Hello from the scripted model.")]])
MCP_SCRIPT = RunScript(steps=[[ModelTurn(call=ToolCallSpec(tool="add", arguments={"a": 2, "b": 3})),
                               ModelTurn(text="2 + 3 = 5.")]])
CHAIN_SCRIPT = RunScript(steps=[[ModelTurn(text=f"Turn {turn + 1} of the chain.") for turn in range(CHAIN_TURNS)]])


@dataclass(frozen=True)
class Endpoint:
    """Where a batch's requests go: a gateway under test, or the scripted upstream as the floor."""

    name: str
    client: Client = field(repr=False)
    responses_path: str = "/v1/responses"
    model: str = "parity-model"
    rewrites: Rewrites = field(default_factory=Rewrites)


@dataclass(frozen=True)
class Sizes:
    sequential: int = 40
    """Requests per batch of `text`, `stream`, `mcp` and `socket`."""
    throughput: int = 800
    """Requests per `throughput` batch."""
    concurrency: int = 16
    chains: int = 4
    """Chains per batch of `chain_socket` and `chain_http` (each `CHAIN_TURNS` requests)."""


@dataclass
class Batch:
    """What one batch measured: per counted request, seconds to the answer's end (`totals`) and,
    for streams, to the first event (`firsts`); the batch's wall time; the errors."""

    requests: int = 0
    totals: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def count(self, answer: Answer, problem: str | None) -> None:
        self.requests += 1
        if problem is not None:
            self.errors.append(problem)
            return
        self.totals.append(answer.total_s)
        if answer.first_event_s is not None:
            self.firsts.append(answer.first_event_s)

    def failed(self, why: str) -> None:
        self.requests += 1
        self.errors.append(why)


@dataclass(frozen=True)
class RunTokens:
    """The runs a round registered with the scripted upstream, and the MCP fixture's URL for it."""

    text: str
    mcp: str
    mcp_url: str
    chain: str


def text_body(endpoint: Endpoint, run: str, *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": endpoint.model, "input": f"Say hello. {run_marker(run, 0)}"}
    return body | ({"stream": True} if stream else {})


def chain_body(endpoint: Endpoint, run: str, previous: str | None, *, stream: bool) -> dict[str, Any]:
    """A turn of the chain: the first asks with the run's marker, each next one continues it."""
    body: dict[str, Any] = {"model": endpoint.model, "input": f"Count the turns. {run_marker(run, 0)}"} \
        if previous is None else {"model": endpoint.model, "previous_response_id": previous, "input": "Go on."}
    return body | ({"stream": True} if stream else {})


def mcp_body(endpoint: Endpoint, run: str, server_url: str) -> dict[str, Any]:
    return {"model": endpoint.model, "input": f"What is 2 + 3? Use the calculator. {run_marker(run, 0)}",
            "tools": [{"type": "mcp", "server_label": FIXTURE, "server_url": server_url,
                       "require_approval": "never"}]}


def _problem(answer: Answer, wants: Callable[[Answer], str | None]) -> str | None:
    if not 200 <= answer.status < 300:
        return f"HTTP {answer.status}: {answer.body[:200].decode(errors='replace')}"
    try:
        return wants(answer)
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested past what json reads
        return f"the answer is not what a client reads: {type(error).__name__}: {error}"


def _object(answer: Answer) -> dict[str, Any]:
    """The answer's JSON object; `ValueError` when it is not one."""
    data = answer.json()
    if not isinstance(data, dict):
        raise ValueError(f"it is JSON {type(data).__name__}, not an object")
    return data


def _output_types(data: dict[str, Any]) -> list[Any]:
    output = data.get("output")
    return [item.get("type") for item in output if isinstance(item, dict)] if isinstance(output, list) else []


def _completed(answer: Answer) -> str | None:
    status = _object(answer).get("status")
    return None if status == "completed" else f"the response is {status!r}, not completed"


def _terminal_event(answer: Answer) -> str | None:
    return None if b"response.completed" in answer.body else "the stream has no response.completed event"


def _response_id(answer: Answer) -> str:
    """The id of a streamed or socket answer's response (its first event with one); `ValueError`
    when it has none."""
    for line in answer.body.splitlines():
        text = line.removeprefix(b"data: ")
        if text.startswith(b"{"):
            response = json.loads(text).get("response")
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                return response["id"]
    raise ValueError("no event carries the response's id")


def _ran_mcp(answer: Answer) -> str | None:
    if problem := _completed(answer):
        return problem
    types = _output_types(_object(answer))
    return None if "mcp_call" in types else f"no mcp_call among the output items {types}"


async def _timed(batch: Batch, send: Callable[[], Awaitable[Answer]], wants: Callable[[Answer], str | None]) -> None:
    try:
        answer = await send()
    except ClientError as error:
        batch.failed(str(error))
        return
    batch.count(answer, _problem(answer, wants))


async def _sequential(count: int, one: Callable[[Batch], Awaitable[None]]) -> Batch:
    batch = Batch()
    started = time.perf_counter()
    for _ in range(count):
        await one(batch)
    batch.wall_s = time.perf_counter() - started
    return batch


async def gateway_batch(workload: Workload, endpoint: Endpoint, runs: RunTokens, sizes: Sizes,
                        fixtures: Mapping[str, McpFixture] | None = None) -> Batch:
    """One batch of `workload` against a gateway (or the upstream itself, the floor of every
    workload but `mcp`)."""
    client, path = endpoint.client, endpoint.responses_path

    def rewritten(body: dict[str, Any]) -> dict[str, Any]:
        return endpoint.rewrites.apply(body, fixtures or {})

    def send(body: dict[str, Any]) -> Callable[[], Awaitable[Answer]]:
        request = rewritten(body)
        return lambda: client.request("POST", path, request)

    if workload == "text":
        request = send(text_body(endpoint, runs.text))
        return await _sequential(sizes.sequential, lambda batch: _timed(batch, request, _completed))
    if workload == "stream":
        request = send(text_body(endpoint, runs.text, stream=True))
        return await _sequential(sizes.sequential, lambda batch: _timed(batch, request, _terminal_event))
    if workload == "mcp":
        request = send(mcp_body(endpoint, runs.mcp, runs.mcp_url))
        return await _sequential(sizes.sequential, lambda batch: _timed(batch, request, _ran_mcp))
    if workload == "chain_http":
        return await _sequential(sizes.chains, lambda batch: _chain(batch, endpoint, runs.chain, rewritten, None))
    if workload in SOCKET_WORKLOADS:
        return await _over_a_socket(workload, endpoint, runs, sizes, rewritten)
    request = send(text_body(endpoint, runs.text))
    return await _concurrent(sizes, lambda batch: _timed(batch, request, _completed))


async def _over_a_socket(workload: Workload, endpoint: Endpoint, runs: RunTokens, sizes: Sizes,
                         rewritten: Callable[[dict[str, Any]], dict[str, Any]]) -> Batch:
    """A `socket` or `chain_socket` batch on one socket opened for it (the opening not timed)."""
    try:
        async with endpoint.client.socket(endpoint.responses_path) as socket:
            if workload == "chain_socket":
                return await _sequential(sizes.chains,
                                         lambda batch: _chain(batch, endpoint, runs.chain, rewritten, socket))
            body = rewritten(text_body(endpoint, runs.text))
            return await _sequential(sizes.sequential, lambda batch: _timed(
                batch, lambda: endpoint.client.create(socket, body), _terminal_event))
    except (OSError, TimeoutError, websockets.WebSocketException) as refused:
        batch = Batch()
        batch.failed(f"no WebSocket: {type(refused).__name__}: {refused}")
        return batch


async def _chain(batch: Batch, endpoint: Endpoint, run: str, rewritten: Callable[[dict[str, Any]], dict[str, Any]],
                 socket: Any) -> None:
    """One `CHAIN_TURNS`-turn chain, a sample of its whole time: on `socket`, or streamed over
    HTTP when None."""
    started, previous = time.perf_counter(), None
    for turn in range(CHAIN_TURNS):
        body = rewritten(chain_body(endpoint, run, previous, stream=socket is None))
        try:
            if socket is not None:
                answer = await endpoint.client.create(socket, body)
            else:
                answer = await endpoint.client.request("POST", endpoint.responses_path, body)
            problem = _problem(answer, _terminal_event)
            previous = _response_id(answer) if problem is None else None
        except (ClientError, ValueError, RecursionError) as error:  # RecursionError: JSON nested past what json reads
            problem = str(error) or type(error).__name__
        if problem is not None:
            batch.failed(f"turn {turn + 1} of the chain: {problem}")
            return
    batch.count(Answer(200, b"", None, time.perf_counter() - started), None)


async def _concurrent(sizes: Sizes, one: Callable[[Batch], Awaitable[None]]) -> Batch:
    batch = Batch()
    remaining = iter(range(sizes.throughput))

    async def worker() -> None:
        for _ in remaining:
            await one(batch)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(sizes.concurrency):
            group.create_task(worker())
    batch.wall_s = time.perf_counter() - started
    return batch


async def client_driven_mcp_batch(upstream: Endpoint, runs: RunTokens, sizes: Sizes) -> Batch:
    """W4's floor: the client does what the gateway must, over one MCP session kept open for the
    batch: `tools/list` (OpenAI lists a request's MCP tools for every response), the model's turn
    with the listed tools, `tools/call`, the model's closing turn with the call's output."""
    question = f"What is 2 + 3? Use the calculator. {run_marker(runs.mcp, 0)}"
    async with McpClient(streamable_http_client(runs.mcp_url)) as mcp:

        async def one(batch: Batch) -> None:
            started = time.perf_counter()
            try:
                tools = [{"type": "function", "name": tool.name, "description": tool.description,
                          "parameters": tool.input_schema} for tool in (await mcp.list_tools()).tools]
                first = {"model": upstream.model, "input": question, "tools": tools}
                call_answer = await upstream.client.request("POST", upstream.responses_path, first)
                output = _object(call_answer).get("output")
                calls = [item for item in output if isinstance(item, dict) and item.get("type") == "function_call"] \
                    if isinstance(output, list) else []
                if call_answer.status != 200 or not calls:
                    batch.failed(f"the model did not call the tool (HTTP {call_answer.status})")
                    return
                result = await mcp.call_tool("add", {"a": 2, "b": 3})
                output = {"type": "function_call_output", "call_id": calls[0]["call_id"],
                          "output": "".join(getattr(block, "text", "") for block in result.content)}
                closing = first | {"input": [{"role": "user", "content": question}, calls[0], output]}
                answer = await upstream.client.request("POST", upstream.responses_path, closing)
            except (ClientError, ValueError) as error:
                batch.failed(str(error))
                return
            batch.count(Answer(answer.status, answer.body, None, time.perf_counter() - started),
                        _problem(answer, _completed))

        return await _sequential(sizes.sequential, one)


def scripts(runs: RunTokens) -> dict[str, RunScript]:
    """What the scripted upstream must know for a round: run token -> script."""
    return {runs.text: TEXT_SCRIPT, runs.mcp: MCP_SCRIPT, runs.chain: CHAIN_SCRIPT}
