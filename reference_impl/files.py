"""The Files API: `/v1/files`, the first part of `file_search` (vector stores index these files).

A file is uploaded as `multipart/form-data` with a `file` part, a `purpose` and, optionally,
`expires_after[anchor]=created_at` and `expires_after[seconds]` (3,600..2,592,000; a `batch`
file expires after 30 days unless told otherwise); it is listed newest first (filtered by
`purpose`, paginated as OpenAI pages files: `limit` up to 10,000, the default), read, downloaded
(`/content`, its bytes as uploaded) and deleted. Objects and errors are OpenAI's: an unknown or
expired id is a 404 `No such File object: <id>` with `param: id`, a missing part a 400 naming it.
The gateway keeps files in its SQLite store and accepts at most `MAX_FILE_BYTES` a file.

An upload is never held in memory as a whole: its body is parsed as it arrives (and refused
with a 413 once it passes the limit), the file part spooled to a temporary file (beyond 1 MiB,
Starlette's spool size), and copied from there into the store a piece at a time; a download is
read from the store a piece at a time too. At most `GatewayConfig.max_concurrent_uploads`
uploads are read at once: one more waits for a slot up to `upload_wait_s`, as a client expects
a busy server to take its upload a little later, and is then refused with OpenAI's 429
`rate_limit_exceeded` and a `retry-after` (which the `openai` SDK waits out and retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive

from ..openai_contract import openai_bounds
from ..openai_contract.request_body import RequestTooLarge, check_declared_size
from ..openai_contract.request_schema import sdk_literal
from .errors import GatewayError, InvalidRequest, RateLimited
from .ids import new_file_id
from .json_text import JsonAnswer
from .pagination import list_query, page_object
from .refusals import invalid_type, invalid_value, missing, unknown
from .store import FileStore, StoredFile

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


class UploadSlots:
    """At most `limit` uploads read at once; one more waits up to `wait_s` for a slot, then is a 429."""

    def __init__(self, limit: int, wait_s: float) -> None:
        self.limit, self.wait_s = limit, wait_s
        self._free = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self.wait_s if self._free.locked() else None):
                await self._free.acquire()
        except TimeoutError:
            raise RateLimited(f"Too many uploads at once: this gateway reads at most {self.limit} at a time. Please "
                              "try again in 1s.", 1) from None
        try:
            yield
        finally:
            self._free.release()


def _counted(request: Request, limit: int) -> Receive:
    """The request's `receive`, refusing the body with a 413 once more than `limit` bytes of it came."""
    received = 0

    async def receive() -> Message:
        nonlocal received
        message = await request.receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise RequestTooLarge(received, limit, at_least=True)
        return message

    return receive


class _FieldNamingParser(MultiPartParser):
    """starlette's multipart parser, except that a field larger than `max_part_size` is OpenAI's
    400 naming that field (starlette's own 400 names none)."""

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        try:
            super().on_part_data(data, start, end)
        except MultiPartException as too_large:
            name = self._current_part.field_name  # set from the part's headers before its data
            param = name.replace("[", ".").replace("]", "")  # as OpenAI names `expires_after[seconds]`
            raise InvalidRequest(f"Invalid value for '{param}': {too_large.message}", param=param) from too_large


@contextlib.asynccontextmanager
async def _upload_form(request: Request, limit: int) -> AsyncIterator[FormData]:
    """An upload's form (at most one file and 8 fields, the body at most `limit` bytes), its
    files closed when the block ends; an empty form for a body that is not multipart."""
    content_type, _ = parse_options_header(request.headers.get("content-type"))
    if content_type != b"multipart/form-data":
        yield FormData()
        return
    stream = Request(request.scope, _counted(request, limit)).stream()
    try:
        form = await _FieldNamingParser(request.headers, stream, max_files=1, max_fields=8).parse()
    except MultiPartException as unreadable:
        raise InvalidRequest(unreadable.message) from unreadable
    except FormParserError as unreadable:  # what starlette says of it from 1.7 on; before, it let it through
        raise InvalidRequest("Invalid multipart data.") from unreadable
    try:
        yield form
    finally:
        await form.close()


def _described(form: FormData) -> tuple[UploadFile, StoredFile]:
    """The file part of an upload's form and the file it describes, or OpenAI's 400 (413 when too large)."""
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
    if purpose not in (purposes := sdk_literal("FilePurpose")):  # what an upload may say it is for
        raise invalid_value("purpose", purpose, purposes)
    created_at = int(time.time())
    expires_at = _expires_at(form, purpose, created_at)
    size = upload.size or 0
    if size > MAX_FILE_BYTES:
        raise RequestTooLarge(size, MAX_FILE_BYTES, at_least=True)
    return upload, StoredFile(new_file_id(), upload.filename or "upload", purpose, size, created_at, expires_at)


async def stored_bytes(store: FileStore, file_id: str) -> AsyncIterator[bytes] | None:
    """A kept file's bytes, a piece at a time as they are read from the store (the pieces stop
    early if the file goes meanwhile), or None when it is not kept."""
    first = await store.file_piece(file_id, 0)
    if first is None:
        return None

    async def pieces() -> AsyncIterator[bytes]:
        piece: bytes | None = first
        sent = 0
        while piece:
            yield piece
            sent += len(piece)
            piece = await store.file_piece(file_id, sent)

    return pieces()


def file_routes(store: FileStore, uploads: UploadSlots) -> list[Route]:
    async def existing(file_id: str) -> StoredFile:
        found = await store.get_file(file_id)
        if found is None:
            raise FileNotFound(file_id)
        return found

    async def create(request: Request) -> Response:
        limit = MAX_FILE_BYTES + _FORM_OVERHEAD_BYTES
        check_declared_size(request, limit)
        async with uploads.slot(), _upload_form(request, limit) as form:
            upload, file = _described(form)
            await store.save_file(file, upload.file)
        return JsonAnswer(file.resource())

    async def list_files(request: Request) -> Response:
        query = list_query(request.query_params, default_limit=MAX_LIST_LIMIT, max_limit=MAX_LIST_LIMIT)
        files, more = await store.files_page(request.query_params.get("purpose"), query)
        return JsonAnswer(page_object([file.resource() for file in files], more))

    async def read(request: Request) -> Response:
        return JsonAnswer((await existing(request.path_params["file_id"])).resource())

    async def content(request: Request) -> Response:
        """The bytes as uploaded."""
        file = await existing(request.path_params["file_id"])
        pieces = await stored_bytes(store, file.id)
        if pieces is None:
            raise FileNotFound(file.id)
        return StreamingResponse(pieces, media_type="application/octet-stream",
                                 headers={"content-length": str(file.bytes)})

    async def delete(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        if not await store.delete_file(file_id):
            raise FileNotFound(file_id)
        return JsonAnswer({"id": file_id, "object": "file", "deleted": True})

    return [
        Route("/v1/files", create, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        Route("/v1/files/{file_id}", read, methods=["GET"]),
        Route("/v1/files/{file_id}", delete, methods=["DELETE"]),
        Route("/v1/files/{file_id}/content", content, methods=["GET"]),
    ]
