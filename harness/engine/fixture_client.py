"""The harness's side of the fixtures: register a run's script with the scripted upstream and
what its web searches find with the search fixture, and read back what the gateway sent to
them and to the MCP fixture servers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ...fixtures.upstream.script import RunScript
from ..errors import HarnessError
from ..scenario.placeholders import View


@dataclass(frozen=True)
class McpFixture(View):
    """Where one MCP fixture server listens, and its per-run URLs (what `{{mcp.<name>...}}` gives:
    `.url`, `.sse_url`, `.failing_url[<status>]`)."""

    name: str
    base_url: str
    run: str = ""

    def for_run(self, run: str) -> McpFixture:
        return McpFixture(self.name, self.base_url, run)

    @property
    def url(self) -> str:
        """Streamable HTTP endpoint for this run."""
        return f"{self.base_url}/r/{self.run}/mcp"

    @property
    def sse_url(self) -> str:
        """SSE endpoint for this run."""
        return f"{self.base_url}/r/{self.run}/sse"

    def failing_url(self, status: int) -> str:
        """An endpoint for this run that answers every request with HTTP `status`."""
        return f"{self.base_url}/r/{self.run}/status/{status}/mcp"

    def select(self, key: str | int) -> Any:
        if key == "url":
            return self.url
        if key == "sse_url":
            return self.sse_url
        if key == "failing_url":
            return _FailingUrls(self)
        raise LookupError(f"has no {key!r}: {MCP_URLS_SHOWN}")

    def value(self) -> Any:
        raise LookupError(f"is an MCP fixture: name one of its URLs ({MCP_URLS_SHOWN})")


MCP_URLS = ("url", "sse_url", "failing_url")
MCP_URLS_SHOWN = "url, sse_url, failing_url[<status>]"
FAILING_STATUSES = range(100, 600)


@dataclass(frozen=True)
class _FailingUrls(View):
    """`{{mcp.<name>.failing_url[<status>]}}`: the fixture's endpoint failing with that status."""

    fixture: McpFixture

    def select(self, key: str | int) -> str:
        if not isinstance(key, int) or key not in FAILING_STATUSES:
            raise LookupError(f"is selected by an HTTP status (100 to 599), not [{key!r}]")
        return self.fixture.failing_url(key)

    def value(self) -> Any:
        raise LookupError("needs the HTTP status it answers with: failing_url[401]")


@dataclass
class Observed:
    """What reached the fixtures: the model requests the scripted upstream logged (in order of
    arrival), the MCP tool listings and calls the fixture servers logged, and the searches the
    search fixture logged."""

    model_requests: list[dict[str, Any]] = field(default_factory=list)
    mcp_calls: list[dict[str, Any]] = field(default_factory=list)
    searches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def anomalies(self) -> list[str]:
        """What the scripted upstream could not answer as scripted, request by request."""
        return [anomaly for request in self.model_requests for anomaly in request.get("anomalies", [])]

    def tool_runs(self) -> dict[str, int]:
        """Executions by tool name, and by `fixture.tool`."""
        runs: dict[str, int] = {}
        for call in self.mcp_calls:
            if call["method"] == "tools/call":
                for key in (call["tool"], f"{call['fixture']}.{call['tool']}"):
                    runs[key] = runs.get(key, 0) + 1
        return runs

    @property
    def in_flight(self) -> bool:
        """Whether a model request or an MCP request is still being answered."""
        return any(not request.get("finished") for request in self.model_requests) or \
            any(call.get("ended_at") is None for call in self.mcp_calls)

    @property
    def progress(self) -> tuple[int, int, int, int]:
        """Changes whenever anything new reaches the fixtures or a request to them ends."""
        return (len(self.model_requests), len(self.mcp_calls), len(self.searches),
                sum(bool(request.get("finished")) for request in self.model_requests),
                sum(call.get("ended_at") is not None for call in self.mcp_calls))

    def to_dict(self) -> dict[str, Any]:
        return {"model_requests": self.model_requests, "anomalies": self.anomalies, "mcp_calls": self.mcp_calls,
                "searches": self.searches}


class FixtureClient:
    def __init__(self, http: httpx.AsyncClient, upstream_url: str, mcp: Mapping[str, McpFixture],
                 search_url: str | None = None) -> None:
        """`search_url`: the search fixture's base URL (None: there is none, and a run that
        states what searches find cannot run)."""
        self._http = http
        self._upstream = upstream_url.rstrip("/")
        self.mcp = mcp
        self._search = search_url.rstrip("/") if search_url else None

    async def _get(self, url: str) -> Any:
        try:
            response = await self._http.get(url)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise HarnessError(f"cannot read the fixture log at {url}: {type(error).__name__} {error}") from error

    async def register(self, run: str, script: RunScript) -> None:
        url = f"{self._upstream}/__parity/runs/{run}"
        try:
            response = await self._http.put(url, json=script.model_dump(mode="json"))
        except httpx.HTTPError as error:
            raise HarnessError(f"the scripted upstream at {self._upstream} is not reachable: {error}") from error
        if response.status_code != 204:
            raise HarnessError(f"the scripted upstream refused the script: {response.text}")

    async def register_searches(self, run: str, catalogue: Mapping[str, list[dict[str, str]]]) -> None:
        """Tell the search fixture what the run's searches find (query -> pages), so its searches
        are logged for the run; without a search fixture, only an empty catalogue is accepted."""
        if self._search is None:
            if catalogue:
                raise HarnessError(f"the scenario states what web searches find (`search:`), but the scripted "
                                   f"upstream at {self._upstream} announces no search fixture beside it")
            return
        url = f"{self._search}/__parity/runs/{run}"
        try:
            response = await self._http.put(url, json=dict(catalogue))
        except httpx.HTTPError as error:
            raise HarnessError(f"the search fixture at {self._search} is not reachable: {error}") from error
        if response.status_code != 204:
            raise HarnessError(f"the search fixture refused the scenario's `search:`: {response.text}")

    async def forget(self, run: str, mcp_names: Iterable[str] = ()) -> None:
        """Drop what the upstream, the search fixture and the named MCP fixtures logged for the run."""
        urls = [f"{self._upstream}/__parity/runs/{run}",
                *([f"{self._search}/__parity/runs/{run}"] if self._search else []),
                *(f"{self.mcp[name].base_url}/__parity/runs/{run}/calls" for name in mcp_names)]
        for url in urls:
            with contextlib.suppress(httpx.HTTPError):  # a server keeps a little more memory; nothing depends on it
                await self._http.delete(url)

    async def route_default_mcp(self, run: str, mcp_names: list[str]) -> None:
        """Log calls to the fixtures' default endpoints (`/mcp`, `/sse`) as `run`'s, for a gateway
        that reaches them only through its own configuration."""
        for name in mcp_names:
            url = f"{self.mcp[name].base_url}/__parity/default-run"
            try:
                response = await self._http.put(url, json={"run": run})
                response.raise_for_status()
            except httpx.HTTPError as error:
                raise HarnessError(f"cannot route the MCP fixture {name}'s default endpoint: {error}") from error

    async def observed(self, run: str, mcp_names: list[str]) -> Observed:
        """Everything logged for the run so far (its searches once `register_searches` was called)."""
        record = await self._get(f"{self._upstream}/__parity/runs/{run}")
        calls: list[dict[str, Any]] = []
        for name in mcp_names:
            fixture_calls = (await self._get(f"{self.mcp[name].base_url}/__parity/runs/{run}/calls"))["calls"]
            calls += [call | {"fixture": name} for call in fixture_calls]
        calls.sort(key=lambda call: call["at"])
        searches = (await self._get(f"{self._search}/__parity/runs/{run}/searches"))["searches"] if self._search else []
        return Observed(record["requests"], calls, searches)
