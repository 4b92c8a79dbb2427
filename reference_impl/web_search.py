"""Web search for the `web_search` tool: what the loop asks of a search backend.

The loop calls a `WebSearchProvider`; which one is the gateway's configuration. Every
provider reaches its backend through the gateway's guarded HTTP clients (the outbound policy),
and a backend that fails raises `SearchFailed`, whose message the model and the client read.

The search fixture (`fixtures/search`) and `HttpSearchProvider` speak this small JSON protocol:

    POST <url>/search  {"query": str, "max_results": int, "allowed_domains": [str, ...]}
    200 {"results": [{"url": str, "title": str, "snippet": str}, ...]}   (best first)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit


@dataclass(frozen=True)
class WebResult:
    """One page a search found."""

    url: str
    title: str
    snippet: str


class SearchFailed(Exception):
    """The backend could not answer; the message says why, without secrets."""


class WebSearchProvider(Protocol):
    async def search(self, query: str, *, max_results: int, allowed_domains: tuple[str, ...] = ()) -> list[WebResult]:
        """At most `max_results` pages for `query`, best first; with `allowed_domains`, only
        pages on those domains (or their subdomains). Raises `SearchFailed`."""
        ...


def within_domains(url: str, domains: Iterable[str]) -> bool:
    """Whether `url`'s host is one of `domains` or a subdomain of one (case-insensitive; a
    domain may be written with a trailing dot). No domains: every URL is."""
    wanted = [domain.strip().lower().rstrip(".") for domain in domains]
    if not wanted:
        return True
    host = (urlsplit(url).hostname or "").rstrip(".")
    return any(host == domain or host.endswith(f".{domain}") for domain in wanted if domain)
