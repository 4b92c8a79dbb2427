"""The Files API: `/v1/files`, the first part of `file_search` (vector stores index these files).

A file is uploaded as `multipart/form-data` with a `file` part, a `purpose` and, optionally,
`expires_after[anchor]=created_at` and `expires_after[seconds]` (3,600..2,592,000; a `batch`
file expires after 30 days unless told otherwise); it is listed newest first (filtered by
`purpose`, paginated as OpenAI pages files: `limit` up to 10,000, the default), read, downloaded
(`/content`, its bytes as uploaded) and deleted. Objects and errors are OpenAI's: an unknown or
expired id is a 404 `No such File object: <id>` with `param: id`, a missing part a 400 naming it.
The gateway keeps files in its SQLite store and accepts at most `MAX_FILE_BYTES` a file.
"""

from __future__ import annotations

import time
from typing import get_args

from openai.types import FilePurpose
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from . import openai_bounds
from .errors import GatewayError, InvalidRequest, RequestTooLarge
from .ids import new_file_id
from .json_body import read_bytes
from .pagination import list_query, page
from .request_schema import invalid_type, invalid_value, missing, unknown
from .store import FileStore, StoredFile

PURPOSES: tuple[str, ...] = get_args(FilePurpose)
"""What an upload may say it is for (the `openai` SDK's `FilePurpose`)."""
MAX_FILE_BYTES = 64 * 2**20
"""The gateway keeps a file's bytes in its database; OpenAI accepts up to 512 MB."""
_FORM_OVERHEAD_BYTES = 2**20
"""Room for the multipart framing and the other fields around a file of `MAX_FILE_BYTES`."""
MAX_LIST_LIMIT = 10_000
BATCH_EXPIRY_S = 30 * 86_400
_SECONDS = openai_bounds.bounds("files.create")["expires_after.seconds"]
EXPIRY_RANGE_S = (_SECONDS["minimum"], _SECONDS["maximum"])
"""OpenAI's range of `expires_after[seconds]` (3,600..2,592,000), from its description."""
FORM_FIELDS = ("file", "purpose", "expires_after[anchor]", "expires_after[seconds]")
"""The parts an upload may have (OpenAI's description of it takes no other)."""


class FileNotFound(GatewayError):
    def __init__(self, file_id: str) -> None:
        super().__init__(404, f"No such File object: {file_id}", type="invalid_request_error", param="id")


def _expires_at(form: FormData, purpose: str, created_at: int) -> int | None:
    """When the upload expires: `expires_after` if given, else 30 days for `batch`, else never."""
    anchor, seconds = form.get("expires_after[anchor]"), form.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return created_at + BATCH_EXPIRY_S if purpose == "batch" else None
    if anchor is None:
        raise missing("expires_after.anchor")
    if anchor != "created_at":
        raise invalid_value("expires_after.anchor", anchor, ("created_at",))
    if seconds is None:
        raise missing("expires_after.seconds")
    if not isinstance(seconds, str) or not (seconds.isascii() and seconds.isdigit()):
        raise invalid_type("expires_after.seconds", "an integer", seconds)
    low, high = EXPIRY_RANGE_S
    digits = seconds.lstrip("0") or "0"
    if len(digits) > len(str(high)) or not low <= int(digits) <= high:  # no int() of thousands of digits
        shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"
        raise InvalidRequest(f"Invalid 'expires_after.seconds': expected a value between {low} and {high}, but got "
                             f"{shown} instead.", param="expires_after.seconds", code="invalid_value")
    return created_at + int(digits)


async def _upload(request: Request) -> tuple[StoredFile, bytes]:
    """The file an upload request describes, and its bytes, or OpenAI's 400 (413 when too large)."""
    body = await read_bytes(request, MAX_FILE_BYTES + _FORM_OVERHEAD_BYTES)

    async def buffered() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    # The form is parsed from the bounded body: Starlette spools a file part of any size to disk.
    async with Request(request.scope, buffered).form(max_files=1, max_fields=8) as form:
        upload, purpose = form.get("file"), form.get("purpose")
        if upload is None:
            raise missing("file")
        if purpose is None:
            raise missing("purpose")
        for key in form:
            if key not in FORM_FIELDS:
                raise unknown(key, key, FORM_FIELDS)
        if not isinstance(upload, UploadFile):
            raise invalid_type("file", "a file", upload)
        if not isinstance(purpose, str):
            raise invalid_type("purpose", "a string", purpose)
        if purpose not in PURPOSES:
            raise invalid_value("purpose", purpose, PURPOSES)
        created_at = int(time.time())
        expires_at = _expires_at(form, purpose, created_at)
        content = await upload.read(MAX_FILE_BYTES + 1)
    if len(content) > MAX_FILE_BYTES:
        raise RequestTooLarge(len(content), MAX_FILE_BYTES, at_least=True)
    file = StoredFile(new_file_id(), upload.filename or "upload", purpose, len(content), created_at, expires_at)
    return file, content


def file_routes(store: FileStore) -> list[Route]:
    async def existing(file_id: str) -> StoredFile:
        found = await store.get_file(file_id)
        if found is None:
            raise FileNotFound(file_id)
        return found

    async def create(request: Request) -> Response:
        file, content = await _upload(request)
        await store.save_file(file, content)
        return JSONResponse(file.resource())

    async def list_files(request: Request) -> Response:
        query = request.query_params
        order, limit, after, before = list_query(query, default_limit=MAX_LIST_LIMIT, max_limit=MAX_LIST_LIMIT)
        files = [file.resource() for file in await store.files(query.get("purpose"))]
        return JSONResponse(page(files, order, limit, after, before))

    async def read(request: Request) -> Response:
        return JSONResponse((await existing(request.path_params["file_id"])).resource())

    async def content(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        data = await store.file_content(file_id)
        if data is None:
            raise FileNotFound(file_id)
        return Response(data, media_type="application/octet-stream")

    async def delete(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        if not await store.delete_file(file_id):
            raise FileNotFound(file_id)
        return JSONResponse({"id": file_id, "object": "file", "deleted": True})

    return [
        Route("/v1/files", create, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        Route("/v1/files/{file_id}", read, methods=["GET"]),
        Route("/v1/files/{file_id}", delete, methods=["DELETE"]),
        Route("/v1/files/{file_id}/content", content, methods=["GET"]),
    ]
