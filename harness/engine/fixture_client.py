"""The harness's side of the fixtures: register a run's script with the scripted upstream and
what its web searches find with the search fixture, and read back what the gateway sent to
them and to the MCP fixture servers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

import httpx2

from ...fixtures.upstream.script import RunScript
from ..errors import HarnessError
from ..model.observed import Observed
from ..scenario.fixtures import McpFixture


class FixtureClient:
    def __init__(self, http: httpx2.AsyncClient, upstream_url: str, mcp: Mapping[str, McpFixture],
                 search_url: str | None = None) -> None:
        """`search_url`: the search fixture's base URL (None: there is none, and a run that
        states what searches find cannot run)."""
        self._http = http
        self._upstream = upstream_url.rstrip("/")
        self.mcp = mcp
        self._search = search_url.rstrip("/") if search_url else None
        self._searching: set[str] = set()
        """The runs that told the search fixture what their searches find (it logs no other's), until
        they are forgotten."""

    async def _read(self, url: str, method: str = "GET") -> Any:
        """A fixture's log (`DELETE`: which it forgets as it answers)."""
        try:
            response = await self._http.request(method, url)
            response.raise_for_status()
            return response.json()
        except (httpx2.HTTPError, ValueError) as error:
            raise HarnessError(f"cannot read the fixture log at {url}: {type(error).__name__} {error}") from error

    async def register(self, run: str, script: RunScript) -> None:
        url = f"{self._upstream}/__parity/runs/{run}"
        try:
            response = await self._http.put(url, json=script.model_dump(mode="json"))
        except httpx2.HTTPError as error:
            raise HarnessError(f"the scripted upstream at {self._upstream} is not reachable: {error}") from error
        if response.status_code != 204:
            raise HarnessError(f"the scripted upstream refused the script: {response.text}")

    async def register_searches(self, run: str, catalogue: Mapping[str, list[dict[str, str]]]) -> None:
        """Tell the search fixture what the run's searches find (query -> pages), so its searches
        are logged for the run (an empty catalogue is not sent: no search would be logged for
        it); without a search fixture, only an empty catalogue is accepted."""
        if not catalogue:
            return
        if self._search is None:
            raise HarnessError(f"the scenario states what web searches find (`search:`), but the scripted "
                               f"upstream at {self._upstream} announces no search fixture beside it")
        url = f"{self._search}/__parity/runs/{run}"
        self._searching.add(run)  # forgotten even if the answer is lost
        try:
            response = await self._http.put(url, json=dict(catalogue))
        except httpx2.HTTPError as error:
            raise HarnessError(f"the search fixture at {self._search} is not reachable: {error}") from error
        if response.status_code != 204:
            raise HarnessError(f"the search fixture refused the scenario's `search:`: {response.text}")

    async def forget(self, run: str, mcp_names: Iterable[str] = ()) -> None:
        """Drop what the upstream, the search fixture and the named MCP fixtures logged for the run."""
        urls = [f"{self._upstream}/__parity/runs/{run}",
                *([f"{self._search}/__parity/runs/{run}"] if run in self._searching else []),
                *(f"{self.mcp[name].base_url}/__parity/runs/{run}/calls" for name in mcp_names)]
        for url in urls:
            with contextlib.suppress(httpx2.HTTPError):  # a server keeps a little more memory; nothing depends on it
                await self._http.delete(url)
        self._searching.discard(run)

    async def route_default_mcp(self, run: str, mcp_names: list[str]) -> None:
        """Log calls to the fixtures' default endpoints (`/mcp`, `/sse`) as `run`'s, for a gateway
        that reaches them only through its own configuration."""
        for name in mcp_names:
            url = f"{self.mcp[name].base_url}/__parity/default-run"
            try:
                response = await self._http.put(url, json={"run": run})
                response.raise_for_status()
            except httpx2.HTTPError as error:
                raise HarnessError(f"cannot route the MCP fixture {name}'s default endpoint: {error}") from error

    async def observed(self, run: str, mcp_names: list[str]) -> Observed:
        """Everything logged for the run so far (its searches once `register_searches` was called)."""
        return await self._logged(run, mcp_names, "GET")

    async def taken(self, run: str, mcp_names: list[str]) -> Observed:
        """What `observed` reads, which the fixtures forget as they answer: one request to each,
        where `observed` and then `forget` take two. Should a read fail, `forget` the run."""
        observed = await self._logged(run, mcp_names, "DELETE")
        self._searching.discard(run)
        return observed

    async def _logged(self, run: str, mcp_names: list[str], method: str) -> Observed:
        record = await self._read(f"{self._upstream}/__parity/runs/{run}", method)
        calls: list[dict[str, Any]] = []
        for name in mcp_names:
            fixture_calls = (await self._read(f"{self.mcp[name].base_url}/__parity/runs/{run}/calls", method))["calls"]
            calls += [call | {"fixture": name} for call in fixture_calls]
        calls.sort(key=lambda call: call["at"])
        searches: list[dict[str, Any]] = []
        if run in self._searching:
            log = f"{self._search}/__parity/runs/{run}"  # read at .../searches, forgotten with the run
            searches = (await self._read(f"{log}/searches" if method == "GET" else log, method))["searches"]
        return Observed(record["requests"], calls, searches)
