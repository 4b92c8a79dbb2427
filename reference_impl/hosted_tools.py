"""The gateway's own tools, `web_search` and `file_search`, as the loop runs them.

A request's hosted tool becomes a `HostedRunner`: the function the model is offered upstream
(its name, description and parameters) and the search it runs. The upstream name is the tool's
kind (`web_search`, `file_search`) unless a client function of the request already has that
name: the client's function keeps it, and the hosted tool is offered as `hosted_<kind>`
(`hosted_<kind>_2`, ... if that is taken too). The runner never raises for a bad call: invalid
arguments, or a search backend that fails (`SearchFailed`), make a failed `HostedOutcome`
whose text tells the model why.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from .client import FileSearchTool, HostedTool, WebSearchTool
from .hosted_items import (
    DESCRIPTIONS, PARAMETERS, HostedKind, failure_text, file_results_text, queries_of, web_results_text,
)
from .mcp_servers import validate_arguments
from .store import VectorStoreStore
from .upstream.items import ToolSpec
from .vector_stores import search_stores
from .web_search import SearchFailed, WebSearchProvider


@dataclass(frozen=True)
class HostedOutcome:
    """One hosted search: its queries, what it found (as the client's result dicts: file
    `results`, or web pages `{url, title, snippet}`), the failure if it failed, and the text the
    model reads."""

    queries: tuple[str, ...]
    model_text: str
    results: tuple[dict[str, Any], ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class HostedRunner:
    kind: HostedKind
    name: str
    """The function name the model calls it by."""
    tool: HostedTool
    store: VectorStoreStore | None = field(default=None, repr=False)
    provider: WebSearchProvider | None = field(default=None, repr=False)
    web_results: int = 5
    """Pages a web search asks for when the request does not say (`search_context_size`)."""

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, DESCRIPTIONS[self.kind], PARAMETERS[self.kind])

    async def run(self, arguments_json: str) -> HostedOutcome:
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            arguments = None
        problem = "the arguments are not a JSON object" if not isinstance(arguments, dict) else \
            validate_arguments(PARAMETERS[self.kind], arguments)
        if problem is not None:
            reason = f"invalid arguments for tool '{self.name}': {problem}"
            return HostedOutcome((), failure_text(self.kind, reason), error=reason)
        assert isinstance(arguments, dict)
        queries = queries_of(self.kind, arguments)
        if isinstance(self.tool, FileSearchTool):
            return await self._file_search(self.tool, queries)
        assert isinstance(self.tool, WebSearchTool)
        return await self._web_search(self.tool, queries[0])

    async def _file_search(self, tool: FileSearchTool, queries: list[str]) -> HostedOutcome:
        assert self.store is not None
        hits = await search_stores(self.store, list(tool.vector_store_ids), queries,
                                   max_num_results=tool.max_num_results, score_threshold=tool.score_threshold,
                                   filters=tool.filters)
        results = [{"attributes": hit.attributes or {}, "file_id": hit.file_id, "filename": hit.filename,
                    "score": hit.score, "text": hit.text, "vector_store_id": hit.vector_store_id}
                   for hit in hits]
        return HostedOutcome(tuple(queries), file_results_text(queries, results), tuple(results))

    async def _web_search(self, tool: WebSearchTool, query: str) -> HostedOutcome:
        assert self.provider is not None
        try:
            pages = await self.provider.search(query, max_results=tool.max_results(self.web_results),
                                               allowed_domains=tool.allowed_domains)
        except SearchFailed as failure:
            return HostedOutcome((query,), failure_text("web_search", str(failure)), error=str(failure))
        results = [{"url": page.url, "title": page.title, "snippet": page.snippet} for page in pages]
        return HostedOutcome((query,), web_results_text(query, results), tuple(results))


def kind_of(tool: HostedTool) -> HostedKind:
    return "file_search" if isinstance(tool, FileSearchTool) else "web_search"


def hosted_runners(tools: Collection[HostedTool], taken: Collection[str], store: VectorStoreStore,
                   provider: WebSearchProvider | None, web_results: int) -> dict[str, HostedRunner]:
    """A runner per hosted tool, by the name the model calls it (see the module docstring)."""
    runners: dict[str, HostedRunner] = {}
    for tool in tools:
        kind = kind_of(tool)
        name, suffix = kind, 1
        while name in taken or name in runners:
            suffix += 1
            name = f"hosted_{kind}" + (f"_{suffix - 1}" if suffix > 2 else "")
        runners[name] = HostedRunner(kind, name, tool, store, provider, web_results)
    return runners
