"""The Vector Stores API: `/v1/vector_stores`, their files and their search, over SQLite FTS5.

A vector store is created (with `name`, `metadata`, `file_ids`, `chunking_strategy`,
`expires_after`), listed, read, updated (`name`, `metadata`, `expires_after`; null clears) and
deleted; files are attached one at a time (`file_id`, `attributes`, `chunking_strategy`) or in
file batches (`vector_store_batches.py`), listed (by `filter` status), read, given new
`attributes`, read as text (`/content`, streamed as it is read from the store) and detached.
`file_counts` and `usage_bytes` (the bytes of a store's chunks) are counted (in SQL) from the
files attached when the store is read. `description` is accepted and not kept (the SDK's
`VectorStore` has no field for it). A store takes at most 500 `file_ids` (OpenAI's bound, a
longer list refused as soon as its 501st is parsed); a file named again is the same file,
looked up and indexed once.

Attaching indexes the file before the request returns, so a file is `completed`, or `failed`
with `last_error {code: unsupported_file}` when its bytes are not UTF-8 text; nothing is ever
`in_progress`, and neither is a store: indexing a file takes milliseconds, and answering with
the state a client would otherwise poll for spares it the poll. A file whose name has an
extension OpenAI's file search does not read is refused before anything is attached, as OpenAI
refuses it: a 400 `unsupported_file`, "Files with extensions [.csv] are not supported for
retrieval. See ...", `param` the field that named it (OpenAI's answer with `file_ids` is known
from its users' reports; with `file_id` and `files`, and `[none]` for a name without an
extension, it is inferred). Deleting a file (`DELETE /v1/files/{id}`) detaches it from every
store, as OpenAI's reference says, so a search never finds it again.

`expires_after {anchor: last_active_at, days}` sets `expires_at` to `last_active_at` (the
store's creation or its last search) plus those days; a store past it is `expired`, and
searching it is a 400 (OpenAI documents the `expired` status but not the error a search of such
a store gets: the message is inferred).

Chunking approximates a token by a word (a run of non-space characters): a chunk is at most
`max_chunk_size_tokens` words, consecutive chunks share `chunk_overlap_tokens` words, and `auto`
is OpenAI's 800 and 400. A chunk's text is the file's text from its first word to its last
(`chunking.py`).

`POST /v1/vector_stores/{id}/search` matches any of the query's words (FTS5, BM25), keeps the
chunks whose file's attributes pass `filters` (comparison and compound filters, as the SDK
types them) and whose score reaches `ranking_options.score_threshold`, best first, at most
`max_num_results` (1..50, default 10). The score maps BM25's rank into [0, 1): `r / (1 + r)`
with `r = -bm25` (FTS5's bm25 is negative, more negative is better). A search with
`rewrite_query: true` is refused (400), as this gateway does not rewrite queries. Only the
first `MAX_QUERY_WORDS` words of the queries are searched, a store named twice is searched
once, and SQLite ranks on a read connection of its own, so no other request waits for a search
(see `store.py`).

Objects are the `openai` SDK's `VectorStore`, `VectorStoreFile`, `FileContentResponse` pages
and `VectorStoreSearchResponse`; an unknown store or file is a 404 in OpenAI's envelope.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .errors import InvalidRequest, NotFound
from .files import FileNotFound, stored_bytes
from .ids import new_id
from .pagination import list_query, page_object
from ..openai_contract.request_schema import member_bounds
from .json_body import read_json_object
from .json_text import JsonAnswer
from .refusals import invalid_type, invalid_value, missing, unknown, vector_store_schemas
from .store import (
    Attachment, Attributes, FileStore, FileTally, MissingFile, StoredFile, StoredFileBatch, StoredVectorStore,
    StoredVectorStoreFile, VectorStoreStore,
)

AUTO_CHUNKING = {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}
CHUNK_SIZE_RANGE = (100, 4096)
MAX_RESULTS_RANGE = (1, 50)
DEFAULT_MAX_RESULTS = 10
MAX_ATTRIBUTES = 16
MAX_QUERY_WORDS = 256
"""How many words of a search's queries are searched: a query is a question or a passage, and
each word costs BM25 a pass over the chunks that hold it (an embedding model, too, reads only
so much of a query). The words beyond are not read."""
RANKERS = ("none", "auto", "default-2024-11-15")
FILE_STATUSES = ("in_progress", "completed", "failed", "cancelled")
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
COMPOUNDS = ("and", "or")
SUPPORTED_EXTENSIONS = frozenset({".c", ".cpp", ".cs", ".css", ".doc", ".docx", ".go", ".html", ".java", ".js", ".json",
                                  ".md", ".pdf", ".php", ".pptx", ".py", ".rb", ".sh", ".tex", ".ts", ".txt"})
"""The file types OpenAI's file search reads (its guide's list of supported files)."""
DAY_S = 86_400
_QUERY_TERM = re.compile(r"\w+")
_AS_STARLETTE: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}
"""How Starlette's `JsonAnswer` writes JSON (a page streamed in parts reads the same)."""


class VectorStoreNotFound(NotFound):
    def __init__(self, store_id: str) -> None:
        super().__init__(f"No vector store found with id '{store_id}'.")


class VectorStoreFileNotFound(NotFound):
    def __init__(self, store_id: str, file_id: str) -> None:
        super().__init__(f"No file found with id '{file_id}' in vector store '{store_id}'.")


class VectorStoreExpired(InvalidRequest):
    def __init__(self, store_id: str, param: str = "vector_store_id") -> None:
        super().__init__(f"Vector store '{store_id}' has expired and can no longer be searched.", param=param)


def unsupported_extension(filename: str) -> str | None:
    """How OpenAI names the extension of a file its file search does not read (`.csv`, `none`),
    or None for a file it reads."""
    suffix = PurePosixPath(filename).suffix.lower()
    return None if suffix in SUPPORTED_EXTENSIONS else suffix or "none"


async def retrievable(files: FileStore, file_id: Any, param: str) -> StoredFile:
    """The uploaded file `file_id` names, or OpenAI's 404 for an unknown one and its 400 for a
    type file search does not read (`param`: the request field that named it)."""
    if not isinstance(file_id, str):
        raise invalid_type(param, "a string", file_id)
    found = await files.get_file(file_id)
    if found is None:
        raise FileNotFound(file_id)
    if (extension := unsupported_extension(found.filename)) is not None:
        raise InvalidRequest(f"Files with extensions [{extension}] are not supported for retrieval. See "
                             "https://platform.openai.com/docs/assistants/tools/file-search/supported-files",
                             param=param, code="unsupported_file")
    return found


async def body_of(request: Request, name: str) -> dict[str, Any]:
    """The request's JSON object, as OpenAI's description of the body `name` has it
    (`request_schema.vector_store_schemas`), or OpenAI's 400 for a key it does not know, a
    required one missing, or the first value it refuses; a list longer than its bound is refused
    as soon as it is seen to be (`read_json` counts it), and a long body is checked in a worker
    thread."""
    body = await read_json_object(request, member_bounds(name))
    return await body.checked(functools.partial(described, name))


def described(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` if OpenAI's description of the body `name` has it, else OpenAI's 400 (see `body_of`)."""
    schema = vector_store_schemas()[name]
    for key in body:
        if key not in schema.parameters:
            raise unknown(key, key, schema.parameters)
    for key in schema.required:
        if key not in body:
            raise missing(key)
    if (violation := schema.first_violation(body)) is not None:
        raise violation
    return body


def _integer(value: Any, param: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type(param, "an integer", value)
    if not low <= value <= high:
        raise InvalidRequest(f"Invalid '{param}': expected a value between {low} and {high}, but got {value} "
                             "instead.", param=param, code="invalid_value")
    return value


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    return value


def chunking(value: Any) -> dict[str, int]:
    """The chunk size and overlap a `chunking_strategy` asks for (None is `auto`), or OpenAI's 400."""
    if value is None:
        return dict(AUTO_CHUNKING)
    strategy = _object(value, "chunking_strategy")
    kind = strategy.get("type")
    if kind == "auto":
        return dict(AUTO_CHUNKING)
    if kind != "static":
        raise invalid_value("chunking_strategy.type", kind, ("auto", "static"))
    static = _object(strategy.get("static"), "chunking_strategy.static")
    for key in ("max_chunk_size_tokens", "chunk_overlap_tokens"):
        if key not in static:
            raise missing(f"chunking_strategy.static.{key}")
    size = _integer(static["max_chunk_size_tokens"], "chunking_strategy.static.max_chunk_size_tokens",
                    *CHUNK_SIZE_RANGE)
    overlap = _integer(static["chunk_overlap_tokens"], "chunking_strategy.static.chunk_overlap_tokens", 0, size // 2)
    return {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}


def checked_attributes(value: Any) -> dict[str, str | float | bool] | None:
    """`attributes` as OpenAI bounds them (up to 16 keys of up to 64 characters; values strings
    of up to 512 characters, numbers or booleans), or OpenAI's 400."""
    if value is None:
        return None
    attributes = _object(value, "attributes")
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidRequest(f"Invalid 'attributes': too many properties. Expected an object with at most "
                             f"{MAX_ATTRIBUTES} properties, but got {len(attributes)} instead.", param="attributes",
                             code="object_above_max_properties")
    for key, item in attributes.items():
        if len(key) > 64:
            raise InvalidRequest(f"Invalid 'attributes': key '{key[:64]}...' is longer than 64 characters.",
                                 param="attributes", code="invalid_value")
        if not isinstance(item, (str, int, float, bool)):
            raise invalid_type(f"attributes.{key}", "a string, number or boolean", item)
        if isinstance(item, str) and len(item) > 512:
            raise InvalidRequest(f"Invalid 'attributes.{key}': string too long. Expected a string with maximum length "
                                 f"512, but got a string with length {len(item)} instead.",
                                 param=f"attributes.{key}", code="string_above_max_length")
    return attributes


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    metadata = _object(value, "metadata")
    for key, item in metadata.items():
        if not isinstance(item, str):
            raise invalid_type(f"metadata.{key}", "a string", item)
    return metadata


def _closed(filter_: dict[str, Any], known: tuple[str, ...], param: str) -> None:
    for key in filter_:
        if key not in known:
            raise unknown(f"{param}.{key}", key, known)


def _compared_value(kind: str, value: Any, param: str) -> None:
    """A comparison's value as OpenAI describes it (a string, number or boolean, or an array of
    strings and numbers); `in`/`nin` take an array, the orderings (`gt`, ...) no array."""
    def scalar(item: Any, booleans: bool = True) -> bool:
        return isinstance(item, str | int | float) and (booleans or not isinstance(item, bool))

    if kind in ("in", "nin") and not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    if isinstance(value, list) and kind not in ("in", "nin", "eq", "ne"):
        raise invalid_type(param, "a string, number or boolean", value)
    if not isinstance(value, list) and not scalar(value):
        raise invalid_type(param, "a string, number, boolean or array", value)
    for index, item in enumerate(value if isinstance(value, list) else ()):
        if not scalar(item, booleans=False):
            raise invalid_type(f"{param}[{index}]", "a string or number", item)


def checked_filter(value: Any, param: str = "filters") -> dict[str, Any]:
    """A comparison or compound filter, or OpenAI's 400 naming the part that is wrong."""
    filter_ = _object(value, param)
    kind = filter_.get("type")
    if kind in COMPOUNDS:
        _closed(filter_, ("type", "filters"), param)
        parts = filter_.get("filters")
        if not isinstance(parts, list):
            raise invalid_type(f"{param}.filters", "an array", parts)
        for index, part in enumerate(parts):
            checked_filter(part, f"{param}.filters[{index}]")
        return filter_
    if kind not in COMPARISONS:
        raise invalid_value(f"{param}.type", kind, COMPARISONS + COMPOUNDS)
    _closed(filter_, ("type", "key", "value"), param)
    for key in ("key", "value"):
        if key not in filter_:
            raise missing(f"{param}.{key}")
    if not isinstance(filter_["key"], str):
        raise invalid_type(f"{param}.key", "a string", filter_["key"])
    _compared_value(kind, filter_["value"], f"{param}.value")
    return filter_


def passes(filter_: dict[str, Any], attributes: dict[str, Any]) -> bool:
    """Whether a file's attributes pass a checked filter; a comparison on an attribute the file
    lacks, or between a number and a string, does not pass."""
    kind = filter_["type"]
    if kind in COMPOUNDS:
        combine = all if kind == "and" else any
        return combine(passes(part, attributes) for part in filter_["filters"])
    if filter_["key"] not in attributes:
        return False
    actual, expected = attributes[filter_["key"]], filter_["value"]
    if kind in ("in", "nin"):
        return (actual in expected) == (kind == "in")
    if kind in ("eq", "ne"):
        return (actual == expected) == (kind == "eq")
    if isinstance(actual, str) != isinstance(expected, str):
        return False
    return {"gt": actual > expected, "gte": actual >= expected, "lt": actual < expected,
            "lte": actual <= expected}[kind]


def _queries(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return value
    raise invalid_type("query", "a string or an array of strings", value)


def _search_request(value: dict[str, Any]) -> tuple[list[str], int, float, dict[str, Any] | None]:
    """A search body's queries, result limit, score threshold and filter, or OpenAI's 400."""
    body = described("vector_stores.search", value)
    queries = _queries(body["query"])
    limit = _integer(body.get("max_num_results", DEFAULT_MAX_RESULTS), "max_num_results", *MAX_RESULTS_RANGE)
    threshold = score_threshold(body.get("ranking_options"))
    rewrite = body.get("rewrite_query", False)
    if not isinstance(rewrite, bool):
        raise invalid_type("rewrite_query", "a boolean", rewrite)
    if rewrite:
        raise InvalidRequest("This gateway does not rewrite queries: 'rewrite_query' can only be false.",
                             param="rewrite_query", code="invalid_value")
    return queries, limit, threshold, checked_filter(body["filters"]) if body.get("filters") is not None else None


def fts_match(queries: list[str]) -> str | None:
    """An FTS5 query matching any of the first `MAX_QUERY_WORDS` words of `queries` (each quoted,
    so no word is an operator); None when they hold no word."""
    words: Iterator[str] = (match.group() for query in queries for match in _QUERY_TERM.finditer(query))
    terms = dict.fromkeys(word.lower() for word in itertools.islice(words, MAX_QUERY_WORDS))
    return " OR ".join(f'"{term}"' for term in terms) or None


def score(rank: float) -> float:
    """BM25's rank (FTS5: negative, lower is better) as a score in [0, 1), higher is better."""
    relevance = max(-rank, 0.0)
    return relevance / (1 + relevance)


def score_threshold(ranking_options: Any, param: str = "ranking_options") -> float:
    """The `score_threshold` of checked `ranking_options` (None: 0); a bad ranker or threshold is a 400."""
    ranking = _object(ranking_options or {}, param)
    if ranking.get("ranker", "auto") not in RANKERS:
        raise invalid_value(f"{param}.ranker", ranking["ranker"], RANKERS)
    threshold = ranking.get("score_threshold", 0.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise InvalidRequest(f"Invalid '{param}.score_threshold': expected a number between 0 and 1, but "
                             f"got {threshold!r} instead.", param=f"{param}.score_threshold", code="invalid_value")
    return float(threshold)


@dataclass(frozen=True)
class SearchHit:
    """One chunk a search found, with its store, file and score in [0, 1)."""

    vector_store_id: str
    file_id: str
    filename: str
    score: float
    attributes: dict[str, str | float | bool] | None
    text: str


async def search_stores(store: VectorStoreStore, store_ids: list[str], queries: list[str], *, max_num_results: int,
                        score_threshold: float = 0.0, filters: dict[str, Any] | None = None) -> list[SearchHit]:
    """The best `max_num_results` chunks of the given stores for `queries` (checked values: use
    `checked_filter`, `score_threshold`), best first; the `/search` endpoint and the
    `file_search` tool both search through here. A search is activity: it moves each store's
    `last_active_at` (and so its expiry) to now."""
    now = int(time.time())
    store_ids = list(dict.fromkeys(store_ids))  # a store named twice is searched once
    for store_id in store_ids:
        await store.touch_vector_store(store_id, now)
    match = fts_match(queries)
    if match is None:
        return []

    def good_enough(rank: float) -> bool:
        return score(rank) >= score_threshold

    def keep(attributes: Attributes | None) -> bool:
        return filters is None or passes(filters, attributes or {})

    hits = [SearchHit(store_id, chunk.file_id, chunk.filename, score(chunk.rank), chunk.attributes, chunk.text)
            for store_id in store_ids
            for chunk in await store.search_chunks(store_id, match, limit=max_num_results, good_enough=good_enough,
                                                   keep=keep)]
    return sorted(hits, key=lambda hit: -hit.score)[:max_num_results]


def _content_page(data: list[dict[str, str]]) -> dict[str, Any]:
    return {"object": "vector_store.file_content.page", "data": data, "has_more": False, "next_page": None}


def file_resource(file: StoredVectorStoreFile) -> dict[str, Any]:
    """OpenAI's `vector_store.file` (the SDK's `VectorStoreFile`)."""
    return {"id": file.file_id, "object": "vector_store.file", "created_at": file.created_at,
            "vector_store_id": file.vector_store_id, "usage_bytes": file.usage_bytes,
            "status": "failed" if file.last_error else "completed", "last_error": file.last_error,
            "attributes": file.attributes, "chunking_strategy": {"type": "static", "static": file.chunking}}


async def files_page(store: VectorStoreStore, store_id: str, query: Mapping[str, str],
                     batch_id: str | None = None) -> dict[str, Any]:
    """A page of the store's `vector_store.file` objects (those a batch attached, with
    `batch_id`) as `query` asks (`order`, `limit`, `after`, `before`, `filter` by status), or
    OpenAI's 400."""
    page = list_query(query)
    status = query.get("filter")
    if status is not None and status not in FILE_STATUSES:
        raise invalid_value("filter", status, FILE_STATUSES)
    if status in ("in_progress", "cancelled"):  # files are indexed at once: never in progress
        return page_object([], False)
    failed = None if status is None else status == "failed"
    attached, more = await store.vector_store_files_page(store_id, page, failed=failed, batch_id=batch_id)
    return page_object([file_resource(file) for file in attached], more)


def file_counts(tally: FileTally) -> dict[str, int]:
    """The `file_counts` of a store or a batch (indexed at once: none in progress)."""
    return {"in_progress": 0, "completed": tally.total - tally.failed, "failed": tally.failed, "cancelled": 0,
            "total": tally.total}


def expires_at(store: StoredVectorStore) -> int | None:
    """When the store expires: its last activity plus `expires_after.days`; None without expiry."""
    return store.last_active_at + store.expires_after["days"] * DAY_S if store.expires_after else None


def expired(store: StoredVectorStore, now: float) -> bool:
    end = expires_at(store)
    return end is not None and now >= end


def _store_resource(store: StoredVectorStore, tally: FileTally, now: float) -> dict[str, Any]:
    """OpenAI's `vector_store` (the SDK's `VectorStore`) as of `now`."""
    return {"id": store.id, "object": "vector_store", "created_at": store.created_at, "name": store.name,
            "usage_bytes": tally.usage_bytes, "file_counts": file_counts(tally),
            "status": "expired" if expired(store, now) else "completed", "expires_after": store.expires_after,
            "expires_at": expires_at(store), "last_active_at": store.last_active_at, "metadata": store.metadata}


def _expires_after(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    expires_after = _object(value, "expires_after")
    if expires_after.get("anchor") != "last_active_at":
        raise invalid_value("expires_after.anchor", expires_after.get("anchor"), ("last_active_at",))
    return {"anchor": "last_active_at", "days": _integer(expires_after.get("days"), "expires_after.days", 1, 365)}


async def attached(store: VectorStoreStore, attachments: list[Attachment], batch: StoredFileBatch | None = None
                   ) -> list[StoredVectorStoreFile]:
    """Checked files attached (see `VectorStoreStore.attach_files`), or a 404 for one deleted
    since it was checked (and none attached)."""
    try:
        return await store.attach_files(attachments, batch)
    except MissingFile as missing_file:
        raise FileNotFound(missing_file.file_id) from None


def unique_files(value: Any, param: str) -> list[str]:
    """The file ids of a list, each once, in order (a repeated id names the same file), or
    OpenAI's 400."""
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    for file_id in value:
        if not isinstance(file_id, str):
            raise invalid_type(param, "a string", file_id)
    return list(dict.fromkeys(value))


def vector_store_routes(store: VectorStoreStore, files: FileStore) -> list[Route]:
    async def existing(store_id: str) -> StoredVectorStore:
        found = await store.get_vector_store(store_id)
        if found is None:
            raise VectorStoreNotFound(store_id)
        return found

    async def resource(vector_store: StoredVectorStore) -> dict[str, Any]:
        return _store_resource(vector_store, await store.file_tally(vector_store.id), time.time())

    async def create(request: Request) -> Response:
        body = await body_of(request, "vector_stores.create")
        file_ids = unique_files(body.get("file_ids") or [], "file_ids")
        name = body.get("name") or ""
        if not isinstance(name, str):
            raise invalid_type("name", "a string", name)
        sizes = chunking(body.get("chunking_strategy"))
        for file_id in file_ids:
            await retrievable(files, file_id, "file_ids")
        now = int(time.time())
        created = StoredVectorStore(new_id("vs"), name, now, _metadata(body.get("metadata")),
                                    _expires_after(body.get("expires_after")), now)
        await store.save_vector_store(created)
        await attached(store, [Attachment(created.id, file_id, None, sizes) for file_id in file_ids])
        return JsonAnswer(await resource(created))

    async def update(request: Request) -> Response:
        vector_store = await existing(request.path_params["vector_store_id"])
        body = await body_of(request, "vector_stores.update")
        changes: dict[str, Any] = {}
        if "name" in body:
            if not isinstance(body["name"], (str, type(None))):
                raise invalid_type("name", "a string", body["name"])
            changes["name"] = body["name"] or ""
        if "metadata" in body:
            changes["metadata"] = _metadata(body["metadata"])
        if "expires_after" in body:
            changes["expires_after"] = _expires_after(body["expires_after"])
        updated = replace(vector_store, **changes)
        await store.save_vector_store(updated)
        return JsonAnswer(await resource(updated))

    async def list_stores(request: Request) -> Response:
        listed, more = await store.vector_stores_page(list_query(request.query_params))
        now = time.time()
        return JsonAnswer(page_object([_store_resource(vector_store, tally, now) for vector_store, tally in listed],
                                      more))

    async def read(request: Request) -> Response:
        return JsonAnswer(await resource(await existing(request.path_params["vector_store_id"])))

    async def delete(request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]
        if not await store.delete_vector_store(store_id):
            raise VectorStoreNotFound(store_id)
        return JsonAnswer({"id": store_id, "object": "vector_store.deleted", "deleted": True})

    async def add_file(request: Request) -> Response:
        vector_store = await existing(request.path_params["vector_store_id"])
        body = await body_of(request, "vector_stores.files.create")
        file = await retrievable(files, body["file_id"], "file_id")
        attributes, sizes = checked_attributes(body.get("attributes")), chunking(body.get("chunking_strategy"))
        (added,) = await attached(store, [Attachment(vector_store.id, file.id, attributes, sizes)])
        return JsonAnswer(file_resource(added))

    async def list_files(request: Request) -> Response:
        vector_store = await existing(request.path_params["vector_store_id"])
        return JsonAnswer(await files_page(store, vector_store.id, request.query_params))

    async def existing_file(request: Request) -> StoredVectorStoreFile:
        vector_store = await existing(request.path_params["vector_store_id"])
        file_id = request.path_params["file_id"]
        found = await store.get_vector_store_file(vector_store.id, file_id)
        if found is None:
            raise VectorStoreFileNotFound(vector_store.id, file_id)
        return found

    async def read_file(request: Request) -> Response:
        return JsonAnswer(file_resource(await existing_file(request)))

    async def update_file(request: Request) -> Response:
        found = await existing_file(request)
        body = await body_of(request, "vector_stores.files.update")
        updated = replace(found, attributes=checked_attributes(body["attributes"]))
        await store.update_vector_store_file(updated)
        return JsonAnswer(file_resource(updated))

    async def read_file_content(request: Request) -> Response:
        """The attached file's text as one part (a file that failed to index has none), sent as it
        is read from the store: the JSON around it, and its text escaped a piece at a time."""
        found = await existing_file(request)
        pieces = None if found.last_error else await stored_bytes(files, found.file_id)
        if pieces is None:
            return JsonAnswer(_content_page([]))
        head, tail = json.dumps(_content_page([{"type": "text", "text": "\0"}]), **_AS_STARLETTE).split("\\u0000")

        async def page(text: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            yield head.encode()
            async for piece in text:
                yield json.dumps(decoder.decode(piece), **_AS_STARLETTE)[1:-1].encode()
            yield (json.dumps(decoder.decode(b"", final=True), **_AS_STARLETTE)[1:-1] + tail).encode()

        return StreamingResponse(page(pieces), media_type="application/json")

    async def delete_file(request: Request) -> Response:
        found = await existing_file(request)
        await store.delete_vector_store_file(found.vector_store_id, found.file_id)
        return JsonAnswer({"id": found.file_id, "object": "vector_store.file.deleted", "deleted": True})

    async def search(request: Request) -> Response:
        vector_store = await existing(request.path_params["vector_store_id"])
        if expired(vector_store, time.time()):
            raise VectorStoreExpired(vector_store.id)
        body = await read_json_object(request)
        queries, limit, threshold, filter_ = await body.checked(_search_request)  # a query can be long
        hits = await search_stores(store, [vector_store.id], queries, max_num_results=limit,
                                   score_threshold=threshold, filters=filter_)
        data = [{"file_id": hit.file_id, "filename": hit.filename, "score": hit.score, "attributes": hit.attributes,
                 "content": [{"type": "text", "text": hit.text}]} for hit in hits]
        return JsonAnswer({"object": "vector_store.search_results.page", "search_query": queries,
                           "data": data, "has_more": False, "next_page": None})

    return [
        Route("/v1/vector_stores", create, methods=["POST"]),
        Route("/v1/vector_stores", list_stores, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}", read, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}", update, methods=["POST"]),
        Route("/v1/vector_stores/{vector_store_id}", delete, methods=["DELETE"]),
        Route("/v1/vector_stores/{vector_store_id}/files", add_file, methods=["POST"]),
        Route("/v1/vector_stores/{vector_store_id}/files", list_files, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}/files/{file_id}", read_file, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}/files/{file_id}", update_file, methods=["POST"]),
        Route("/v1/vector_stores/{vector_store_id}/files/{file_id}/content", read_file_content, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}/files/{file_id}", delete_file, methods=["DELETE"]),
        Route("/v1/vector_stores/{vector_store_id}/search", search, methods=["POST"]),
    ]
