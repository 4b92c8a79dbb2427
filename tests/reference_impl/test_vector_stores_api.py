"""The reference gateway's Vector Stores API, driven by the official `openai` SDK on loopback:
upload files, build a vector store from them, attach more with attributes, search (the chunk with
the words comes back, filters exclude by attribute, `max_num_results` bounds, `score_threshold`
drops the weaker hits), list, read, update and delete; file batches; a deleted file found in no
store; a store past its expiry; then its errors with raw requests. Each answer is validated
strictly against the SDK's types (the SDK itself casts without validating)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openai import BadRequestError, NotFoundError, OpenAI
from openai.types import FileObject, VectorStore, VectorStoreSearchResponse
from openai.types.vector_stores import FileContentResponse, VectorStoreFile, VectorStoreFileBatch

from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.chunking import chunks
from responses_parity.reference_impl.vector_stores import DAY_S


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"{stack.reference_url}/v1") as client:
        yield client


def upload(client: OpenAI, text: str, name: str = "notes.txt") -> FileObject:
    return client.files.create(file=(name, text.encode(), "text/plain"), purpose="assistants")


def strictly(model: type, raw: dict) -> None:
    assert model.model_validate(raw, strict=True).model_dump(exclude_unset=True) == raw


def test_a_search_finds_the_chunk_with_the_words_and_filters_exclude_by_attribute(client: OpenAI,
                                                                                  http: httpx2.Client) -> None:
    word = f"zq{secrets.token_hex(4)}"  # a word no other test's file holds
    manual = upload(client, f"The {word} valve opens clockwise. Maintenance happens yearly.", "manual.txt")
    memo = upload(client, f"Lunch is at noon. The {word} valve was replaced in spring.", "memo.txt")
    other = upload(client, "Nothing here mentions the part at all.", "other.txt")

    created = client.vector_stores.create(name="docs", file_ids=[manual.id], metadata={"team": "parity"})
    assert created.id.startswith("vs_") and (created.object, created.name, created.status) == ("vector_store", "docs",
                                                                                               "completed")
    assert created.file_counts.completed == created.file_counts.total == 1 and created.metadata == {"team": "parity"}
    for file, attributes in ((memo, {"kind": "memo", "year": 2024}), (other, {"kind": "manual", "year": 2020})):
        attached = client.vector_stores.files.create(vector_store_id=created.id, file_id=file.id,
                                                     attributes=attributes)
        assert (attached.id, attached.status, attached.attributes) == (file.id, "completed", attributes)

    raw_store = http.get(f"/vector_stores/{created.id}").json()
    strictly(VectorStore, raw_store)
    assert raw_store["file_counts"]["total"] == 3 and raw_store["usage_bytes"] > 0

    results = client.vector_stores.search(created.id, query=f"{word} valve")
    assert {hit.file_id for hit in results} == {manual.id, memo.id}
    assert all(word in hit.content[0].text for hit in results)
    assert {hit.filename for hit in results} == {"manual.txt", "memo.txt"}
    raw_search = http.post(f"/vector_stores/{created.id}/search", json={"query": word}).json()
    assert raw_search["object"] == "vector_store.search_results.page" and raw_search["search_query"] == [word]
    for hit in raw_search["data"]:
        strictly(VectorStoreSearchResponse, hit)
        assert 0 < hit["score"] < 1

    memo_only = client.vector_stores.search(created.id, query=word,
                                            filters={"type": "eq", "key": "kind", "value": "memo"})
    assert [hit.file_id for hit in memo_only] == [memo.id]
    not_memo = client.vector_stores.search(created.id, query=word,
                                           filters={"type": "ne", "key": "kind", "value": "memo"})
    assert [hit.file_id for hit in not_memo] == []  # the manual has no `kind`: a comparison on it does not pass
    compound = client.vector_stores.search(created.id, query=f"{word} nothing", filters={
        "type": "or", "filters": [{"type": "gte", "key": "year", "value": 2024},
                                  {"type": "in", "key": "kind", "value": ["manual"]}]})
    assert {hit.file_id for hit in compound} == {memo.id, other.id}

    bounded = client.vector_stores.search(created.id, query=f"{word} valve", max_num_results=1)
    assert len(bounded.data) == 1
    assert not client.vector_stores.search(created.id, query="absent-term-xyzzy").data

    detached = client.vector_stores.files.delete(file_id=memo.id, vector_store_id=created.id)
    assert (detached.id, detached.object, detached.deleted) == (memo.id, "vector_store.file.deleted", True)
    assert {hit.file_id for hit in client.vector_stores.search(created.id, query=word)} == {manual.id}

    deleted = client.vector_stores.delete(created.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "vector_store.deleted", True)
    assert created.id not in [store.id for store in client.vector_stores.list()]
    with pytest.raises(NotFoundError):
        client.vector_stores.search(created.id, query=word)


def test_scores_rank_the_hits_and_the_threshold_drops_the_weaker(client: OpenAI) -> None:
    word = f"zq{secrets.token_hex(4)}"
    texts = [f"{word} pump: {word} seals, {word} bearings", f"{word} filter housing",
             *(f"Unrelated note number {n}." for n in range(18))]  # a rare word weighs more than 1 in BM25
    ids = [upload(client, text).id for text in texts]
    vector_store = client.vector_stores.create(file_ids=ids)
    hits = client.vector_stores.search(vector_store.id, query=word).data
    assert [hit.file_id for hit in hits] == ids[:2]
    assert 1 > hits[0].score > hits[1].score > 0
    between = (hits[0].score + hits[1].score) / 2
    kept = client.vector_stores.search(vector_store.id, query=word, ranking_options={"score_threshold": between})
    assert [hit.file_id for hit in kept] == ids[:1]


def test_files_are_listed_read_and_chunked_as_their_strategy_says(client: OpenAI, http: httpx2.Client) -> None:
    words = " ".join(f"w{n}" for n in range(250))
    file = upload(client, words)
    vector_store = client.vector_stores.create(name="chunks")
    static = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}}
    attached = client.vector_stores.files.create(vector_store_id=vector_store.id, file_id=file.id,
                                                 chunking_strategy=static)
    raw = http.get(f"/vector_stores/{vector_store.id}/files/{file.id}").json()
    strictly(VectorStoreFile, raw)
    assert raw["chunking_strategy"] == static and attached.usage_bytes == raw["usage_bytes"]
    assert client.vector_stores.files.retrieve(file_id=file.id, vector_store_id=vector_store.id).id == file.id
    assert [listed.id for listed in client.vector_stores.files.list(vector_store.id)] == [file.id]
    assert not client.vector_stores.files.list(vector_store.id, filter="failed").data

    hits = client.vector_stores.search(vector_store.id, query="w120", max_num_results=50).data
    assert len(hits) == 2  # w120 is in the chunks starting at w50 and at w100 (100 words, 50 shared)
    assert sorted(hit.content[0].text.split()[0] for hit in hits) == ["w100", "w50"]
    auto = client.vector_stores.files.create(vector_store_id=client.vector_stores.create().id, file_id=file.id)
    assert auto.chunking_strategy.model_dump() == {"type": "static", "static": {"max_chunk_size_tokens": 800,
                                                                               "chunk_overlap_tokens": 400}}


def test_a_file_that_is_not_text_fails_with_last_error(client: OpenAI) -> None:
    binary = client.files.create(file=("blob.txt", b"\xff\xfe\x00binary"), purpose="assistants")
    vector_store = client.vector_stores.create(file_ids=[binary.id])
    assert (vector_store.file_counts.failed, vector_store.file_counts.completed) == (1, 0)
    attached = client.vector_stores.files.retrieve(file_id=binary.id, vector_store_id=vector_store.id)
    assert attached.status == "failed" and attached.last_error.code == "unsupported_file"


def test_chunks_overlap_as_asked_and_cover_every_word() -> None:
    text = " ".join(f"t{n}" for n in range(10))
    assert chunks(text, 4, 2) == ["t0 t1 t2 t3", "t2 t3 t4 t5", "t4 t5 t6 t7", "t6 t7 t8 t9"]
    assert chunks(text, 4, 0) == ["t0 t1 t2 t3", "t4 t5 t6 t7", "t8 t9"]
    assert chunks("  keep\n\nits  spacing ", 800, 400) == ["keep\n\nits  spacing"]
    assert chunks(" \n ", 100, 0) == []


UNKNOWN_STORE = "No vector store found with id 'vs_missing'."


@pytest.mark.parametrize(("sent", "expected"), [
    (("GET", "/vector_stores/vs_missing", None), (404, UNKNOWN_STORE)),
    (("DELETE", "/vector_stores/vs_missing", None), (404, UNKNOWN_STORE)),
    (("POST", "/vector_stores/vs_missing/search", {"query": "x"}), (404, UNKNOWN_STORE)),
    (("POST", "/vector_stores", {"file_ids": ["file-missing"]}), (404, "No such File object: file-missing")),
    (("POST", "/vector_stores", {"chunking_strategy": {"type": "static", "static": {
        "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 60}}}),
     (400, "chunking_strategy.static.chunk_overlap_tokens")),
    (("POST", "/vector_stores", {"chunking_strategy": {"type": "fixed"}}), (400, "Invalid value: 'fixed'")),
    (("POST", "/vector_stores", {"nmae": "x"}), (400, "Unknown parameter: 'nmae'. Did you mean 'name'?")),
])
def test_errors_are_openai_shaped(http: httpx2.Client, sent: tuple[str, str, dict | None],
                                  expected: tuple[int, str]) -> None:
    method, path, body = sent
    answer = http.request(method, path, json=body)
    assert answer.status_code == expected[0]
    error = answer.json()["error"]
    assert expected[1] in error["message"] and error["type"] == "invalid_request_error"


def test_errors_on_a_store_name_the_field(client: OpenAI, http: httpx2.Client) -> None:
    vector_store = client.vector_stores.create(name="errors")
    file = upload(client, "Some text.")
    base = f"/vector_stores/{vector_store.id}"
    cases = [
        ("GET", f"{base}/files/file-missing", None, 404,
         f"No file found with id 'file-missing' in vector store '{vector_store.id}'.", None),
        ("POST", f"{base}/files", {"file_id": "file-missing"}, 404, "No such File object: file-missing", "id"),
        ("POST", f"{base}/files", {}, 400, "Missing required parameter: 'file_id'.", "file_id"),
        ("POST", f"{base}/files", {"file_id": file.id, "attributes": {"tags": ["a"]}}, 400,
         "Invalid type for 'attributes.tags'", "attributes.tags"),
        ("POST", f"{base}/search", {}, 400, "Missing required parameter: 'query'.", "query"),
        ("POST", f"{base}/search", {"query": "x", "max_num_results": 51}, 400, "Expected a value <= 50",
         "max_num_results"),
        ("POST", f"{base}/search", {"query": "x", "filters": {"type": "like", "key": "k", "value": 1}}, 400,
         "Invalid value: 'like'", "filters.type"),
        ("POST", f"{base}/search", {"query": "x", "filters": {"type": "eq", "value": 1}}, 400,
         "Missing required parameter: 'filters.key'.", "filters.key"),
        ("POST", f"{base}/search", {"query": "x", "ranking_options": {"score_threshold": 2}}, 400,
         "Expected a value <= 1", "ranking_options.score_threshold"),
        ("POST", f"{base}/search", {"query": "x", "rewrite_query": True}, 400, "does not rewrite queries",
         "rewrite_query"),
        ("POST", f"{base}/search", {"query": "x", "rewrite_query": "yes"}, 400, "Invalid type for 'rewrite_query'",
         "rewrite_query"),
    ]
    for method, path, body, status, message, param in cases:
        answer = http.request(method, path, json=body)
        assert answer.status_code == status, (path, body, answer.text)
        error = answer.json()["error"]
        assert message in error["message"] and error["param"] == param, (path, body, error)
    assert client.vector_stores.retrieve(vector_store.id).file_counts.total == 0  # nothing refused was attached
    with pytest.raises(BadRequestError):
        client.vector_stores.search(vector_store.id, query="x", max_num_results=0)


@pytest.mark.parametrize(("filters", "param"), [
    ({"type": "gt", "key": "a", "value": {"x": 1}}, "filters.value"),
    ({"type": "gt", "key": "a", "value": [1, 2]}, "filters.value"),
    ({"type": "lte", "key": "a", "value": None}, "filters.value"),
    ({"type": "in", "key": "a", "value": [1, {"x": 1}]}, "filters.value[1]"),
    ({"type": "nin", "key": "a", "value": [True]}, "filters.value[0]"),
    ({"type": "and", "filters": [{"type": "gte", "key": "a", "value": [[1]]}]}, "filters.filters[0].value"),
    ({"type": "eq", "key": "a", "value": 1, "bogus": 1}, "filters.bogus"),
    ({"type": "or", "filters": [], "bogus": 1}, "filters.bogus"),
])
def test_a_filter_value_openai_does_not_describe_is_a_400_naming_it(client: OpenAI, http: httpx2.Client,
                                                                     filters: dict[str, Any], param: str) -> None:
    vector_store = client.vector_stores.create(name="numbers")
    file = upload(client, "Seven is a number.")
    client.vector_stores.files.create(vector_store_id=vector_store.id, file_id=file.id, attributes={"a": 7})
    answer = http.post(f"/vector_stores/{vector_store.id}/search", json={"query": "number", "filters": filters})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    fine = http.post(f"/vector_stores/{vector_store.id}/search", json={"query": "number", "filters": {
        "type": "and", "filters": [{"type": "gt", "key": "a", "value": 6}, {"type": "in", "key": "a", "value": [7]}]}})
    assert [hit["file_id"] for hit in fine.json()["data"]] == [file.id]


@pytest.mark.parametrize(("path", "body", "param"), [
    ("", {"name": None}, "name"), ("", {"description": 5}, "description"), ("", {"chunking_strategy": None},
                                                                           "chunking_strategy"),
    ("", {"chunking_strategy": {"type": "auto", "extra": 1}}, "chunking_strategy.extra"),
    ("", {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"), ("", {"metadata": {"k": "v" * 513}},
                                                                        "metadata.k"),
    ("", {"file_ids": None}, "file_ids"), ("", {"expires_after": {"anchor": "last_active_at", "days": 1, "x": 1}},
                                           "expires_after.x"),
    ("/{id}", {"metadata": {"k" * 65: "v"}}, "metadata"),
    ("/{id}/search", {"query": "x", "filters": None}, "filters"),
    ("/{id}/search", {"query": "x", "ranking_options": {"extra": 1}}, "ranking_options.extra"),
    ("/{id}/files", {"file_id": "file-x", "chunking_strategy": None}, "chunking_strategy"),
    ("/{id}/file_batches", {"file_ids": ["file-x"], "chunking_strategy": None}, "chunking_strategy"),
])
def test_a_body_openais_description_refuses_is_a_400_naming_the_field(client: OpenAI, http: httpx2.Client, path: str,
                                                                      body: dict[str, Any], param: str) -> None:
    vector_store = client.vector_stores.create(name="described")
    answer = http.post(f"/vector_stores{path.format(id=vector_store.id)}", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param, answer.text


def test_a_type_file_search_does_not_read_is_refused_and_nothing_is_attached(client: OpenAI,
                                                                            http: httpx2.Client) -> None:
    text, table = upload(client, "Readable."), upload(client, "a,b\n1,2", "data.csv")
    bare = upload(client, "x", "README")
    name = f"refused-{secrets.token_hex(4)}"
    answer = http.post("/vector_stores", json={"name": name, "file_ids": [text.id, table.id]})
    assert answer.status_code == 400 and answer.json()["error"] == {
        "message": "Files with extensions [.csv] are not supported for retrieval. See "
                   "https://platform.openai.com/docs/assistants/tools/file-search/supported-files",
        "type": "invalid_request_error", "param": "file_ids", "code": "unsupported_file"}
    assert name not in {store.name for store in client.vector_stores.list(limit=100)}
    vector_store = client.vector_stores.create(name=name)
    for file, param, extension in ((table, "file_id", ".csv"), (bare, "file_id", "none")):
        error = http.post(f"/vector_stores/{vector_store.id}/files", json={"file_id": file.id}).json()["error"]
        assert (error["param"], error["code"]) == (param, "unsupported_file") and f"[{extension}]" in error["message"]
    batch = http.post(f"/vector_stores/{vector_store.id}/file_batches", json={"files": [
        {"file_id": text.id}, {"file_id": table.id}]}).json()["error"]
    assert (batch["param"], batch["code"]) == ("files[1].file_id", "unsupported_file")
    assert client.vector_stores.retrieve(vector_store.id).file_counts.total == 0


def test_a_store_and_its_files_attributes_are_updated(client: OpenAI, http: httpx2.Client) -> None:
    word = f"zq{secrets.token_hex(4)}"
    file = upload(client, f"The {word} report.")
    vector_store = client.vector_stores.create(name="before", file_ids=[file.id], metadata={"v": "1"})
    raw = http.post(f"/vector_stores/{vector_store.id}", json={
        "name": "after", "metadata": {"v": "2"}, "expires_after": {"anchor": "last_active_at", "days": 3}}).json()
    strictly(VectorStore, raw)
    assert (raw["name"], raw["metadata"], raw["status"]) == ("after", {"v": "2"}, "completed")
    assert raw["expires_at"] == raw["last_active_at"] + 3 * DAY_S
    assert client.vector_stores.retrieve(vector_store.id).name == "after"
    cleared = client.vector_stores.update(vector_store.id, expires_after=None)
    assert (cleared.expires_after, cleared.expires_at, cleared.name) == (None, None, "after")

    only_2025 = {"type": "eq", "key": "year", "value": 2025}
    assert not client.vector_stores.search(vector_store.id, query=word, filters=only_2025).data
    updated = client.vector_stores.files.update(file.id, vector_store_id=vector_store.id, attributes={"year": 2025})
    assert updated.attributes == {"year": 2025}
    assert [hit.file_id for hit in client.vector_stores.search(vector_store.id, query=word, filters=only_2025)] == [
        file.id]
    missing = http.post(f"/vector_stores/{vector_store.id}/files/{file.id}", json={}).json()["error"]
    assert missing["param"] == "attributes"


def test_a_store_files_content_is_its_text(client: OpenAI, http: httpx2.Client) -> None:
    text = "First line.\nSecond line, with  two spaces."
    file = upload(client, text)
    vector_store = client.vector_stores.create(file_ids=[file.id])
    raw = http.get(f"/vector_stores/{vector_store.id}/files/{file.id}/content").json()
    assert (raw["object"], raw["has_more"], raw["next_page"]) == ("vector_store.file_content.page", False, None)
    for part in raw["data"]:
        strictly(FileContentResponse, part)
    assert [part.text for part in client.vector_stores.files.content(file.id, vector_store_id=vector_store.id)] == [
        text]


def test_a_deleted_file_is_found_in_no_store(client: OpenAI, http: httpx2.Client) -> None:
    word = f"zq{secrets.token_hex(4)}"
    gone, kept = upload(client, f"The {word} memo."), upload(client, f"The {word} manual.")
    stores = [client.vector_stores.create(file_ids=[gone.id, kept.id]) for _ in range(2)]
    assert all(len(client.vector_stores.search(store.id, query=word).data) == 2 for store in stores)
    usage_before = client.vector_stores.retrieve(stores[0].id).usage_bytes
    client.files.delete(gone.id)
    for store in stores:
        assert [hit.file_id for hit in client.vector_stores.search(store.id, query=word)] == [kept.id]
        after = client.vector_stores.retrieve(store.id)
        assert after.file_counts.total == 1 and 0 < after.usage_bytes < usage_before
        assert http.get(f"/vector_stores/{store.id}/files/{gone.id}").status_code == 404


def test_a_file_batch_attaches_its_files_with_their_attributes(client: OpenAI, http: httpx2.Client) -> None:
    word = f"zq{secrets.token_hex(4)}"
    memos = [upload(client, f"{word} memo {n}.") for n in range(2)]
    manual, broken = upload(client, f"{word} manual."), client.files.create(file=("x.txt", b"\xff\xfe"),
                                                                            purpose="assistants")
    vector_store = client.vector_stores.create(name="batches")
    shared = client.vector_stores.file_batches.create(vector_store.id, file_ids=[m.id for m in memos],
                                                      attributes={"kind": "memo"})
    raw = http.get(f"/vector_stores/{vector_store.id}/file_batches/{shared.id}").json()
    strictly(VectorStoreFileBatch, raw)
    assert raw["id"].startswith("vsfb_") and raw["status"] == "completed" and raw["file_counts"]["completed"] == 2
    static = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}
    own = client.vector_stores.file_batches.create(vector_store.id, files=[
        {"file_id": manual.id, "attributes": {"kind": "manual"}, "chunking_strategy": static},
        {"file_id": broken.id}])
    assert (own.file_counts.completed, own.file_counts.failed, own.file_counts.total) == (1, 1, 2)
    listed = client.vector_stores.file_batches.list_files(own.id, vector_store_id=vector_store.id)
    assert {file.id: file.attributes for file in listed} == {manual.id: {"kind": "manual"}, broken.id: None}
    failed = client.vector_stores.file_batches.list_files(own.id, vector_store_id=vector_store.id, filter="failed")
    assert [file.id for file in failed] == [broken.id]
    assert client.vector_stores.file_batches.cancel(own.id, vector_store_id=vector_store.id).status == "completed"
    memo_hits = client.vector_stores.search(vector_store.id, query=word,
                                            filters={"type": "eq", "key": "kind", "value": "memo"})
    assert {hit.file_id for hit in memo_hits} == {m.id for m in memos}
    assert client.vector_stores.retrieve(vector_store.id).file_counts.total == 4

    base = f"/vector_stores/{vector_store.id}/file_batches"
    for body, status, param in (({"file_ids": [manual.id], "files": [{"file_id": manual.id}]}, 400, "files"),
                                ({"files": [{"file_id": manual.id}], "attributes": {"a": "b"}}, 400, "attributes"),
                                ({}, 400, "file_ids"), ({"file_ids": []}, 400, "file_ids"),
                                ({"files": [{"file_id": manual.id, "id": manual.id}]}, 400, "files[0].id"),
                                ({"files": [{"id": manual.id}]}, 400, "files[0].file_id"),
                                ({"file_ids": [manual.id, "file-missing"]}, 404, "id")):
        answer = http.post(base, json=body)
        assert (answer.status_code, answer.json()["error"]["param"]) == (status, param), body
    assert client.vector_stores.retrieve(vector_store.id).file_counts.total == 4  # nothing refused was attached
    for path in (f"{base}/vsfb_missing", f"{base}/vsfb_missing/files"):
        assert http.get(path).status_code == 404
    with pytest.raises(NotFoundError):
        client.vector_stores.file_batches.retrieve(shared.id, vector_store_id="vs_missing")


@pytest.fixture
def own_gateway(stack: Stack, tmp_path: Path) -> Iterator[tuple[OpenAI, Path]]:
    """A reference gateway of this test's own, on a database file the test can change (to move
    a store's or a file's time back), and an SDK client of it."""
    database = tmp_path / "gateway.sqlite3"
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or "",
                                                             store_path=str(database)))).start()
    try:
        yield OpenAI(base_url=f"{server.url}/v1", api_key="not-checked", max_retries=0), database
    finally:
        server.stop()


def test_a_store_past_its_expiry_is_expired_and_cannot_be_searched(own_gateway: tuple[OpenAI, Path]) -> None:
    client, database = own_gateway
    vector_store = client.vector_stores.create(file_ids=[upload(client, "Text.").id],
                                               expires_after={"anchor": "last_active_at", "days": 1})
    client.vector_stores.search(vector_store.id, query="text")
    searched = client.vector_stores.retrieve(vector_store.id)
    assert searched.status == "completed" and searched.expires_at == searched.last_active_at + DAY_S
    with sqlite3.connect(database) as db:  # the store was last active two days ago
        db.execute("UPDATE vector_stores SET last_active_at = last_active_at - ? WHERE id = ?",
                   (2 * DAY_S, vector_store.id))
    stale = client.vector_stores.retrieve(vector_store.id)
    assert stale.status == "expired" and stale.expires_at == searched.expires_at - 2 * DAY_S
    with pytest.raises(BadRequestError) as refused:
        client.vector_stores.search(vector_store.id, query="text")
    assert refused.value.param == "vector_store_id" and "expired" in refused.value.message
    with pytest.raises(BadRequestError) as tool_refused:  # nor through the file_search tool
        client.responses.create(model="m", input="Search.",
                                tools=[{"type": "file_search", "vector_store_ids": [vector_store.id]}])
    assert tool_refused.value.param == "tools[0].vector_store_ids[0]" and "expired" in tool_refused.value.message


def test_a_file_past_its_expiry_leaves_every_store_at_once(own_gateway: tuple[OpenAI, Path]) -> None:
    client, database = own_gateway
    brief = client.files.create(file=("brief.txt", b"The valve brief."), purpose="user_data",
                                expires_after={"anchor": "created_at", "seconds": 3600})
    kept = upload(client, "The valve manual.")
    vector_store = client.vector_stores.create(file_ids=[brief.id, kept.id])
    assert len(client.vector_stores.search(vector_store.id, query="valve").data) == 2
    with sqlite3.connect(database) as db:  # its hour is over
        db.execute("UPDATE files SET expires_at = created_at - 1 WHERE id = ?", (brief.id,))
    assert [hit.file_id for hit in client.vector_stores.search(vector_store.id, query="valve")] == [kept.id]
    assert [file.id for file in client.vector_stores.files.list(vector_store.id)] == [kept.id]
    assert client.vector_stores.retrieve(vector_store.id).file_counts.total == 1
    with pytest.raises(NotFoundError):
        client.vector_stores.files.retrieve(brief.id, vector_store_id=vector_store.id)
