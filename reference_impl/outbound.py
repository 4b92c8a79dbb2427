"""The outbound address policy: where the gateway may connect (MCP servers, on both surfaces,
and web search backends).

Before any connection the host is resolved (the resolver is a parameter, so tests use a fake
one) and every address it resolves to is checked. By default only globally reachable unicast
addresses are reached: those IANA's special-purpose registries call globally reachable or do not
list (`special_addresses`, data the project ships, not the running Python's `is_global`), less
multicast. The `block` setting adds ranges; the `allow` setting overrides everything.

An IPv6 address that carries an IPv4 address is judged by both: IPv4-compatible (::/96,
deprecated), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96, and the local-use
64:ff9b:1::/48 read as a /96) and 6to4 (2002::/16, the IPv4 address in bits 16..48). An
IPv4-mapped address (::ffff:0:0/96) is its IPv4 address to the socket, so that alone judges it.
Either one in an allowed range lets it through, so allowing 127.0.0.0/8 also allows
::ffff:127.0.0.1; otherwise both must pass.

A blocked destination fails closed: the request never reaches the transport under the guard,
and the error names the range, and for a carried address the form that carried it. A request
the guard lets through carries the address it checked (`CHECKED_ADDRESS`), and `PinnedTransport`
connects there and nowhere else, so a second lookup cannot send it elsewhere; the URL keeps the
host name, so over https TLS sends it (SNI) and verifies the certificate against it.

Why httpx2, where the model client is aiohttp (`upstream.http`): the mcp SDK's transports take an
httpx2 client (`streamable_http_client(http_client=...)`, the SSE transport's
`httpx_client_factory`), so the guard is an httpx2 transport, and web search goes through the same
guard with the same client (the harness's clients are httpx2 too).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import httpcore2
import httpx2

from .special_addresses import IpAddress, IpNetwork, registry

Resolver = Callable[[str], Awaitable[list[str]]]

CHECKED_ADDRESS = "responses_parity.checked_address"
"""The request extension in which the guard hands the address it checked to the transport under it."""


def _networks(cidrs: Iterable[str]) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _containing(ip: IpAddress, networks: Iterable[IpNetwork]) -> IpNetwork | None:
    return next((network for network in networks if ip in network), None)


_MULTICAST = _networks(["224.0.0.0/4", "ff00::/8"])
"""IANA's multicast address spaces, which the special-purpose registries do not list."""

_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
"""The only IPv6 space IANA's IPv6 Address Space registry allocates as global unicast; the rest
is reserved by the IETF (fec0::/10, deprecated site-local, still routes on some stacks), and is
reachable only where the special-purpose registry says so (64:ff9b::/96)."""

_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")

_CARRIERS = tuple((ipaddress.IPv6Network(cidr), form) for cidr, form in (
    ("::/96", "IPv4-compatible"), ("::ffff:0:0:0/96", "IPv4-translated"), ("64:ff9b::/96", "NAT64"),
    ("64:ff9b:1::/48", "NAT64 local-use")))
"""Forms that carry an IPv4 address in their last 32 bits (`ipaddress` itself reads the
IPv4-mapped and 6to4 ones)."""


class DestinationBlocked(httpx2.TransportError):
    """The destination resolves to an address the outbound policy blocks."""


async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _unreachable_range(ip: IpAddress) -> tuple[str, IpNetwork] | None:
    """The range that makes `ip` not globally reachable, by name (the registry's, lowercased),
    or None when it is reachable: multicast, the most specific registry entry holding it says so,
    or an IPv6 address no entry holds lies outside global unicast. An IPv4-mapped address is
    left to its IPv4 address (the registry's entry for ::ffff:0:0/96 describes the IPv6 form on
    the wire, which a socket never sends)."""
    if (network := _containing(ip, _MULTICAST)) is not None:
        return "multicast", network
    if ip in _IPV4_MAPPED:
        return None
    entry = registry().entry_for(ip)
    if entry is None and isinstance(ip, ipaddress.IPv6Address) and ip not in _IPV6_GLOBAL_UNICAST:
        return "outside ipv6 global unicast", _IPV6_GLOBAL_UNICAST
    if entry is None or entry.reachable:
        return None
    return entry.name.lower(), entry.block


def _carried_ipv4(ip: IpAddress) -> tuple[str, ipaddress.IPv4Address] | None:
    """The form of an IPv6 address that carries an IPv4 address, and that address; None for
    any other address (:: and ::1 are IPv6's own, not IPv4-compatible)."""
    if isinstance(ip, ipaddress.IPv4Address) or int(ip) <= 1:
        return None
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    form = next((form for network, form in _CARRIERS if ip in network), None)
    return None if form is None else (form, ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF))


@dataclass(frozen=True)
class OutboundPolicy:
    """Globally reachable addresses may be reached unless `blocked` holds them; `allowed`
    overrides both."""

    blocked: tuple[IpNetwork, ...] = ()
    allowed: tuple[IpNetwork, ...] = ()

    @classmethod
    def from_settings(cls, block: Iterable[str] = (), allow: Iterable[str] = ()) -> OutboundPolicy:
        return cls(_networks(block), _networks(allow))

    def why_blocked(self, address: str) -> str | None:
        """Why the address may not be reached (the carried IPv4 address's reason first), or
        None when it may."""
        ip = ipaddress.ip_address(address)
        carried = _carried_ipv4(ip)
        judged = [ip] if carried is None else [ip, carried[1]]
        if any(_containing(each, self.allowed) is not None for each in judged):
            return None
        if carried is not None:
            form, ipv4 = carried
            if (reason := self._reason(ipv4, f"{ipv4} embedded in {form} address {address}")) is not None:
                return reason
        return self._reason(ip)

    def _reason(self, ip: IpAddress, carried: str | None = None) -> str | None:
        """Why `ip` may not be reached, or None; `carried` says how an IPv6 address carried it."""
        if (network := _containing(ip, self.blocked)) is not None:
            return f"{carried + ' is ' if carried else ''}in {network}, a range the gateway's settings block"
        if (unreachable := _unreachable_range(ip)) is None:
            return None
        name, network = unreachable
        return f"not globally routable ({name} {carried if carried else f'range {network}'})"


class GuardedTransport(httpx2.AsyncBaseTransport):
    """Resolves and checks each request's host before `inner` sees the request, and hands
    `inner` the address it checked (`CHECKED_ADDRESS`); `PinnedTransport` connects there."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, policy: OutboundPolicy,
                 resolver: Resolver = system_resolver) -> None:
        self._inner = inner
        self._policy = policy
        self._resolver = resolver

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = await self._resolver(host)
            except OSError as error:
                raise DestinationBlocked(f"{host} could not be resolved ({error})", request=request) from error
        if not addresses:
            raise DestinationBlocked(f"{host} resolves to no address", request=request)
        for address in addresses:
            if (reason := self._policy.why_blocked(address)) is not None:
                raise DestinationBlocked(f"{host} resolves to {address}, which the gateway's outbound policy "
                                         f"blocks: {reason}", request=request)
        request.extensions[CHECKED_ADDRESS] = addresses[0]
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Opens a connection to a host name only at the address its guard checked last for it
    (`checked`, by host as the URL spells it); a host with none is refused."""

    def __init__(self, checked: dict[str, str]) -> None:
        self._checked = checked
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        address = self._checked.get(host)
        if address is None:
            raise httpcore2.ConnectError(f"{host} was not checked by the outbound guard")
        return await self._backend.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("the outbound guard checks no Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class PinnedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's HTTP transport, connecting each request only to the address its guard checked
    (`CHECKED_ADDRESS`), never to a new lookup of the host name; a request without one is
    refused. The URL keeps the host name, so TLS sends it (SNI) and verifies the certificate
    against it, and connections are pooled by host name. httpx2's transport takes no network
    backend, so the pool it makes is replaced by the same pool (httpx2's default limits) given one."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context)
        self._checked: dict[str, str] = {}
        self._pool = httpcore2.AsyncConnectionPool(ssl_context=ssl_context, max_connections=100,
                                                   max_keepalive_connections=20, keepalive_expiry=5.0,
                                                   network_backend=_PinnedBackend(self._checked))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        address = request.extensions.get(CHECKED_ADDRESS)
        if address is None:
            raise DestinationBlocked(f"{request.url.host} was not checked by the outbound guard", request=request)
        self._checked[request.url.raw_host.decode("ascii")] = address
        return await super().handle_async_request(request)


@cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every pinned transport in the process, made on first use as httpx
    makes its default (the system's store, or what `SSL_CERT_FILE` or `SSL_CERT_DIR` names): a
    new one loads the CA bundle again (30 to 70 ms of CPU), once per gateway built otherwise (a
    harness run builds dozens). It is safe to share between threads and event loops."""
    return httpx2.create_ssl_context()


def guarded_client_factory(policy: OutboundPolicy, resolver: Resolver = system_resolver,
                           inner: Callable[[], httpx2.AsyncBaseTransport] | None = None,
                           ) -> Callable[..., httpx2.AsyncClient]:
    """An `httpx2.AsyncClient` factory for the `mcp` SDK's transports and the web search
    providers, every client guarded; `inner` makes the transport under the guard (default:
    pinned transports sharing one TLS context)."""
    inner = inner or (lambda: PinnedTransport(tls_context()))

    def factory(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        kwargs: dict[str, Any] = {"transport": GuardedTransport(inner(), policy, resolver),
                                  "timeout": timeout or httpx2.Timeout(30.0, read=300.0)}
        if headers is not None:
            kwargs["headers"] = headers
        if auth is not None:
            kwargs["auth"] = auth
        return httpx2.AsyncClient(**kwargs)

    return factory
