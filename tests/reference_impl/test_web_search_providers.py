"""The web_search backends: the JSON-protocol provider against the real search fixture on
loopback, the outbound guard refusing it for real, Brave's replies (played by httpx2's
`MockTransport` under the guard: its service cannot be reached from here), the key kept out of every message, and the
`web_search:` settings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from responses_parity.fixtures.recording import fingerprint
from responses_parity.fixtures.search.app import SearchState, build_search_app
from responses_parity.fixtures.upstream.script import new_run_token
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.reference_impl.config import ConfigError, GatewayConfig
from responses_parity.reference_impl.outbound import OutboundPolicy, guarded_client_factory
from responses_parity.reference_impl.runtime import Runtime
from responses_parity.reference_impl.search_providers import (BRAVE_URL, BraveSearchProvider, HttpSearchProvider)
from responses_parity.reference_impl.web_search import SearchFailed, WebResult

KEY = "sk-search-5ecret-value"
LOOPBACK_ALLOWED = OutboundPolicy.from_settings(allow=["127.0.0.0/8"])
PAGES = [{"url": "https://docs.example.org/a", "title": "A", "snippet": "first"},
         {"url": "https://other.test/b", "title": "B", "snippet": "second"}]


async def public_resolver(host: str) -> list[str]:
    """Brave's host resolved to a globally routable address (a mock transport answers; nothing is sent)."""
    return ["93.184.215.14"]


@pytest.fixture(scope="module")
def fixture_server() -> Iterator[tuple[str, SearchState]]:
    state = SearchState()
    server = ServerThread(build_search_app(state)).start()
    try:
        yield server.url, state
    finally:
        server.stop()


def test_the_http_provider_finds_what_the_fixture_was_given_and_sends_the_key(
        fixture_server: tuple[str, SearchState]) -> None:
    url, state = fixture_server
    run, query = new_run_token(), f"providers {new_run_token()}"
    assert httpx2.put(f"{url}/__parity/runs/{run}", json={query: PAGES}).status_code == 204
    provider = HttpSearchProvider(url, guarded_client_factory(LOOPBACK_ALLOWED), api_key=KEY)
    found = asyncio.run(provider.search(query, max_results=5, allowed_domains=("example.org",)))
    assert found == [WebResult(**PAGES[0])]
    [logged] = state.searches[run]
    assert (logged["max_results"], logged["allowed_domains"]) == (5, ["example.org"])
    assert logged["headers"]["authorization"] == fingerprint(f"Bearer {KEY}")


def test_the_outbound_guard_refuses_a_blocked_backend_before_it_is_reached(
        fixture_server: tuple[str, SearchState]) -> None:
    url, state = fixture_server
    query = f"blocked {new_run_token()}"
    provider = HttpSearchProvider(url, guarded_client_factory(OutboundPolicy()), api_key=KEY)
    with pytest.raises(SearchFailed) as failed:
        asyncio.run(provider.search(query, max_results=3))
    assert "outbound policy" in str(failed.value) and "loopback" in str(failed.value)
    assert KEY not in str(failed.value)
    assert query not in [entry["query"] for entry in state.unmatched]  # nothing reached the fixture


def test_the_http_provider_says_what_a_backend_that_does_not_speak_the_protocol_answered(
        fixture_server: tuple[str, SearchState]) -> None:
    url, _ = fixture_server
    provider = HttpSearchProvider(f"{url}/__parity", guarded_client_factory(LOOPBACK_ALLOWED), api_key=KEY)
    with pytest.raises(SearchFailed, match=r"answered HTTP 404"):
        asyncio.run(provider.search("anything", max_results=3))


BraveReply = Callable[[httpx2.Request], httpx2.Response] | httpx2.Response | httpx2.TransportError


class Brave:
    """Brave's service under the outbound guard: each `GET BRAVE_URL` is answered by `reply` (a
    function of the request, a response, or a transport error raised) and kept; anything else
    fails the test."""

    def __init__(self, reply: BraveReply) -> None:
        self.reply = reply
        self.requests: list[httpx2.Request] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        assert (request.method, request.url.copy_with(query=None)) == ("GET", httpx2.URL(BRAVE_URL)), request.url
        self.requests.append(request)
        if isinstance(self.reply, httpx2.TransportError):
            raise self.reply
        return self.reply if isinstance(self.reply, httpx2.Response) else self.reply(request)


def brave(service: Brave, **settings: Any) -> BraveSearchProvider:
    clients = guarded_client_factory(OutboundPolicy(), public_resolver,
                                     inner=lambda: httpx2.MockTransport(service.answer))
    return BraveSearchProvider(KEY, clients, **settings)


def brave_result(url: str, title: str, description: str) -> dict[str, Any]:
    return {"type": "search_result", "url": url, "title": title, "description": description, "language": "en"}


def test_brave_results_become_plain_text_pages_and_the_request_says_what_was_asked() -> None:
    service = Brave(httpx2.Response(200, json={"type": "search", "query": {"original": "q"}, "web": {
        "type": "search", "results": [
            brave_result("https://docs.example.org/a", "<strong>Parity</strong> &amp; you",
                         "the <strong>best</strong>"),
            brave_result("https://elsewhere.test/b", "B", "off the allowed domains"),
            {"type": "search_result", "title": "no URL"},
            brave_result("https://example.org/c", "C", "third")]}}))
    found = asyncio.run(brave(service).search("parity", max_results=50, allowed_domains=("example.org", "x.test")))
    assert found == [WebResult("https://docs.example.org/a", "Parity & you", "the best"),
                     WebResult("https://example.org/c", "C", "third")]
    [sent] = service.requests
    assert sent.url.params["q"] == "parity (site:example.org OR site:x.test)"
    assert sent.url.params["count"] == "20"  # Brave's most per request
    assert sent.headers["x-subscription-token"] == KEY and KEY not in str(sent.url)


def test_brave_cuts_to_max_results_and_finds_nothing_without_a_web_section() -> None:
    answers = {"many": {"web": {"results": [brave_result(f"https://example.org/{n}", str(n), "") for n in range(5)]}},
               "nothing": {"type": "search", "query": {"original": "nothing"}}}
    service = Brave(lambda request: httpx2.Response(200, json=answers[request.url.params["q"]]))
    assert [page.title for page in asyncio.run(brave(service).search("many", max_results=2))] == ["0", "1"]
    assert asyncio.run(brave(service).search("nothing", max_results=2)) == []


@pytest.mark.parametrize(("reply", "says"), [
    (httpx2.Response(422, json={"type": "ErrorResponse", "error": {
        "id": "e1", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID",
        "detail": f"The provided subscription token {KEY} is invalid."}}), r"HTTP 422: The provided subscription "
                                                                           r"token \[api key\] is invalid"),
    (httpx2.Response(429, json={"type": "ErrorResponse", "error": {
        "status": 429, "code": "RATE_LIMITED", "detail": "Request rate limit exceeded for plan."}}),
     "HTTP 429: Request rate limit exceeded"),
    (httpx2.Response(502, text="<html>Bad gateway</html>"), "HTTP 502: <html>Bad gateway"),
    (httpx2.Response(200, text="not json"), "not JSON"),
    (httpx2.Response(200, json={"web": {"results": {"url": "x"}}}), r"`web.results` is not a list"),
    (httpx2.Response(200, json=["a list"]), "not a JSON object"),
])
def test_brave_failures_say_what_went_wrong_without_the_key(reply: httpx2.Response, says: str) -> None:
    with pytest.raises(SearchFailed, match=says) as failed:
        asyncio.run(brave(Brave(reply)).search("q", max_results=3))
    assert str(failed.value).startswith("Brave Search") and KEY not in str(failed.value)


def test_a_brave_timeout_is_a_search_failure() -> None:
    with pytest.raises(SearchFailed, match=r"did not answer within 0\.5s"):
        asyncio.run(brave(Brave(httpx2.ReadTimeout("slow")), timeout_s=0.5).search("q", max_results=3))


def settings(web_search: Any) -> dict[str, Any]:
    return {"upstream": {"url": "http://127.0.0.1:9/v1"}, "web_search": web_search}


def test_the_runtime_builds_the_configured_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_TEST_SEARCH_KEY", KEY)
    http = GatewayConfig.from_mapping(settings({"provider": "http", "url": "http://127.0.0.1:9",
                                                "max_results": 7, "timeout_s": 3}))
    assert (http.web_search.max_results, http.web_search.timeout_s) == (7, 3.0)
    assert isinstance(Runtime.build(http).web_search, HttpSearchProvider)
    keyed = GatewayConfig.from_mapping(settings({"provider": "brave", "api_key_env": "PARITY_TEST_SEARCH_KEY"}))
    assert isinstance(Runtime.build(keyed).web_search, BraveSearchProvider)
    assert KEY not in repr(keyed)
    assert Runtime.build(GatewayConfig.from_mapping(settings(None))).web_search is None


@pytest.mark.parametrize(("section", "named"), [
    ({"url": "http://127.0.0.1:9"}, "web_search.provider: required"),
    ({"provider": "bing"}, "web_search.provider: expected http or brave"),
    ({"provider": "http"}, "web_search.url: required"),
    ({"provider": "http", "url": "127.0.0.1:9"}, "web_search.url: expected an http"),
    ({"provider": "brave"}, "web_search.api_key_env: the brave provider needs an API key"),
    ({"provider": "brave", "api_key_env": "PARITY_TEST_UNSET_VARIABLE"},
     "web_search.api_key_env: the variable PARITY_TEST_UNSET_VARIABLE is not set"),
    ({"provider": "http", "url": "http://a.test", "timeout_s": 0}, "web_search.timeout_s: must be > 0"),
    ({"provider": "http", "url": "http://a.test", "timeout_s": "soon"}, "web_search.timeout_s: expected a number"),
    ({"provider": "http", "url": "http://a.test", "max_results": 21}, "web_search.max_results: must be 1..20"),
    ({"provider": "http", "url": "http://a.test", "max_results": 2.5}, "web_search.max_results: expected a number"),
    ({"provider": "http", "url": "http://a.test", "api_key": KEY}, "web_search: unknown field(s) ['api_key']"),
    ("http", "web_search: expected a mapping"),
])
def test_bad_web_search_settings_name_the_field(monkeypatch: pytest.MonkeyPatch, section: Any, named: str) -> None:
    monkeypatch.delenv("PARITY_TEST_UNSET_VARIABLE", raising=False)
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_mapping(settings(section))
    assert named in str(refused.value) and KEY not in str(refused.value)
