"""The outbound address policy: where the loop may connect (MCP servers, on both surfaces).

Before any connection the host is resolved (the resolver is a parameter, so tests use a fake
one) and every address it resolves to is checked. Blocked by default: loopback, private,
link-local (169.254.169.254 among them), multicast, CGNAT, IPv6 unique-local and unspecified
ranges, plus ranges the settings add; an allowlist overrides. A blocked destination fails
closed: the request never reaches the inner transport. Plain-HTTP requests are sent to the
address that was checked, so a second lookup cannot send them elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx2

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[list[str]]]

BLOCKED_BY_DEFAULT: dict[str, str] = {
    "0.0.0.0/8": "unspecified", "::/128": "unspecified",
    "127.0.0.0/8": "loopback", "::1/128": "loopback",
    "10.0.0.0/8": "private", "172.16.0.0/12": "private", "192.168.0.0/16": "private",
    "169.254.0.0/16": "link-local", "fe80::/10": "link-local",
    "224.0.0.0/4": "multicast", "ff00::/8": "multicast",
    "100.64.0.0/10": "carrier-grade NAT",
    "fc00::/7": "IPv6 unique local",
    "::ffff:0:0/96": "IPv4-mapped",
}


class DestinationBlocked(httpx2.TransportError):
    """The destination resolves to an address the outbound policy blocks."""


async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _networks(cidrs: Iterable[str]) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


@dataclass(frozen=True)
class OutboundPolicy:
    blocked: tuple[tuple[IpNetwork, str], ...]
    allowed: tuple[IpNetwork, ...] = ()

    @classmethod
    def from_settings(cls, block: Iterable[str] = (), allow: Iterable[str] = ()) -> OutboundPolicy:
        """The default blocked ranges plus `block`, with `allow` overriding both."""
        ranges = [(network, name) for cidr, name in BLOCKED_BY_DEFAULT.items() for network in _networks([cidr])]
        ranges += [(network, "blocked by the gateway's settings") for network in _networks(block)]
        return cls(tuple(ranges), _networks(allow))

    def why_blocked(self, address: str) -> str | None:
        """Why the address is blocked (the range's name), or None when it may be reached."""
        ip = ipaddress.ip_address(address)
        if any(ip in network for network in self.allowed):
            return None
        return next((f"{name} range {network}" for network, name in self.blocked if ip in network), None)


class GuardedTransport(httpx2.AsyncBaseTransport):
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
                raise DestinationBlocked(f"{host} resolves to {address}, in the {reason} that the gateway's "
                                         "outbound policy blocks", request=request)
        if request.url.scheme == "http":
            request.url = request.url.copy_with(host=addresses[0])
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client_factory(policy: OutboundPolicy, resolver: Resolver = system_resolver,
                           inner: Callable[[], httpx2.AsyncBaseTransport] = httpx2.AsyncHTTPTransport,
                           ) -> Callable[..., httpx2.AsyncClient]:
    """An `httpx2.AsyncClient` factory for the `mcp` SDK's transports, every client guarded."""

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
