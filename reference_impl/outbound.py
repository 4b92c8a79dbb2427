"""The outbound address policy: where the loop may connect (MCP servers, on both surfaces).

Before any connection the host is resolved (the resolver is a parameter, so tests use a fake
one) and every address it resolves to is checked. By default only globally routable unicast
addresses are reached: what Python's `ipaddress` calls `is_global` (the IANA special-purpose
registries), less multicast, and less the registry entries that interpreters without CPython's
fix for gh-113171 (3.11.7 among them) still call global. The `block` setting adds ranges; the
`allow` setting overrides everything.

An IPv6 address that carries an IPv4 address is judged by both: IPv4-mapped (::ffff:0:0/96),
IPv4-compatible (::/96, deprecated), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96,
and the local-use 64:ff9b:1::/48 read as a /96) and 6to4 (2002::/16, the IPv4 address in bits
16..48). Either one in an allowed range lets it through, so allowing 127.0.0.0/8 also allows
::ffff:127.0.0.1; otherwise both must pass.

A blocked destination fails closed: the request never reaches the inner transport, and the
error names the range, and for a carried address the form that carried it. Plain-HTTP
requests are sent to the address that was checked, so a second lookup cannot send them
elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx2

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[list[str]]]


def _networks(cidrs: Iterable[str]) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _named(names: dict[str, list[str]]) -> tuple[tuple[IpNetwork, str], ...]:
    return tuple((network, name) for name, cidrs in names.items() for network in _networks(cidrs))


def _containing(ip: IpAddress, networks: Iterable[IpNetwork]) -> IpNetwork | None:
    return next((network for network in networks if ip in network), None)


# The registry entries that CPython's ipaddress encodes since gh-113171 (3.12.4, 3.13).
_NOT_GLOBAL_SINCE_GH_113171 = _networks(["192.0.0.0/24", "64:ff9b:1::/48", "2002::/16"])
_STILL_GLOBAL_SINCE_GH_113171 = _networks(["192.0.0.9/32", "192.0.0.10/32"])

_CARRIERS = _named({"IPv4-compatible": ["::/96"], "IPv4-translated": ["::ffff:0:0:0/96"],
                    "NAT64": ["64:ff9b::/96"], "NAT64 local-use": ["64:ff9b:1::/48"]})
"""Forms that carry an IPv4 address in their last 32 bits (`ipaddress` itself reads the
IPv4-mapped and 6to4 ones)."""

_RANGE_NAMES = _named({
    "unspecified": ["0.0.0.0/32", "::/128"], "this-network": ["0.0.0.0/8"], "loopback": ["127.0.0.0/8", "::1/128"],
    "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], "carrier-grade NAT": ["100.64.0.0/10"],
    "link-local": ["169.254.0.0/16", "fe80::/10"], "IETF protocol assignments": ["192.0.0.0/24", "2001::/23"],
    "documentation": ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"],
    "benchmarking": ["198.18.0.0/15"], "multicast": ["224.0.0.0/4", "ff00::/8"],
    "limited broadcast": ["255.255.255.255/32"], "reserved": ["240.0.0.0/4"], "discard-only": ["100::/64"],
    "NAT64 local-use": ["64:ff9b:1::/48"], "6to4": ["2002::/16"], "unique local": ["fc00::/7"],
})
"""The registries' ranges by name, the most specific first: for messages only, since what is
blocked is decided by `_globally_routable`."""


class DestinationBlocked(httpx2.TransportError):
    """The destination resolves to an address the outbound policy blocks."""


async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _globally_routable(ip: IpAddress) -> bool:
    """Whether the address is a globally routable unicast one, by the IANA registries."""
    if ip.is_multicast:
        return False
    if _containing(ip, _STILL_GLOBAL_SINCE_GH_113171) is not None:
        return True
    return ip.is_global and _containing(ip, _NOT_GLOBAL_SINCE_GH_113171) is None


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


def _range_name(ip: IpAddress) -> tuple[str, IpNetwork | None]:
    return next(((name, network) for network, name in _RANGE_NAMES if ip in network), ("special-purpose", None))


@dataclass(frozen=True)
class OutboundPolicy:
    """Globally routable addresses may be reached unless `blocked` holds them; `allowed`
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
        if _globally_routable(ip):
            return None
        name, network = _range_name(ip)
        if carried is not None:
            return f"not globally routable ({name} {carried})"
        return f"not globally routable ({name} {f'range {network}' if network else 'address'})"


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
                raise DestinationBlocked(f"{host} resolves to {address}, which the gateway's outbound policy "
                                         f"blocks: {reason}", request=request)
        if request.url.scheme == "http":
            request.url = request.url.copy_with(host=addresses[0])
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _transport_sharing_one_tls_context() -> Callable[[], httpx2.AsyncBaseTransport]:
    """Transports that share one TLS context, made on first use: a new context loads the CA
    bundle again (about 30 ms of CPU), once per MCP session otherwise."""
    context: list[ssl.SSLContext] = []

    def transport() -> httpx2.AsyncBaseTransport:
        if not context:
            context.append(httpx2.create_ssl_context())
        return httpx2.AsyncHTTPTransport(verify=context[0])

    return transport


def guarded_client_factory(policy: OutboundPolicy, resolver: Resolver = system_resolver,
                           inner: Callable[[], httpx2.AsyncBaseTransport] | None = None,
                           ) -> Callable[..., httpx2.AsyncClient]:
    """An `httpx2.AsyncClient` factory for the `mcp` SDK's transports, every client guarded;
    `inner` makes the transport under the guard (default: HTTP transports sharing one TLS context)."""
    inner = inner or _transport_sharing_one_tls_context()

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
