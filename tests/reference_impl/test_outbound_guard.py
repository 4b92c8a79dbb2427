"""The outbound policy: blocked ranges, the allowlist, and that a blocked destination is never
connected to. No test here opens a connection to a non-loopback address: resolvers are fake,
and the inner transport fails closed."""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.stack import ServerThread, Stack
from responses_parity.reference_impl import GatewayConfig, McpServerConfig, build_gateway_app
from responses_parity.reference_impl.outbound import DestinationBlocked, GuardedTransport, OutboundPolicy, Resolver


class FailClosed(httpx2.AsyncBaseTransport):
    """An inner transport that refuses to be reached, recording what tried to."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.reached.append(str(request.url))
        return httpx2.Response(204)


def fake_resolver(table: dict[str, list[str]]) -> Resolver:
    async def resolve(host: str) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]
    return resolve


def send(policy: OutboundPolicy, url: str, table: dict[str, list[str]]) -> tuple[FailClosed, Exception | None]:
    inner = FailClosed()
    transport = GuardedTransport(inner, policy, fake_resolver(table))

    async def go() -> None:
        async with httpx2.AsyncClient(transport=transport) as client:
            await client.get(url)

    try:
        asyncio.run(go())
    except DestinationBlocked as error:
        return inner, error
    return inner, None


@pytest.mark.parametrize(("address", "range_name"), [
    ("127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("172.20.0.5", "private"), ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"), ("224.0.0.251", "multicast"), ("100.64.1.1", "carrier-grade NAT"),
    ("fd12:3456::1", "IPv6 unique local"), ("::1", "loopback"), ("0.0.0.0", "unspecified"),
])
def test_blocked_ranges(address: str, range_name: str) -> None:
    inner, error = send(OutboundPolicy.from_settings(), "http://tools.example.com/mcp",
                        {"tools.example.com": [address]})
    assert inner.reached == [] and error is not None
    assert f"resolves to {address}, in the {range_name} range" in str(error)


def test_a_harmless_name_for_a_private_address_is_blocked_before_any_connection() -> None:
    inner, error = send(OutboundPolicy.from_settings(), "http://mcp.harmless-tools.example/mcp",
                        {"mcp.harmless-tools.example": ["93.184.216.34", "10.0.0.7"]})
    assert inner.reached == [] and "10.0.0.7" in str(error)


def test_a_public_address_is_reached_at_the_address_that_was_checked() -> None:
    inner, error = send(OutboundPolicy.from_settings(), "http://tools.example.com:8080/mcp",
                        {"tools.example.com": ["93.184.216.34"]})
    assert error is None and inner.reached == ["http://93.184.216.34:8080/mcp"]


def test_the_allowlist_overrides_and_settings_add_ranges() -> None:
    allowed = OutboundPolicy.from_settings(allow=["10.0.0.0/24"])
    assert send(allowed, "http://a.example/mcp", {"a.example": ["10.0.0.9"]})[1] is None
    extra = OutboundPolicy.from_settings(block=["93.184.216.0/24"])
    blocked = send(extra, "http://b.example/", {"b.example": ["93.184.216.34"]})[1]
    assert "blocked by the gateway's settings" in str(blocked)


def test_an_unresolvable_host_is_blocked() -> None:
    inner, error = send(OutboundPolicy.from_settings(), "http://nowhere.example/", {})
    assert inner.reached == [] and "could not be resolved" in str(error)


def test_nothing_of_a_blocked_server_reaches_the_model(stack: Stack) -> None:
    """End to end, on both surfaces: a configured server and a request-level server whose
    harmless host names resolve to private addresses. The requests are refused and the
    scripted model never hears of them."""
    resolver = fake_resolver({"mcp.harmless-tools.example": ["10.20.30.40"], "docs.example.org": ["169.254.169.254"]})
    config = GatewayConfig(upstream_url=f"{stack.upstream_url}/v1",
                           mcp_servers=(McpServerConfig("helper", "http://mcp.harmless-tools.example/mcp"),))
    server = ServerThread(build_gateway_app(config, resolver)).start()
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"call": {"tool": "add"}}], [{"call": {"tool": "add"}}]]})
    httpx.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    try:
        chat = httpx.post(f"{server.url}/v1/chat/completions", timeout=20, json={
            "model": "m", "messages": [{"role": "user", "content": f"2+3 {run_marker(run, 0)}"}]})
        responses = httpx.post(f"{server.url}/v1/responses", timeout=20, json={
            "model": "m", "input": f"2+3 {run_marker(run, 1)}",
            "tools": [{"type": "mcp", "server_label": "docs", "server_url": "http://docs.example.org/mcp",
                       "require_approval": "never"}]})
    finally:
        server.stop()
    assert chat.status_code == 403 and "10.20.30.40" in chat.json()["error"]["message"]
    assert responses.status_code == 424
    assert responses.json()["error"]["type"] == "external_connector_error"
    assert "169.254.169.254, in the link-local range" in responses.json()["error"]["message"]
    record = httpx.get(f"{stack.upstream_url}/__parity/runs/{run}").json()
    assert record["requests"] == []
