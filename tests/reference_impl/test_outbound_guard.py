"""The outbound policy: only globally routable addresses by default (as IANA's special-purpose
registries, shipped as data, say: the most specific entry judges), IPv4 addresses carried by
IPv6 forms judged too, the settings' ranges, the allowlist, and that a blocked destination is
never connected to. No test here opens a connection to a non-loopback address: resolvers are
fake, and the inner transports either fail closed or only record (test_outbound_pinning.py
connects for real, on loopback)."""

from __future__ import annotations

import asyncio
import ipaddress
import re
from importlib.resources import files

import httpx2
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import GatewayConfig, McpServerConfig, build_gateway_app
from responses_parity.reference_impl.outbound import (CHECKED_ADDRESS, DestinationBlocked, GuardedTransport,
                                                      OutboundPolicy, Resolver)
from responses_parity.reference_impl.special_addresses import DATA_FILE, registry

HOST = "tools.example.com"


class FailClosed(httpx2.AsyncBaseTransport):
    """An inner transport for blocked destinations: reaching it at all fails the test."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raise AssertionError(f"the guard let {request.url} through")


class Recording(httpx2.AsyncBaseTransport):
    """An inner transport for reachable destinations: records where it was asked to connect (the
    URL at the address the guard checked, as `PinnedTransport` connects)."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.reached.append(str(request.url.copy_with(host=request.extensions[CHECKED_ADDRESS])))
        return httpx2.Response(204)


def fake_resolver(table: dict[str, list[str]]) -> Resolver:
    async def resolve(host: str) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]
    return resolve


def get(inner: httpx2.AsyncBaseTransport, policy: OutboundPolicy, url: str, table: dict[str, list[str]]) -> None:
    async def go() -> None:
        async with httpx2.AsyncClient(transport=GuardedTransport(inner, policy, fake_resolver(table))) as client:
            await client.get(url)

    asyncio.run(go())


def blocked(policy: OutboundPolicy, url: str, table: dict[str, list[str]]) -> str:
    """The message of the refusal; the inner transport fails the test if it is reached."""
    with pytest.raises(DestinationBlocked) as refused:
        get(FailClosed(), policy, url, table)
    return str(refused.value)


def reached(policy: OutboundPolicy, url: str, table: dict[str, list[str]]) -> list[str]:
    inner = Recording()
    get(inner, policy, url, table)
    return inner.reached


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback range 127.0.0.0/8"), ("::1", "loopback address range ::1/128"),
    ("10.1.2.3", "private-use range 10.0.0.0/8"), ("172.20.0.5", "private-use range 172.16.0.0/12"),
    ("192.168.1.1", "private-use range 192.168.0.0/16"), ("169.254.169.254", "link local range 169.254.0.0/16"),
    ("fe80::1", "link-local unicast range fe80::/10"), ("224.0.0.251", "multicast range 224.0.0.0/4"),
    ("ff02::1", "multicast range ff00::/8"), ("100.64.1.1", "shared address space range 100.64.0.0/10"),
    ("fd12:3456::1", "unique-local range fc00::/7"), ("0.0.0.0", '"this host on this network" range 0.0.0.0/32'),
    ("::", "unspecified address range ::/128"), ("0.1.2.3", '"this network" range 0.0.0.0/8'),
    ("240.0.0.1", "reserved range 240.0.0.0/4"), ("255.255.255.255", "limited broadcast range 255.255.255.255/32"),
    ("192.0.0.8", "ipv4 dummy address range 192.0.0.8/32"), ("198.18.0.1", "benchmarking range 198.18.0.0/15"),
    ("192.0.2.10", "documentation (test-net-1) range 192.0.2.0/24"),
    ("2001:db8::1", "documentation range 2001:db8::/32"),
    ("64:ff9b:1::808:808", "ipv4-ipv6 translat. range 64:ff9b:1::/48"), ("2002:808:808::", "6to4 range 2002::/16"),
])
def test_what_is_not_globally_routable_is_blocked(address: str, reason: str) -> None:
    message = blocked(OutboundPolicy.from_settings(), f"http://{HOST}/mcp", {HOST: [address]})
    assert message == (f"{HOST} resolves to {address}, which the gateway's outbound policy blocks: "
                       f"not globally routable ({reason})")


@pytest.mark.parametrize(("address", "reason"), [
    ("::ffff:127.0.0.1", "loopback 127.0.0.1 embedded in IPv4-mapped address ::ffff:127.0.0.1"),
    ("::ffff:10.0.0.1", "private-use 10.0.0.1 embedded in IPv4-mapped address ::ffff:10.0.0.1"),
    ("::ffff:100.64.0.1", "shared address space 100.64.0.1 embedded in IPv4-mapped address ::ffff:100.64.0.1"),
    ("::127.0.0.1", "loopback 127.0.0.1 embedded in IPv4-compatible address ::127.0.0.1"),
    ("::ffff:0:7f00:1", "loopback 127.0.0.1 embedded in IPv4-translated address ::ffff:0:7f00:1"),
    ("64:ff9b::7f00:1", "loopback 127.0.0.1 embedded in NAT64 address 64:ff9b::7f00:1"),
    ("64:ff9b::a9fe:a9fe", "link local 169.254.169.254 embedded in NAT64 address 64:ff9b::a9fe:a9fe"),
    ("64:ff9b:1::a00:1", "private-use 10.0.0.1 embedded in NAT64 local-use address 64:ff9b:1::a00:1"),
    ("2002:7f00:1::", "loopback 127.0.0.1 embedded in 6to4 address 2002:7f00:1::"),
    ("2002:a9fe:a9fe::1", "link local 169.254.169.254 embedded in 6to4 address 2002:a9fe:a9fe::1"),
])
def test_an_ipv4_address_carried_by_an_ipv6_one_is_judged_and_named(address: str, reason: str) -> None:
    message = blocked(OutboundPolicy.from_settings(), f"http://{HOST}/mcp", {HOST: [address]})
    assert message.endswith(f"resolves to {address}, which the gateway's outbound policy blocks: "
                            f"not globally routable ({reason})")


@pytest.mark.parametrize(("address", "reason"), [
    ("5f00::1", "segment routing (srv6) sids range 5f00::/16"),
    ("3fff::1", "documentation range 3fff::/20"),
    ("100:0:0:1::1", "dummy ipv6 prefix range 100:0:0:1::/64"),
    ("192.88.99.1", "deprecated (6to4 relay anycast) range 192.88.99.0/24"),
    ("::ffff:192.88.99.1", "deprecated (6to4 relay anycast) 192.88.99.1 embedded in IPv4-mapped address "
                           "::ffff:192.88.99.1"),
    ("64:ff9b::c058:6301", "deprecated (6to4 relay anycast) 192.88.99.1 embedded in NAT64 address "
                           "64:ff9b::c058:6301"),
])
def test_registry_entries_newer_than_pythons_own_table_are_blocked(address: str, reason: str) -> None:
    """Python 3.11's `is_global` calls these global; IANA's registries, as the project ships
    them, do not."""
    message = blocked(OutboundPolicy.from_settings(), f"https://{HOST}/mcp", {HOST: [address]})
    assert message.endswith(f"blocks: not globally routable ({reason})")


@pytest.mark.parametrize("address", ["fec0::1", "4000::1", "8000::1", "e000::1", "::2:0:1"])
def test_ipv6_outside_global_unicast_is_blocked_where_no_registry_entry_holds_it(address: str) -> None:
    """IANA allocates only 2000::/3 as global unicast; the rest (deprecated site-local fec0::/10
    among it) is reserved, and the special-purpose registry does not list it."""
    message = blocked(OutboundPolicy.from_settings(), f"https://{HOST}/mcp", {HOST: [address]})
    assert message.endswith("blocks: not globally routable (outside ipv6 global unicast range 2000::/3)")


def test_nat64_outside_global_unicast_is_judged_by_its_registry_entry_and_ipv4_address() -> None:
    assert reached(OutboundPolicy.from_settings(), f"https://{HOST}/mcp", {HOST: ["64:ff9b::808:808"]}) != []


@pytest.mark.parametrize("address", [
    "192.0.0.9", "192.0.0.10", "2001:1::1", "2001:1::2", "2001:1::3", "2001:3::1", "2001:4:112::1", "2001:20::1",
    "2001:30::1",
])
def test_a_globally_reachable_entry_inside_one_that_is_not_is_reached(address: str) -> None:
    """The most specific entry wins: each of these sits in 192.0.0.0/24 or 2001::/23."""
    assert reached(OutboundPolicy.from_settings(), f"https://{HOST}/mcp", {HOST: [address]}) != []


@pytest.mark.parametrize(("address", "reason"), [
    ("192.0.0.20", "ietf protocol assignments range 192.0.0.0/24"),
    ("192.0.0.3", "ipv4 service continuity prefix range 192.0.0.0/29"),
    ("192.0.0.170", "nat64/dns64 discovery range 192.0.0.170/32"),
    ("192.88.99.2", "6a44-relay anycast address range 192.88.99.2/32"),
    ("2001:5::1", "ietf protocol assignments range 2001::/23"),
    ("2001::1", "teredo range 2001::/32"),
    ("2001:2::1", "benchmarking range 2001:2::/48"),
    ("2001:10::1", "deprecated (previously orchid) range 2001:10::/28"),
])
def test_the_most_specific_entry_judges_an_address_inside_several(address: str, reason: str) -> None:
    message = blocked(OutboundPolicy.from_settings(), f"https://{HOST}/mcp", {HOST: [address]})
    assert message.endswith(f"blocks: not globally routable ({reason})")


def test_the_shipped_registries_are_whole_dated_and_sourced() -> None:
    """The data file parses, says when the registries were last updated and where its rows come
    from, holds each block once with one of the registry's words for reachability, and has
    both registries' entries (26 IPv4 blocks, 25 IPv6 ones)."""
    shipped = registry()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", shipped.last_updated)
    header = (files("responses_parity.reference_impl") / DATA_FILE).read_text().split("\nAddress Block,")[0]
    assert "iana-ipv4-special-registry" in header and "iana-ipv6-special-registry" in header
    blocks = [entry.block for entry in shipped.entries]
    assert len(blocks) == len(set(blocks))
    assert {entry.globally_reachable for entry in shipped.entries} == {"True", "False", "N/A", ""}
    assert all(entry.name and entry.rfc.startswith("[RFC") for entry in shipped.entries)
    assert (sum(block.version == 4 for block in blocks), sum(block.version == 6 for block in blocks)) == (26, 25)


def test_an_ip_literal_is_judged_without_a_lookup() -> None:
    message = blocked(OutboundPolicy.from_settings(), "http://[::ffff:169.254.169.254]/latest", {})
    assert "could not be resolved" not in message
    mapped = ipaddress.ip_address("::ffff:a9fe:a9fe")  # written ::ffff:169.254.169.254 from Python 3.13 on
    assert message.endswith(f"link local 169.254.169.254 embedded in IPv4-mapped address {mapped})")


@pytest.mark.parametrize(("address", "url"), [
    ("8.8.8.8", "http://8.8.8.8:8080/mcp"), ("93.184.216.34", "http://93.184.216.34:8080/mcp"),
    ("2606:4700::1", "http://[2606:4700::1]:8080/mcp"), ("192.0.0.9", "http://192.0.0.9:8080/mcp"),
    ("::ffff:8.8.8.8", "http://[::ffff:8.8.8.8]:8080/mcp"), ("64:ff9b::808:808", "http://[64:ff9b::808:808]:8080/mcp"),
])
def test_a_globally_routable_address_is_reached_at_the_address_that_was_checked(address: str, url: str) -> None:
    assert reached(OutboundPolicy.from_settings(), f"http://{HOST}:8080/mcp", {HOST: [address]}) == [url]


def test_a_harmless_name_for_a_private_address_is_blocked_before_any_connection() -> None:
    message = blocked(OutboundPolicy.from_settings(), "http://mcp.harmless-tools.example/mcp",
                      {"mcp.harmless-tools.example": ["93.184.216.34", "10.0.0.7"]})
    assert "resolves to 10.0.0.7," in message


@pytest.mark.parametrize("address", ["127.0.0.1", "::ffff:127.0.0.1", "::127.0.0.1", "::ffff:0:7f00:1",
                                     "64:ff9b::7f00:1", "64:ff9b:1::7f00:1", "2002:7f00:1::"])
def test_an_allowed_range_allows_its_addresses_in_every_form(address: str) -> None:
    allowed = OutboundPolicy.from_settings(allow=["127.0.0.0/8"])
    assert reached(allowed, f"http://{HOST}/mcp", {HOST: [address]}) != []


@pytest.mark.parametrize(("address", "reason"), [
    ("::1", "not globally routable (loopback address range ::1/128)"),
    ("10.0.0.1", "not globally routable (private-use range 10.0.0.0/8)"),
    ("2002:808:808::", "not globally routable (6to4 range 2002::/16)"),
])
def test_an_allowed_range_allows_nothing_else(address: str, reason: str) -> None:
    allowed = OutboundPolicy.from_settings(allow=["127.0.0.0/8"])
    assert blocked(allowed, f"http://{HOST}/mcp", {HOST: [address]}).endswith(reason)


@pytest.mark.parametrize(("address", "reason"), [
    ("93.184.216.34", "in 93.184.216.0/24, a range the gateway's settings block"),
    ("::ffff:93.184.216.34", "93.184.216.34 embedded in IPv4-mapped address ::ffff:93.184.216.34 is in "
                             "93.184.216.0/24, a range the gateway's settings block"),
    ("64:ff9b::5db8:d822", "93.184.216.34 embedded in NAT64 address 64:ff9b::5db8:d822 is in "
                           "93.184.216.0/24, a range the gateway's settings block"),
])
def test_the_settings_add_blocked_ranges(address: str, reason: str) -> None:
    extra = OutboundPolicy.from_settings(block=["93.184.216.0/24"])
    assert blocked(extra, f"http://{HOST}/", {HOST: [address]}).endswith(f"blocks: {reason}")


def test_the_allowlist_overrides_the_settings_blocked_ranges() -> None:
    both = OutboundPolicy.from_settings(block=["10.0.0.0/8"], allow=["10.0.0.0/24"])
    assert reached(both, "http://a.example/mcp", {"a.example": ["10.0.0.9"]}) == ["http://10.0.0.9/mcp"]
    assert "settings block" in blocked(both, "http://a.example/mcp", {"a.example": ["10.0.1.9"]})


def test_an_unresolvable_host_is_blocked() -> None:
    assert "could not be resolved" in blocked(OutboundPolicy.from_settings(), "http://nowhere.example/", {})


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
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    try:
        chat = httpx2.post(f"{server.url}/v1/chat/completions", timeout=20, json={
            "model": "m", "messages": [{"role": "user", "content": f"2+3 {run_marker(run, 0)}"}]})
        responses = httpx2.post(f"{server.url}/v1/responses", timeout=20, json={
            "model": "m", "input": f"2+3 {run_marker(run, 1)}",
            "tools": [{"type": "mcp", "server_label": "docs", "server_url": "http://docs.example.org/mcp",
                       "require_approval": "never"}]})
    finally:
        server.stop()
    assert chat.status_code == 403 and "10.20.30.40" in chat.json()["error"]["message"]
    assert responses.status_code == 424
    assert responses.json()["error"]["type"] == "external_connector_error"
    assert ("169.254.169.254, which the gateway's outbound policy blocks: not globally routable (link local range "
            "169.254.0.0/16)") in responses.json()["error"]["message"]
    record = httpx2.get(f"{stack.upstream_url}/__parity/runs/{run}").json()
    assert record["requests"] == []
