"""IANA's special-purpose address registries, as data the project ships.

`iana_special_addresses.csv`, beside this module, holds every entry of the IPv4 and IPv6
Special-Purpose Address Registries (block, name, RFC, termination date, "Globally Reachable"),
and in its header where the rows come from and the registries' "Last Updated" date. The
outbound guard judges addresses by it rather than by the running Python's `ipaddress.is_global`,
whose table is as old as the interpreter (3.11's lacks 5f00::/16, 3fff::/20, 100:0:0:1::/64 and
192.88.99.0/24).

An address is judged by the most specific entry that holds it, so a globally reachable entry
inside one that is not (192.0.0.9/32 in 192.0.0.0/24, 2001:1::1/128 in 2001::/23) wins.
"""

from __future__ import annotations

import csv
import ipaddress
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DATA_FILE = "iana_special_addresses.csv"
_LAST_UPDATED = re.compile(r"^# Last Updated: (\d{4}-\d{2}-\d{2})\b", re.MULTILINE)


@dataclass(frozen=True)
class SpecialEntry:
    """One registry entry. `globally_reachable` is the registry's word for it: "True", "False",
    "N/A", or "" for a terminated entry."""

    block: IpNetwork
    name: str
    rfc: str
    globally_reachable: str

    @property
    def reachable(self) -> bool:
        """Whether the registry says the entry is globally reachable (N/A and a terminated
        entry's empty value are not a yes)."""
        return self.globally_reachable == "True"


@dataclass(frozen=True)
class Registry:
    last_updated: str
    entries: tuple[SpecialEntry, ...]

    def entry_for(self, ip: IpAddress) -> SpecialEntry | None:
        """The most specific entry holding `ip`, or None when no entry does."""
        holding = (entry for entry in self.entries if ip in entry.block)
        return max(holding, key=lambda entry: entry.block.prefixlen, default=None)


def parse_registry(text: str) -> Registry:
    """The registries in `text`, in the data file's format."""
    date = _LAST_UPDATED.search(text)
    if date is None:
        raise ValueError(f"{DATA_FILE} states no '# Last Updated: YYYY-MM-DD' line")
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    entries = tuple(SpecialEntry(ipaddress.ip_network(row["Address Block"]), row["Name"], row["RFC"],
                                 row["Globally Reachable"]) for row in rows)
    return Registry(date.group(1), entries)


@cache
def registry() -> Registry:
    """The registries the project ships (read once)."""
    return parse_registry(files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8"))
