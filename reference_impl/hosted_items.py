"""What a hosted search (`web_search`, `file_search`) is to the model and to the client.

The model sees each hosted tool as a function (`web_search(query)`, `file_search(queries)`) and
reads its results as that function's output, rendered here from the same result dicts the
client may see (`include`), so a replayed item whose results were kept reads to the model as
the original did. The output tells the model how to cite: a web page as a markdown link
`[title](url)`, a file with Llama Stack's marker `<|file-ID|>` (`citations.py` reads both back).

A replayed `web_search_call` / `file_search_call` item (stateless input, or a conversation's
items) is never searched again: it becomes the function call and an output rendered from what
the item holds. A `file_search_call` with `results` reads exactly as it did: a conversation
keeps them whatever `include` said (its item listings show them only with `include`, see
`as_listed`), stateless input has them when its response was asked for them. A conversation
keeps a `web_search_call`'s pages too, as its sources with their titles and snippets
(`kept_sources`; listings show only `{type, url}`, and only with `include`), so it reads as it
did. Without them (stateless input holds at most `action.sources`, the URLs), the output lists
what is left and says the rest was not kept. Through
`previous_response_id` nothing is rendered again: the stored transcript holds the output the
model read.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, Literal

from .upstream.items import ToolCall, ToolOutput

HostedKind = Literal["web_search", "file_search"]
WEB_SEARCH_TYPES = frozenset({"web_search", "web_search_2025_08_26", "web_search_preview",
                              "web_search_preview_2025_03_11"})
"""The request tool types that mean the web search tool (the SDK's `WebSearchTool` and
`WebSearchPreviewTool`)."""
HOSTED_CHOICE_TYPES = WEB_SEARCH_TYPES | {"file_search"}
"""The `tool_choice` types that name a hosted tool (the SDK's `ToolChoiceTypes` this gateway runs)."""
ITEM_TYPES: dict[str, HostedKind] = {"web_search_call": "web_search", "file_search_call": "file_search"}
INCLUDE_FILE_RESULTS = "file_search_call.results"
INCLUDE_WEB_SOURCES = "web_search_call.action.sources"

PARAMETERS: dict[HostedKind, dict[str, Any]] = {
    "web_search": {"type": "object", "properties": {"query": {"type": "string", "description": "What to search for."}},
                   "required": ["query"], "additionalProperties": False},
    "file_search": {"type": "object", "properties": {"queries": {
        "type": "array", "items": {"type": "string"}, "minItems": 1,
        "description": "One or more search queries (rephrasings of what to find)."}},
        "required": ["queries"], "additionalProperties": False},
}
DESCRIPTIONS: dict[HostedKind, str] = {
    "web_search": "Search the web. Returns pages (title, URL, snippet); cite a page you use as a markdown link "
                  "[title](url).",
    "file_search": "Search the user's files. Returns passages with their file; cite a file you use by writing "
                   "its marker <|file-ID|> right after the statement it supports.",
}


def queries_of(kind: HostedKind, arguments: dict[str, Any]) -> list[str]:
    """The queries of checked arguments (see `PARAMETERS`)."""
    return [arguments["query"]] if kind == "web_search" else list(arguments["queries"])


def _quoted(queries: list[str]) -> str:
    return ", ".join(json.dumps(query) for query in queries)


def web_results_text(query: str, pages: list[dict[str, Any]]) -> str:
    """The model's reading of web results (`{url, title, snippet}` dicts, best first)."""
    if not pages:
        return f"No web results for {_quoted([query])}."
    lines = [f"Web results for {_quoted([query])}. Cite a page you use as a markdown link [title](url), "
             "with its URL exactly as given."]
    for number, page in enumerate(pages, 1):
        lines += ["", f"[{number}] {page['title']}", f"URL: {page['url']}", page.get("snippet") or ""]
    return "\n".join(lines).rstrip()


def file_results_text(queries: list[str], results: list[dict[str, Any]]) -> str:
    """The model's reading of file search results (the `results` dicts of a `file_search_call`).
    Every key of a result is optional in OpenAI's description, so a replayed one may lack any:
    what it has is read."""
    if not results:
        return f"No passages in the files match {_quoted(queries)}."
    lines = [f"Passages from the user's files for {_quoted(queries)}. Cite a file you use by writing its "
             "marker, e.g. <|file-ID|>, right after the statement it supports."]
    for number, result in enumerate(results, 1):
        head = [f"[{number}]", *([f"<|{result['file_id']}|>"] if "file_id" in result else []),
                *([result["filename"]] if "filename" in result else []),
                *([f"(score {result['score']:.3f})"] if "score" in result else [])]
        lines += ["", " ".join(head), result.get("text", "")]
    return "\n".join(lines)


def failure_text(kind: HostedKind, reason: str) -> str:
    return f"The {kind.replace('_', ' ')} failed: {reason}"


def kept_sources(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A web search's pages as a conversation keeps them: OpenAI's `{type: url, url}` sources,
    with the title and snippet the model read (`as_listed` never shows those two)."""
    return [{"type": "url", "url": page["url"], "title": page["title"], "snippet": page.get("snippet") or ""}
            for page in pages]


def as_listed(item: dict[str, Any], include: Collection[str]) -> dict[str, Any]:
    """A kept item as a listing shows it: a `file_search_call`'s results and a
    `web_search_call`'s sources (`{type, url}`) only when `include` asks for them."""
    if item.get("type") == "file_search_call" and INCLUDE_FILE_RESULTS not in include:
        return item | {"results": None}
    if item.get("type") == "web_search_call" and "sources" in (action := item.get("action") or {}):
        listed = {key: value for key, value in action.items() if key != "sources"}
        if INCLUDE_WEB_SOURCES in include:
            listed["sources"] = [{"type": source.get("type"), "url": source.get("url")} for source in action["sources"]]
        return item | {"action": listed}
    return item


def replayed(item: dict[str, Any], call_id: str) -> list[ToolCall | ToolOutput]:
    """A client's `web_search_call` / `file_search_call` item as the model reads it again (see
    the module docstring); never searched again."""
    kind = ITEM_TYPES[item["type"]]
    if kind == "web_search":
        action = item.get("action") or {}
        query = action.get("query") or ""
        arguments = {"query": query}
        sources = [source for source in action.get("sources") or [] if isinstance(source, dict) and source.get("url")]
        if sources and all(isinstance(source.get("title"), str) for source in sources):
            output = web_results_text(query, sources)  # kept by a conversation: the pages as the model read them
        else:
            output = "The text of these web results was not kept." + (
                "".join(f"\n- {source['url']}" for source in sources) if sources
                else f" The search was for {_quoted([query])}.")
    else:
        queries = list(item.get("queries") or [])
        arguments = {"queries": queries}
        results = item.get("results")
        output = file_results_text(queries, results) if results is not None else \
            f"The passages found for {_quoted(queries)} were not kept."
    if item.get("status") == "failed":
        output = failure_text(kind, "the search did not complete.")
    return [ToolCall(call_id, kind, json.dumps(arguments)), ToolOutput(call_id, output)]
