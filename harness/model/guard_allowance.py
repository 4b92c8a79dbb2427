"""What a gateway needs to reach the MCP fixtures: the addresses and ports an outbound guard
must allow, and the reference gateway's setting that allows them. `parity serve` prints them,
and a run says them when a gateway did not reach a fixture."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class GuardAllowance:
    """The address ranges (one host each) and the ports an outbound guard must let through."""

    ranges: tuple[str, ...]
    ports: tuple[int, ...]

    @classmethod
    def for_urls(cls, urls: Iterable[str]) -> GuardAllowance:
        ranges: set[str] = set()
        ports: set[int] = set()
        for url in urls:
            parts = urlsplit(url)
            host = parts.hostname or ""
            try:
                address = ipaddress.ip_address(host)
                ranges.add(f"{address}/{address.max_prefixlen}")
            except ValueError:
                ranges.add(host)  # a name: a guard that allows names allows it as it is
            ports.add(parts.port or (443 if parts.scheme == "https" else 80))
        return cls(tuple(sorted(ranges)), tuple(sorted(ports)))

    def ports_text(self) -> str:
        """`port 8643`, `ports 8643-8645`, or `ports 8643, 8650`."""
        if len(self.ports) == 1:
            return f"port {self.ports[0]}"
        if list(self.ports) == list(range(self.ports[0], self.ports[-1] + 1)):
            return f"ports {self.ports[0]}-{self.ports[-1]}"
        return "ports " + ", ".join(map(str, self.ports))

    def reference_setting(self) -> str:
        """The line of the reference gateway's settings file that allows these addresses."""
        return f"outbound: {{allow: [{', '.join(self.ranges)}]}}"

    def advice(self) -> str:
        """One sentence for a gateway that did not reach the fixtures."""
        return (f"if it has an outbound guard, allow {', '.join(self.ranges)} ({self.ports_text()}); for the "
                f"reference gateway that is `{self.reference_setting()}`")
