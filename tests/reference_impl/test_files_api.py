"""The reference gateway's Files API, driven by the official `openai` SDK on loopback
(`client.files.create/list/retrieve/content/delete`), and its errors with raw requests: each
answer parses as the SDK's `FileObject` and each error is in OpenAI's envelope."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx2
import pytest
from openai import NotFoundError, OpenAI
from openai.types import FileObject

from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import files as files_api
from responses_parity.reference_impl.files import MAX_LIST_LIMIT


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


@pytest.fixture
def http(stack: Stack) -> httpx2.Client:
    with httpx2.Client(base_url=f"{stack.reference_url}/v1") as client:
        yield client


def unique_text() -> bytes:
    return f"Parity notes {secrets.token_hex(8)}: the gateway keeps uploads byte for byte.\n".encode()


def test_an_upload_is_listed_read_downloaded_and_deleted(client: OpenAI, http: httpx2.Client) -> None:
    text = unique_text()
    created = client.files.create(file=("notes.txt", text, "text/plain"), purpose="assistants")
    raw = http.get(f"/files/{created.id}").json()
    assert FileObject.model_validate(raw, strict=True).model_dump() == raw  # the SDK casts without validating
    assert created.id.startswith("file-") and len(created.id) == len("file-") + 22
    assert (created.object, created.filename, created.purpose, created.bytes) == ("file", "notes.txt", "assistants",
                                                                                   len(text))
    assert created.status == "processed" and created.expires_at is None

    assert client.files.retrieve(created.id) == created
    assert client.files.content(created.id).content == text
    assert created.id in [file.id for file in client.files.list()]

    deleted = client.files.delete(created.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "file", True)
    assert created.id not in [file.id for file in client.files.list()]
    for gone in (lambda: client.files.retrieve(created.id), lambda: client.files.content(created.id),
                 lambda: client.files.delete(created.id)):
        with pytest.raises(NotFoundError):
            gone()


def test_the_list_pages_newest_first_and_filters_by_purpose(client: OpenAI) -> None:
    ids = [client.files.create(file=(f"part{n}.jsonl", unique_text()), purpose="fine-tune").id for n in range(3)]
    listed = [file.id for file in client.files.list(purpose="fine-tune", limit=1)]  # the SDK follows `after`
    assert [file_id for file_id in listed if file_id in ids] == ids[::-1]
    second = client.files.list(purpose="fine-tune", order="asc", limit=1, after=ids[0])
    assert [file.id for file in second.data] == [ids[1]] and second.has_more is True
    assert [file.id for file in client.files.list(purpose="fine-tune", order="asc") if file.id in ids] == ids
    assert all(file.purpose == "fine-tune" for file in client.files.list(purpose="fine-tune"))
    assert not {file.id for file in client.files.list(purpose="vision")} & set(ids)
    for file_id in ids:
        client.files.delete(file_id)


def test_expiry_follows_expires_after_and_batch_files_expire_in_30_days(client: OpenAI) -> None:
    timed = client.files.create(file=("a.txt", unique_text()), purpose="user_data",
                                expires_after={"anchor": "created_at", "seconds": 3600})
    assert timed.expires_at == timed.created_at + 3600
    batch = client.files.create(file=("b.jsonl", unique_text()), purpose="batch")
    assert batch.expires_at == batch.created_at + 30 * 86_400
    for file in (timed, batch):
        client.files.delete(file.id)


def test_an_unknown_file_is_openais_404(http: httpx2.Client) -> None:
    for method, path in (("GET", "/files/file-unknown"), ("GET", "/files/file-unknown/content"),
                         ("DELETE", "/files/file-unknown")):
        answer = http.request(method, path)
        assert answer.status_code == 404
        assert answer.json() == {"error": {"message": "No such File object: file-unknown",
                                           "type": "invalid_request_error", "param": "id", "code": None}}


@pytest.mark.parametrize(("data", "files", "param", "code"), [
    ({"purpose": "assistants"}, {"other": ("a.txt", b"text")}, "file", "missing_required_parameter"),
    ({}, {"purpose": (None, b"assistants"), "file": (None, b"not a file part")}, "file", "invalid_type"),
    ({"purpose": "assistants", "other": "x"}, {"file": ("a.txt", b"text")}, "other", "unknown_parameter"),
    ({}, {"file": ("a.txt", b"text")}, "purpose", "missing_required_parameter"),
    ({"purpose": "homework"}, {"file": ("a.txt", b"text")}, "purpose", "invalid_value"),
    ({"purpose": "batch", "expires_after[anchor]": "last_used"}, {"file": ("a.txt", b"text")},
     "expires_after.anchor", "invalid_value"),
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
     {"file": ("a.txt", b"text")}, "expires_after.seconds", "invalid_value"),
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "9" * 5000},
     {"file": ("a.txt", b"text")}, "expires_after.seconds", "invalid_value"),  # past int()'s digit limit
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3600²"},
     {"file": ("a.txt", b"text")}, "expires_after.seconds", "invalid_type"),  # a digit int() cannot read
    ({"purpose": "x" * 2**21}, {"file": ("a.txt", b"text")}, "purpose", None),  # past the field size limit
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "9" * 2**21},
     {"file": ("a.txt", b"text")}, "expires_after.seconds", None),
])
def test_a_bad_upload_is_a_400_naming_the_param(http: httpx2.Client, data: dict[str, str],
                                                files: dict[str, tuple[str | None, bytes]], param: str,
                                                code: str | None) -> None:
    before = http.get("/files").json()["data"]
    answer = http.post("/files", data=data, files=files)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert http.get("/files").json()["data"] == before


def test_a_bad_list_query_is_a_400(http: httpx2.Client) -> None:
    answer = http.get("/files", params={"limit": MAX_LIST_LIMIT + 1})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "limit"
    assert http.get("/files", params={"after": "file-unknown"}).json()["error"]["param"] == "after"


def test_a_file_over_the_gateways_limit_is_a_413_and_not_kept(http: httpx2.Client,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_api, "MAX_FILE_BYTES", 1024)  # the gateway runs in this process
    answer = http.post("/files", data={"purpose": "assistants"}, files={"file": ("big.bin", b"x" * 1025)})
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"
    assert "big.bin" not in [file["filename"] for file in http.get("/files").json()["data"]]
    fits = http.post("/files", data={"purpose": "assistants"}, files={"file": ("fits.bin", b"x" * 1024)})
    assert fits.status_code == 200 and fits.json()["bytes"] == 1024
    http.delete(f"/files/{fits.json()['id']}").raise_for_status()


def test_a_chunked_upload_is_cut_at_the_limit_as_it_arrives(http: httpx2.Client,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """No content-length to refuse up front: the gateway counts the body as it reads it, so a
    hostile upload cannot fill its disk before the size check."""
    monkeypatch.setattr(files_api, "MAX_FILE_BYTES", 1024)
    def multipart_in_chunks() -> Iterator[bytes]:
        yield (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n'
               b'--b\r\nContent-Disposition: form-data; name="file"; filename="huge.bin"\r\n\r\n')
        for _ in range(64):  # 64 MiB, far beyond the limit and its room for the form
            yield b"x" * 2**20

    answer = http.post("/files", content=multipart_in_chunks(),
                       headers={"content-type": "multipart/form-data; boundary=b"})
    assert answer.status_code == 413
    body_limit = 1024 + files_api._FORM_OVERHEAD_BYTES  # cut while reading the body, not after spooling the file
    assert f"at most {body_limit:,}" in answer.json()["error"]["message"]
    assert "huge.bin" not in [file["filename"] for file in http.get("/files").json()["data"]]
