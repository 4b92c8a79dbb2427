"""The harness catches gateways whose agent loop breaks a rule, and the finding names the rule:
a replayed tool run again, tools listed again on a continuation, mcp_list_tools sent to the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from faulty_gateways import RewritingRequests, forget_replayed_lists, leak_list_tools_upstream, reexecute_replayed_calls
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.scenario.loader import builtin_scenarios_dir
from responses_parity.reference_impl import build_gateway_app


def forwarding(upstream: str) -> Starlette:
    """A pass-through to the scripted upstream (a faulty gateway's request rewriting goes in front)."""

    async def forward(request: Request) -> Response:
        client = httpx2.AsyncClient(timeout=30)
        sent = client.build_request("POST", f"{upstream}{request.url.path}", content=await request.body(),
                                    headers={"content-type": "application/json"})
        answer = await client.send(sent, stream=True)

        async def body() -> Any:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()
                await client.aclose()

        return StreamingResponse(body(), status_code=answer.status_code,
                                 media_type=answer.headers.get("content-type"))

    return Starlette(routes=[Route("/v1/{path:path}", forward, methods=["POST"])])


@pytest.fixture
def servers() -> Iterator[list[ServerThread]]:
    started: list[ServerThread] = []
    yield started
    for server in started:
        server.stop()


def gateway(stack: Stack, servers: list[ServerThread], *, requests: Any = None, upstream: Any = None) -> str:
    upstream_url = stack.upstream_url
    if upstream is not None:
        proxy = ServerThread(RewritingRequests(forwarding(stack.upstream_url or ""), upstream)).start()
        servers.append(proxy)
        upstream_url = proxy.url
    app: Any = build_gateway_app(reference_config(upstream_url or ""))
    if requests is not None:
        app = RewritingRequests(app, requests)
    server = ServerThread(app).start()
    servers.append(server)
    return server.url


def scenario_text(name: str) -> str:
    return (builtin_scenarios_dir() / name).read_text()


def rules_and_messages(result: Any) -> list[tuple[str, str]]:
    return [(finding.rule, finding.message) for _, finding in result.findings if str(finding.severity) == "error"]


def test_a_tool_run_again_on_replay_is_caught(stack: Stack, servers: list, run_scenario: Any) -> None:
    url = gateway(stack, servers, requests=reexecute_replayed_calls)
    result = run_scenario(scenario_text("mcp-replay-stateless.yaml"), target_url=url)
    assert result.outcome == "fail"
    assert ("expect.upstream.tool_runs", "MCP tools ran (calc.add: 1), expected none") in rules_and_messages(result)
    assert "approval_link" in {rule for rule, _ in rules_and_messages(result)}


def test_tools_listed_again_on_a_continuation_are_caught(stack: Stack, servers: list, run_scenario: Any) -> None:
    url = gateway(stack, servers, requests=forget_replayed_lists)
    result = run_scenario(scenario_text("mcp-replay-stateless.yaml"), target_url=url)
    assert result.outcome == "fail"
    assert ("expect.output", "output item types differ: unexpected mcp_list_tools at 0") in rules_and_messages(result)


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_mcp_list_tools_sent_to_the_model_is_caught(stack: Stack, servers: list, run_scenario: Any, mode: str) -> None:
    url = gateway(stack, servers, upstream=leak_list_tools_upstream)
    result = run_scenario(scenario_text("mcp-call.yaml"), mode=mode, target_url=url)
    assert result.outcome == "fail"
    assert ("expect.upstream.never_sent", "model request 1 carried mcp_list_tools, which must never reach the model") \
        in rules_and_messages(result)
