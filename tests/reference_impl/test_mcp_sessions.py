"""MCP sessions are opened once per server and credentials and reused: across listings, calls and
requests; never shared between different authorization values; reopened when the server lost
them; bounded in number and idle time; all closed at shutdown. Handshakes are counted on real
fixture servers (`server/discover` or `initialize`, whichever era the server speaks)."""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx2
import pytest
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.fixtures.mcp.calc import build_calc_server
from responses_parity.fixtures.recording import fingerprint
from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.mcp_servers import McpConnector, McpServer
from responses_parity.reference_impl.mcp_sessions import SessionPool, session_key
from responses_parity.reference_impl.runtime import Runtime

HANDSHAKES = ("server/discover", "initialize")
DEADLINE_S = 20.0


class MethodCounter:
    """An MCP server app with a count of the JSON-RPC methods it receives and of the SSE event
    streams opened; the `refused` methods are answered "method not found" (`server/discover`: a
    server of the handshake era)."""

    def __init__(self, app: ASGIApp, refused: tuple[str, ...] = ()) -> None:
        self._app = app
        self._refused = refused
        self.methods: collections.Counter[str] = collections.Counter()
        self.event_streams = 0

    @property
    def handshakes(self) -> int:
        return sum(self.methods[method] for method in HANDSHAKES)

    @property
    def sessions(self) -> int:
        """Sessions opened: by `initialize` (handshake era) or by an SSE event stream."""
        return self.methods["initialize"] + self.event_streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"].endswith("/sse"):
            self.event_streams += 1
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        messages: list[Message] = []
        while not messages or messages[-1].get("more_body"):
            messages.append(await receive())
        body = json.loads(b"".join(message.get("body", b"") for message in messages) or b"{}")
        for message in body if isinstance(body, list) else [body]:
            self.methods[message.get("method")] += 1
            if message.get("method") in self._refused:
                error = {"code": -32601, "message": "Method not found"}
                await JSONResponse({"jsonrpc": "2.0", "id": message.get("id"), "error": error})(scope, receive, send)
                return
        replay = iter(messages)

        async def replaying() -> Message:
            return next(replay, None) or await receive()

        await self._app(scope, replaying, send)


@pytest.fixture
def calc() -> Iterator[tuple[MethodCounter, str]]:
    """The `calc` fixture, counted, and its base URL."""
    counter = MethodCounter(FIXTURE_SERVERS["calc"]())
    server = ServerThread(counter).start()
    yield counter, server.url
    server.stop()


def handshake_era_calc(port: int = 0) -> tuple[MethodCounter, ServerThread]:
    """`calc` as a server of the handshake era: `initialize` opens a session the server keeps (a
    restart forgets it), over streamable HTTP at `/mcp`."""
    app = build_calc_server().streamable_http_app(streamable_http_path="/mcp", stateless_http=False)
    counter = MethodCounter(app, refused=("server/discover",))
    return counter, ServerThread(counter, port).start()


def sse_calc(port: int = 0) -> tuple[MethodCounter, ServerThread]:
    """The `calc` fixture, whose SSE sessions live as long as their event stream, at `/sse`."""
    counter = MethodCounter(FIXTURE_SERVERS["calc"]())
    return counter, ServerThread(counter, port).start()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition` with a deadline."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {DEADLINE_S}s: {what}")
        await asyncio.sleep(0.01)


def add(connector: McpConnector, server: McpServer) -> Awaitable[Any]:
    return connector.call_tool(server, "add", {"a": 2, "b": 3})


def test_one_session_serves_two_requests_through_the_gateway(stack: Stack, calc: tuple[MethodCounter, str]) -> None:
    counter, base = calc
    gateway = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"call": {"tool": "add", "arguments": {"a": 1, "b": 2}}},
                                                  {"text": "3"}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    body = {"model": "m", "input": f"1+2 {run_marker(run, 0)}",
            "tools": [{"type": "mcp", "server_label": "calc", "server_url": f"{base}/r/{run}/mcp",
                       "require_approval": "never"}]}
    try:
        answers = [httpx2.post(f"{gateway.url}/v1/responses", json=body, timeout=30) for _ in range(2)]
    finally:
        gateway.stop()
    assert [[item["type"] for item in answer.json()["output"]] for answer in answers] == \
        [["mcp_list_tools", "mcp_call", "message"]] * 2
    assert counter.methods["tools/call"] == 2
    assert counter.handshakes == 1  # one per listing and per call before sessions were kept


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_concurrent_first_uses_open_one_session_and_a_tool_error_keeps_it(
        calc: tuple[MethodCounter, str], transport: str) -> None:
    counter, base = calc
    server = McpServer("calc", f"{base}/r/concurrent/{'sse' if transport == 'sse' else 'mcp'}", transport)  # type: ignore[arg-type]
    async with McpConnector(10) as connector:
        results = await asyncio.gather(*(add(connector, server) for _ in range(4)))
        failed = await connector.call_tool(server, "fail", {"message": "boom"})
        after = await add(connector, server)
    assert [result.output for result in results] == ["5"] * 4
    assert failed.error is not None and failed.error["type"] == "mcp_tool_execution_error"
    assert after.output == "5"
    assert counter.handshakes == 1


async def test_different_authorization_values_never_share_a_session(calc: tuple[MethodCounter, str]) -> None:
    counter, base = calc
    url = f"{base}/r/credentials/mcp"
    alice = McpServer("calc", url, headers={"Authorization": "Bearer alice-token-1"})
    bob = McpServer("calc", url, headers={"Authorization": "Bearer bob-token-22"})
    async with McpConnector(10) as connector:
        for server in (alice, bob, alice, bob):
            assert (await add(connector, server)).output == "5"
    calls = httpx2.get(f"{base}/__parity/runs/credentials/calls").json()["calls"]
    assert [call["headers"]["authorization"] for call in calls if call["method"] == "tools/call"] == \
        [fingerprint(f"Bearer {name}") for name in ("alice-token-1", "bob-token-22") * 2]
    assert counter.handshakes == 2


def test_a_session_key_keeps_no_secret_in_clear() -> None:
    url = "http://127.0.0.1:9/mcp"
    key = session_key(url, "streamable_http", {"Authorization": "Bearer sk-secret-value"})
    assert "secret" not in key and url not in key
    assert key != session_key(url, "streamable_http", {"Authorization": "Bearer sk-secret-valuf"})
    assert key != session_key(url, "sse", {"Authorization": "Bearer sk-secret-value"})


@pytest.mark.parametrize(("start", "path", "transport"), [(handshake_era_calc, "/mcp", "streamable_http"),
                                                        (sse_calc, "/sse", "sse")])
async def test_a_restarted_server_gets_a_fresh_session_and_the_call_succeeds(
        start: Callable[[int], tuple[MethodCounter, ServerThread]], path: str, transport: str) -> None:
    first, server = start(0)
    port = server.port
    try:
        async with McpConnector(10) as connector:
            target = McpServer("calc", f"{server.url}{path}", transport)  # type: ignore[arg-type]
            assert (await add(connector, target)).output == "5"
            await asyncio.to_thread(server.stop)
            second, server = await asyncio.to_thread(start, port)
            assert (await add(connector, target)).output == "5"  # the old session is lost: a new one is opened
            assert (await add(connector, target)).output == "5"
    finally:
        server.stop()
    assert (first.methods["server/discover"], first.sessions) == (1, 1)
    assert (second.methods["server/discover"], second.sessions) == (0, 1)  # reopened once, its era known


class Clock:
    """Time as the test sets it: a session is idle too long when the test says so, never because
    the machine was slow between two calls."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_pool_is_bounded_and_idle_sessions_close(calc: tuple[MethodCounter, str]) -> None:
    counter, base = calc
    clock = Clock()
    # An owner looks at the clock at least every `idle_s` (real time): a short one only makes it look often.
    pool: SessionPool[Any] = SessionPool(size=2, idle_s=0.05, clock=clock)
    async with McpConnector(10, pool=pool) as connector:
        for run in ("a", "b", "c"):
            assert (await add(connector, McpServer("calc", f"{base}/r/{run}/mcp"))).output == "5"
        assert len(pool) == 2
        await until(lambda: pool.owners <= 2, "the evicted session closes")
        assert (len(pool), pool.owners) == (2, 2)  # not idle yet, however long the calls took
        clock.now += 1
        await until(lambda: pool.owners == 0, "idle sessions close")
        assert len(pool) == 0
        assert (await add(connector, McpServer("calc", f"{base}/r/a/mcp"))).output == "5"
        assert (len(pool), pool.owners) == (1, 1)
    assert counter.handshakes == 3  # reopening `a` needed no probe: its era was known


async def test_closing_closes_every_session(stack: Stack) -> None:
    runtime = Runtime.build(reference_config(stack.upstream_url or ""))
    calc = stack.mcp["calc"].for_run("closing")
    for server in (McpServer("calc", calc.url), McpServer("calc", calc.sse_url, "sse")):
        assert (await add(runtime.connector, server)).output == "5"
    assert len(asyncio.all_tasks()) > 1  # the sessions' owner tasks
    await runtime.close()
    assert asyncio.all_tasks() == {asyncio.current_task()}
