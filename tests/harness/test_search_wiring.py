"""The harness's search wiring, with the real search fixture on loopback: a scenario's
`search:` is registered for its run and forgotten afterwards (a run without one asks nothing of
the fixture), each search is attributed to the step that caused it and judged by
`expect.upstream.searches`, runs that state one query never run at once, and the loader refuses
two scenarios that state one query differently.

The reference gateway does not search yet, so the gateway here is the reference gateway behind
a front that searches first, as a web_search loop would: for a request whose `metadata` names
a `search`, it asks the search fixture (the same `HttpSearchProvider` the gateway uses) and
keeps what it found."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import RunScenario, write_scenario
from faulty_gateways import read_body, replaying

from responses_parity.harness.engine.fixture_client import FixtureClient
from responses_parity.harness.engine.runner import Engine
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.scenario.loader import LoadedScenario, load, load_file
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.outbound import OutboundPolicy, guarded_client_factory
from responses_parity.reference_impl.search_providers import HttpSearchProvider
from responses_parity.reference_impl.web_search import WebResult

PAGES = [{"url": "https://docs.example.org/a", "title": "A", "snippet": "first"}]


class SearchingFront:
    """ASGI: before a `POST /v1/responses` whose `metadata.search` names a query, search for it."""

    def __init__(self, inner: Any, search_url: str) -> None:
        self.inner = inner
        self.provider = HttpSearchProvider(search_url, guarded_client_factory(
            OutboundPolicy.from_settings(allow=["127.0.0.0/8"])))
        self.found: list[tuple[str, list[WebResult]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/responses" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body = await read_body(receive)
        query = (json.loads(body).get("metadata") or {}).get("search")
        if query:
            self.found.append((query, await self.provider.search(query, max_results=3)))
        await self.inner(scope, replaying(body, receive), send)


@pytest.fixture(scope="module")
def front(stack: Stack) -> Iterator[tuple[str, SearchingFront]]:
    assert stack.upstream_url is not None and stack.search_url is not None
    app = SearchingFront(build_gateway_app(reference_config(stack.upstream_url, stack.search_url)), stack.search_url)
    server = ServerThread(app).start()
    try:
        yield server.url, app
    finally:
        server.stop()


def scenario(query: str, searches: list[list[str]], expected: list[list[str]], id_: str = "searching") -> str:
    """A scenario whose step n searches `searches[n]` and expects `expected[n]`."""
    steps = "".join(f"""
          - id: step{n}
            request: {{model: "{{{{model}}}}", input: "look it up", metadata: {json.dumps(dict(
                search=said[0]) if said else {})}}}
            model: [{{text: "found it"}}]
            expect: {{status: completed, upstream: {{searches: {json.dumps(wanted)}}}}}""" for n, (said, wanted)
                    in enumerate(zip(searches, expected, strict=True)))
    return f"""
        id: {id_}
        title: a gateway that searches
        evidence: {{contract: "web_search", unrecorded: true}}
        search:
          - {{query: {json.dumps(query)}, results: {json.dumps(PAGES)}}}
        steps:{steps}
    """


def test_searches_are_found_attributed_to_their_step_and_judged(
        run_scenario: RunScenario, front: tuple[str, SearchingFront], stack: Stack) -> None:
    url, app = front
    result = run_scenario(scenario("parity news", [[], ["parity news"]], [[], ["parity news"]]), target_url=url)
    assert result.outcome == "pass", result.findings
    assert [search["query"] for search in result.steps[1].observed.searches] == ["parity news"]
    assert result.steps[0].observed.searches == []
    assert app.found[-1] == ("parity news", [WebResult(**PAGES[0])])
    # the run is over: the fixture forgot what it registered
    later = asyncio.run(app.provider.search("parity news", max_results=3))
    assert later == []


def test_a_search_that_differs_from_expect_upstream_searches_fails_naming_both(
        run_scenario: RunScenario, front: tuple[str, SearchingFront]) -> None:
    url, _ = front
    result = run_scenario(scenario("parity weather", [["parity weather"]], [["parity forecast"]]), target_url=url)
    assert result.outcome == "fail"
    [finding] = [finding for _, finding in result.findings if finding.rule == "expect.upstream.searches"]
    assert "['parity weather']" in finding.message and "['parity forecast']" in finding.message


def test_a_query_no_scenario_stated_finds_nothing_and_still_counts_as_searched_elsewhere(
        run_scenario: RunScenario, front: tuple[str, SearchingFront], stack: Stack) -> None:
    url, app = front
    result = run_scenario(scenario("stated query", [["unstated query"]], [[]]), target_url=url)
    assert result.outcome == "pass", result.findings  # the fixture logs it as unmatched, not for the run
    assert app.found[-1] == ("unstated query", [])
    unmatched = httpx2.get(f"{stack.search_url}/__parity/unmatched").json()["searches"]
    assert "unstated query" in [search["query"] for search in unmatched]


def test_both_modes_of_one_scenario_each_see_only_their_own_search(
        front: tuple[str, SearchingFront], stack: Stack, tmp_path: Path) -> None:
    url, _ = front
    path = write_scenario(tmp_path, scenario("parity both modes", [["parity both modes"]] * 2,
                                             [["parity both modes"]] * 2))
    loaded = LoadedScenario(load_file(path), path)

    async def both() -> list[Any]:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20)) as http:
            engine = Engine(Target("front", url, timeout_s=20), http,
                            FixtureClient(http, stack.upstream_url or "", stack.mcp, stack.search_url))
            return await engine.run_all([(loaded, "nonstream"), (loaded, "stream")], jobs=2)

    results = asyncio.run(both())
    assert [result.outcome for result in results] == ["pass", "pass"], [r.findings for r in results]


def test_a_scenario_that_states_searches_cannot_run_without_a_search_fixture(
        stack: Stack, front: tuple[str, SearchingFront], tmp_path: Path) -> None:
    url, _ = front
    path = write_scenario(tmp_path, scenario("parity nowhere", [[]], [[]]))

    async def without_search_fixture() -> Any:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20)) as http:
            engine = Engine(Target("front", url, timeout_s=20), http,
                            FixtureClient(http, stack.upstream_url or "", stack.mcp))
            return await engine.run(LoadedScenario(load_file(path), path), "nonstream")

    result = asyncio.run(without_search_fixture())
    assert result.outcome == "could_not_run"
    assert "announces no search fixture" in result.steps[0].error


def test_the_loader_refuses_one_query_stated_with_other_results_naming_both_files(tmp_path: Path) -> None:
    write_scenario(tmp_path, scenario("shared query", [[]], [[]], "first"), "a.yaml")
    write_scenario(tmp_path, scenario("shared query", [[]], [[]], "same"), "b.yaml")
    write_scenario(tmp_path, scenario("shared query", [[]], [[]], "other").replace('"snippet": "first"',
                                                                                   '"snippet": "changed"'), "c.yaml")
    catalogue = load([tmp_path])
    assert sorted(loaded.scenario.id for loaded in catalogue.scenarios) == ["first", "same"]
    [error] = catalogue.errors
    assert error.path.name == "c.yaml" and "a.yaml" in error.message and "'shared query'" in error.message


def test_a_scenario_may_not_state_one_query_twice(tmp_path: Path) -> None:
    text = scenario("twice", [[]], [[]]).replace("        steps:", """          - {query: twice, results: []}
        steps:""")
    problems = load_file(write_scenario(tmp_path, text))
    assert isinstance(problems, list) and any("the query 'twice' is stated twice" in p for p in problems), problems


def test_a_run_that_states_no_searches_asks_nothing_of_the_search_fixture(
        stack: Stack, front: tuple[str, SearchingFront], tmp_path: Path) -> None:
    """The fixture logs a search only for the run that stated its query, so a run without
    `search:` registers nothing there, and reads and forgets nothing: its searches are none. The
    upstream's log is read as it is forgotten, in one request."""
    url, app = front
    path = write_scenario(tmp_path, """
        id: silent
        title: a gateway that searches what no one stated
        evidence: {contract: "web_search", unrecorded: true}
        steps:
          - id: ask
            request: {model: "{{model}}", input: "look it up", metadata: {search: "parity unstated"}}
            model: [{text: "found it"}]
            expect: {status: completed, upstream: {searches: [], model_calls: 1}}
    """)
    sent: list[tuple[str, str]] = []

    async def record(request: httpx2.Request) -> None:
        sent.append((request.method, str(request.url)))

    async def run() -> Any:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20), event_hooks={"request": [record]}) as http:
            engine = Engine(Target("front", url, timeout_s=20), http,
                            FixtureClient(http, stack.upstream_url or "", stack.mcp, stack.search_url))
            return await engine.run(LoadedScenario(load_file(path), path), "nonstream")

    result = asyncio.run(run())
    assert result.outcome == "pass", result.findings
    assert app.found[-1] == ("parity unstated", [])
    assert stack.search_url is not None and not [to for _, to in sent if to.startswith(stack.search_url)], sent
    upstream_log = [method for method, to in sent if to.startswith(f"{stack.upstream_url}/__parity/runs/")]
    assert upstream_log == ["PUT", "DELETE"], sent
