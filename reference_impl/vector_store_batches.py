"""Vector store file batches: `/v1/vector_stores/{id}/file_batches`, many files attached in one request.

A batch names its files as `file_ids` (with `attributes` and `chunking_strategy` for all of
them) or as `files` (each a `file_id` with its own `attributes` and `chunking_strategy`; the
batch-wide ones are then not allowed), 1 to 2,000 of them, never both. Every file is checked
first (an unknown one is a 404, a type file search does not read a 400 `unsupported_file`), so
a batch attaches all its files or none; they are indexed and the batch kept in one transaction
before the request returns, so a batch is `completed` at once (see `vector_stores.py` for why
nothing is ever `in_progress`). Its `file_counts` and its files list are those of the store's
files the batch attached, as they are now (a file detached since is no longer counted).
Cancelling stops the files still in progress, of which there are none: it answers the batch
as it is (inferred: OpenAI documents the cancel, not how it answers a finished batch).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .errors import InvalidRequest, NotFound
from .ids import new_id
from .json_text import JsonAnswer
from .refusals import invalid_type, missing, unknown
from .store import Attachment, FileStore, FileTally, StoredFileBatch, VectorStoreStore
from .vector_stores import (VectorStoreNotFound, attached, body_of, checked_attributes, chunking, file_counts,
                            files_page, retrievable, unique_files)

MAX_BATCH_FILES = 2000
_BATCH_FILE_KEYS = ("file_id", "attributes", "chunking_strategy")


class FileBatchNotFound(NotFound):
    def __init__(self, store_id: str, batch_id: str) -> None:
        super().__init__(f"No file batch found with id '{batch_id}' in vector store '{store_id}'.")


def _listed(value: Any, param: str) -> list[Any]:
    """A batch's list of files, not empty, or OpenAI's 400 (one of more than `MAX_BATCH_FILES` is
    refused by counting as the body is read)."""
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    if not value:
        raise InvalidRequest(f"Invalid '{param}': expected an array of 1 to {MAX_BATCH_FILES} files, but got none.",
                             param=param, code="invalid_value")
    return value


def _requested(body: dict[str, Any]) -> list[tuple[Any, Any, Any, str]]:
    """Each file the batch asks for, once: (file_id, attributes, chunking_strategy, the param
    naming it). A file named again is one file, with what its last entry says (as attaching it
    again would leave it)."""
    if "file_ids" in body and "files" in body:
        raise InvalidRequest("'file_ids' and 'files' are mutually exclusive: give one of them.", param="files",
                             code="invalid_value")
    if "files" in body:
        for shared in ("attributes", "chunking_strategy"):
            if shared in body:
                raise InvalidRequest(f"'{shared}' applies to 'file_ids'; with 'files', give it for each file.",
                                     param=shared, code="invalid_value")
        requested: dict[str, tuple[Any, Any, Any, str]] = {}
        for index, entry in enumerate(_listed(body["files"], "files")):
            param = f"files[{index}]"
            if not isinstance(entry, dict):
                raise invalid_type(param, "an object", entry)
            if unknown_keys := sorted(set(entry) - set(_BATCH_FILE_KEYS)):
                raise unknown(f"{param}.{unknown_keys[0]}", unknown_keys[0], _BATCH_FILE_KEYS)
            if "file_id" not in entry:
                raise missing(f"{param}.file_id")
            if not isinstance(entry["file_id"], str):
                raise invalid_type(f"{param}.file_id", "a string", entry["file_id"])
            requested[entry["file_id"]] = (entry["file_id"], entry.get("attributes"), entry.get("chunking_strategy"),
                                           f"{param}.file_id")
        return list(requested.values())
    if "file_ids" not in body:
        raise missing("file_ids")
    return [(file_id, body.get("attributes"), body.get("chunking_strategy"), "file_ids")
            for file_id in unique_files(_listed(body["file_ids"], "file_ids"), "file_ids")]


def _batch_resource(batch: StoredFileBatch, tally: FileTally) -> dict[str, Any]:
    """OpenAI's `vector_store.files_batch` (the SDK's `VectorStoreFileBatch`)."""
    return {"id": batch.id, "object": "vector_store.files_batch", "created_at": batch.created_at,
            "vector_store_id": batch.vector_store_id, "status": "completed", "file_counts": file_counts(tally)}


def file_batch_routes(store: VectorStoreStore, files: FileStore) -> list[Route]:
    async def existing_batch(request: Request) -> StoredFileBatch:
        store_id, batch_id = request.path_params["vector_store_id"], request.path_params["batch_id"]
        if await store.get_vector_store(store_id) is None:
            raise VectorStoreNotFound(store_id)
        found = await store.get_file_batch(store_id, batch_id)
        if found is None:
            raise FileBatchNotFound(store_id, batch_id)
        return found

    async def resource(batch: StoredFileBatch) -> dict[str, Any]:
        return _batch_resource(batch, await store.file_tally(batch.vector_store_id, batch.id))

    async def create(request: Request) -> Response:
        store_id = request.path_params["vector_store_id"]
        if await store.get_vector_store(store_id) is None:
            raise VectorStoreNotFound(store_id)
        body = await body_of(request, "vector_stores.file_batches.create")
        attachments = [Attachment(store_id, (await retrievable(files, file_id, param)).id,
                                  checked_attributes(attributes), chunking(strategy))
                       for file_id, attributes, strategy, param in _requested(body)]
        batch = StoredFileBatch(new_id("vsfb"), store_id, int(time.time()), [a.file_id for a in attachments])
        await attached(store, attachments, batch)
        return JsonAnswer(await resource(batch))

    async def read(request: Request) -> Response:
        return JsonAnswer(await resource(await existing_batch(request)))

    async def list_files(request: Request) -> Response:
        batch = await existing_batch(request)
        return JsonAnswer(await files_page(store, batch.vector_store_id, request.query_params, batch.id))

    return [
        Route("/v1/vector_stores/{vector_store_id}/file_batches", create, methods=["POST"]),
        Route("/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}", read, methods=["GET"]),
        Route("/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel", read, methods=["POST"]),
        Route("/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/files", list_files, methods=["GET"]),
    ]
