"""Guarded connections go to the address the guard checked, over http and https, while TLS keeps
the host name: real servers on loopback, with certificates from a test CA (`trustme`).

The guard's lookup of `localhost` answers 127.0.0.2, where the server under test listens; any
other lookup (the system's, which an unpinned connection would make) answers 127.0.0.1, where a
decoy listens on the same port with a valid certificate for `localhost`. So a connection that
resolved the name again would reach the decoy, as one would after a DNS rebinding."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import httpx2
import pytest
import trustme
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.fixtures.search.app import SearchState, build_search_app
from responses_parity.fixtures.upstream.script import new_run_token
from responses_parity.reference_impl.mcp_servers import McpConnector, McpServer
from responses_parity.reference_impl.outbound import (DestinationBlocked, OutboundPolicy, PinnedTransport,
                                                      guarded_client_factory, tls_context)
from responses_parity.reference_impl.search_providers import HttpSearchProvider
from responses_parity.reference_impl.web_search import WebResult

HOST = "localhost"
CHECKED, ELSEWHERE = "127.0.0.2", "127.0.0.1"
LOOPBACK_ALLOWED = OutboundPolicy.from_settings(allow=["127.0.0.0/8"])
START_DEADLINE_S = 10.0


async def guard_lookup(host: str) -> list[str]:
    if host != HOST:
        raise OSError(f"unknown host {host}")
    return [CHECKED]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def trusting(ca: trustme.CA) -> ssl.SSLContext:
    """A client TLS context that trusts the test CA and verifies host names, as the gateway's does."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@dataclass
class Served:
    """A server on loopback: its port, and the SNI names of the TLS handshakes it saw."""

    port: int
    server_names: list[str | None] = field(default_factory=list)


def sockets_on_one_port(addresses: tuple[str, ...]) -> list[socket.socket]:
    """Listening sockets, one per loopback address, all on one free port."""
    for _ in range(50):
        taken: list[socket.socket] = []
        try:
            for address in addresses:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                taken.append(sock)
                sock.bind((address, taken[0].getsockname()[1] if len(taken) > 1 else 0))
                sock.listen()
            return taken
        except OSError as error:
            for sock in taken:
                sock.close()
            if error.errno != errno.EADDRINUSE:
                raise
    raise AssertionError(f"no port free on all of {addresses}")


@asynccontextmanager
async def serving(app: ASGIApp, sock: socket.socket, cert: trustme.LeafCert | None) -> AsyncIterator[Served]:
    """uvicorn serving `app` on `sock` in this event loop, over TLS with `cert` (plain HTTP without)."""
    served = Served(sock.getsockname()[1])

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    config.load()  # a loaded config's `ssl` is served as it is (ssl_context_factory is younger than uvicorn's floor)
    if cert is not None:
        config.ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(config.ssl)
        config.ssl.sni_callback = lambda _socket, name, _context: served.server_names.append(name)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = asyncio.get_running_loop().time() + START_DEADLINE_S
    while not server.started:
        assert not task.done() and asyncio.get_running_loop().time() < deadline, "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield served
    finally:
        server.should_exit = True
        await task


def who_answers(label: str) -> Starlette:
    async def answer(request: Request) -> JSONResponse:
        return JSONResponse({"server": label, "host": request.headers["host"]})

    return Starlette(routes=[Route("/", answer)])


@asynccontextmanager
async def checked_and_decoy(ca: trustme.CA, scheme: str, checked_app: ASGIApp,
                            checked_name: str = HOST) -> AsyncIterator[tuple[Served, Served]]:
    """The server under test at the checked address (its certificate for `checked_name`), and
    the decoy elsewhere on the same port (its certificate for `localhost`)."""
    tls = scheme == "https"
    checked_sock, decoy_sock = sockets_on_one_port((CHECKED, ELSEWHERE))
    async with AsyncExitStack() as stack:
        checked = await stack.enter_async_context(
            serving(checked_app, checked_sock, ca.issue_cert(checked_name) if tls else None))
        decoy = await stack.enter_async_context(
            serving(who_answers("decoy"), decoy_sock, ca.issue_cert(HOST) if tls else None))
        yield checked, decoy


def guarded(trusting: ssl.SSLContext) -> Callable[..., httpx2.AsyncClient]:
    return guarded_client_factory(LOOPBACK_ALLOWED, guard_lookup, inner=lambda: PinnedTransport(trusting))


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_a_connection_goes_to_the_checked_address_and_keeps_the_host_name(
        ca: trustme.CA, trusting: ssl.SSLContext, scheme: str) -> None:
    async with checked_and_decoy(ca, scheme, who_answers("checked")) as (checked, decoy), \
            guarded(trusting)() as client:
        answer = await client.get(f"{scheme}://{HOST}:{checked.port}/")
    assert answer.json() == {"server": "checked", "host": f"{HOST}:{checked.port}"}
    assert checked.server_names == ([HOST] if scheme == "https" else [])  # SNI is the host name, not the address
    assert decoy.server_names == []


async def test_a_certificate_for_another_name_is_refused(ca: trustme.CA, trusting: ssl.SSLContext) -> None:
    """The checked address answers with a valid certificate, but for another name: TLS verifies
    the host name, so the request is never sent."""
    async with checked_and_decoy(ca, "https", who_answers("checked"), checked_name="elsewhere.test") as (
            checked, decoy), guarded(trusting)() as client:
        with pytest.raises(httpx2.ConnectError) as refused:
            await client.get(f"https://{HOST}:{checked.port}/")
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    assert "localhost" in str(refused.value)  # verified against the host name
    assert (checked.server_names, decoy.server_names) == ([HOST], [])


async def test_a_request_the_guard_did_not_check_is_refused_before_any_connection(
        ca: trustme.CA, trusting: ssl.SSLContext) -> None:
    async with checked_and_decoy(ca, "https", who_answers("checked")) as (checked, decoy), \
            httpx2.AsyncClient(transport=PinnedTransport(trusting)) as unguarded:
        with pytest.raises(DestinationBlocked, match="was not checked by the outbound guard"):
            await unguarded.get(f"https://{HOST}:{checked.port}/")
    assert (checked.server_names, decoy.server_names) == ([], [])


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_mcp_over_https_reaches_the_checked_address(
        ca: trustme.CA, trusting: ssl.SSLContext, transport: Literal["streamable_http", "sse"]) -> None:
    """The `mcp` SDK's clients, on both transports, come from the guarded factory."""
    path = "/mcp" if transport == "streamable_http" else "/sse"
    async with checked_and_decoy(ca, "https", FIXTURE_SERVERS["calc"]()) as (checked, decoy), \
            McpConnector(10, guarded(trusting)) as connector:
        server = McpServer("calc", f"https://{HOST}:{checked.port}{path}", transport)
        listed = await connector.list_tools(server)
        called = await connector.call_tool(server, "add", {"a": 2, "b": 3})
    assert "add" in {tool.name for tool in listed}
    assert called.error is None and called.output is not None and "5" in called.output
    assert HOST in checked.server_names and decoy.server_names == []


async def test_a_web_search_over_https_reaches_the_checked_address(
        ca: trustme.CA, trusting: ssl.SSLContext) -> None:
    state = SearchState()
    app = build_search_app(state)
    run, query = new_run_token(), f"pinned {new_run_token()}"
    page = {"url": "https://docs.example.org/a", "title": "A", "snippet": "first"}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://search") as fixture:
        assert (await fixture.put(f"/__parity/runs/{run}", json={query: [page]})).status_code == 204
    async with checked_and_decoy(ca, "https", app) as (checked, decoy):
        provider = HttpSearchProvider(f"https://{HOST}:{checked.port}", guarded(trusting))
        found = await provider.search(query, max_results=3)
    assert found == [WebResult(**page)]
    assert checked.server_names == [HOST] and decoy.server_names == []


async def _close(clients: list[httpx2.AsyncClient]) -> None:
    for client in clients:
        await client.aclose()


def test_the_gateways_of_one_process_load_the_ca_bundle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the CA bundle takes 30 to 70 ms of CPU: the pinned transports of every gateway
    built in a process (each builds its client factory; a harness run builds dozens) share one
    TLS context."""
    loads = []
    create = httpx2.create_ssl_context
    monkeypatch.setattr(httpx2, "create_ssl_context", lambda *args, **how: loads.append(how) or create(*args, **how))
    tls_context.cache_clear()
    try:
        factories = [guarded_client_factory(LOOPBACK_ALLOWED) for _gateway in range(2)]
        clients = [factory(timeout=httpx2.Timeout(START_DEADLINE_S)) for factory in factories for _session in range(3)]
        asyncio.run(_close(clients))
    finally:
        tls_context.cache_clear()
    assert len(loads) == 1
