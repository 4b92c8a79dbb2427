"""The `web_search` backends the reference gateway can be configured with.

- `HttpSearchProvider` speaks the small JSON protocol of `web_search` (the search fixture, or
  any service that adopts it); an API key, when configured, goes as `Authorization: Bearer`.
- `BraveSearchProvider` calls Brave's Web Search API, for people who run the gateway for real.
  Brave rather than SearXNG: it is a hosted API with a documented, versioned reply
  (`web.results[]` of `url`, `title`, `description`), so the default outbound policy (globally
  routable addresses only) reaches it with no `allow` entry, and the adapter has one contract
  to keep; a SearXNG instance's JSON depends on its engines and settings, and it usually runs
  on a private address the policy blocks. Brave has no domain filter, so `allowed_domains`
  become `site:` terms of the query and the results are filtered here as well.

Both reach their backend only through the gateway's guarded HTTP clients (the outbound
policy), and every failure is a `SearchFailed` whose message names the backend and what went
wrong, never the API key (it travels in a header, never in a URL).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import httpx2

from .config import WebSearchConfig
from .web_search import SearchFailed, WebResult, WebSearchProvider, within_domains

ClientFactory = Callable[..., httpx2.AsyncClient]
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
BRAVE_MAX_COUNT = 20
"""Brave answers at most this many results per request."""
_MARKUP = re.compile(r"<[^>]+>")


async def _fetch_json(backend: str, clients: ClientFactory, method: str, url: str, *, headers: dict[str, str],
                      api_key: str | None, timeout_s: float, **request: Any) -> Any:
    """The JSON body of a 200 answer; any other outcome raises `SearchFailed` naming `backend`,
    with `api_key` cut out of what the backend said (the headers are never part of a message)."""
    try:
        async with clients(headers=headers, timeout=httpx2.Timeout(timeout_s)) as client:
            response = await client.request(method, url, **request)
    except httpx2.TimeoutException as error:
        raise SearchFailed(f"{backend} did not answer within {timeout_s:g}s") from error
    except httpx2.HTTPError as error:
        raise SearchFailed(f"{backend} could not be reached: {error}") from error
    if response.status_code != 200:
        reason = _reason(response)
        if api_key:
            reason = reason.replace(api_key, "[api key]")
        raise SearchFailed(f"{backend} answered HTTP {response.status_code}: {reason}")
    try:
        return response.json()
    except ValueError as error:
        raise SearchFailed(f"{backend} answered HTTP 200 with a body that is not JSON") from error


def _reason(response: httpx2.Response) -> str:
    """What an error answer says, from the fields backends put it in, or its first 200 characters."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or "(no body)"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("detail") or error.get("message") or error.get("code") or error)[:200]
    return str(error if error is not None else body)[:200]


def _expect(condition: bool, backend: str, what: str) -> None:
    if not condition:
        raise SearchFailed(f"{backend} answered an unexpected body: {what}")


class HttpSearchProvider:
    """A backend that speaks `web_search`'s JSON protocol at `url` (`POST <url>/search`)."""

    def __init__(self, url: str, clients: ClientFactory, *, api_key: str | None = None,
                 timeout_s: float = 10.0) -> None:
        self._endpoint = f"{url.rstrip('/')}/search"
        self._clients = clients
        self._api_key = api_key
        self._headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s

    async def search(self, query: str, *, max_results: int, allowed_domains: tuple[str, ...] = ()) -> list[WebResult]:
        backend = f"the search backend at {self._endpoint}"
        body = await _fetch_json(backend, self._clients, "POST", self._endpoint, headers=self._headers,
                                 api_key=self._api_key, timeout_s=self._timeout_s,
                                 json={"query": query, "max_results": max_results,
                                       "allowed_domains": list(allowed_domains)})
        results = body.get("results") if isinstance(body, dict) else None
        _expect(isinstance(results, list), backend, "no `results` list")
        found = []
        for index, result in enumerate(results):
            _expect(isinstance(result, dict) and all(isinstance(result.get(key), str)
                                                     for key in ("url", "title", "snippet")),
                    backend, f"results[{index}] needs url, title and snippet strings")
            found.append(WebResult(result["url"], result["title"], result["snippet"]))
        return found[:max_results]


class BraveSearchProvider:
    """Brave's Web Search API (`GET <url>?q=...&count=...`, key in `X-Subscription-Token`)."""

    def __init__(self, api_key: str, clients: ClientFactory, *, url: str = BRAVE_URL, timeout_s: float = 10.0) -> None:
        self._url = url
        self._clients = clients
        self._api_key = api_key
        self._headers = {"x-subscription-token": api_key, "accept": "application/json"}
        self._timeout_s = timeout_s

    async def search(self, query: str, *, max_results: int, allowed_domains: tuple[str, ...] = ()) -> list[WebResult]:
        backend = "Brave Search"
        sites = " OR ".join(f"site:{domain}" for domain in allowed_domains)
        params = {"q": f"{query} ({sites})" if sites else query, "count": str(min(max_results, BRAVE_MAX_COUNT))}
        body = await _fetch_json(backend, self._clients, "GET", self._url, headers=self._headers,
                                 api_key=self._api_key, timeout_s=self._timeout_s, params=params)
        _expect(isinstance(body, dict), backend, "not a JSON object")
        web = body.get("web", {"results": []})  # Brave leaves `web` out when nothing was found
        results = web.get("results") if isinstance(web, dict) else None
        _expect(isinstance(results, list), backend, "`web.results` is not a list")
        found = []
        for result in results:
            if not isinstance(result, dict) or not isinstance(result.get("url"), str):
                continue  # a result without a URL cannot be cited
            if within_domains(result["url"], allowed_domains):
                found.append(WebResult(result["url"], _plain(result.get("title")), _plain(result.get("description"))))
        return found[:max_results]


def _plain(text: Any) -> str:
    """Brave's text without its highlighting markup (`<strong>`) and HTML entities."""
    return html.unescape(_MARKUP.sub("", text)) if isinstance(text, str) else ""


def search_provider(config: WebSearchConfig, clients: ClientFactory) -> WebSearchProvider:
    """The backend `config` describes, reaching it through `clients` (the guarded ones)."""
    if config.provider == "brave":
        assert config.api_key is not None  # WebSearchConfig refuses brave without a key
        return BraveSearchProvider(config.api_key, clients, url=config.url or BRAVE_URL, timeout_s=config.timeout_s)
    assert config.url is not None  # WebSearchConfig refuses http without a URL
    return HttpSearchProvider(config.url, clients, api_key=config.api_key, timeout_s=config.timeout_s)
