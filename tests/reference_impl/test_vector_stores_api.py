"""The reference gateway's Vector Stores API, driven by the official `openai` SDK on loopback:
upload files, build a vector store from them, attach more with attributes, search (the chunk with
the words comes back, filters exclude by attribute, `max_num_results` bounds, `score_threshold`
drops the weaker hits), list, read and delete; then its errors with raw requests. Each answer is
validated strictly against the SDK's types (the SDK itself casts without validating)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest
from openai import BadRequestError, NotFoundError, OpenAI
from openai.types import FileObject, VectorStore, VectorStoreSearchResponse
from openai.types.vector_stores import VectorStoreFile

from responses_parity.harness.stack import Stack
from responses_parity.reference_impl.vector_stores import chunks


@pytest.fixture
def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.reference_url}/v1", api_key="not-checked", max_retries=0)


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{stack.reference_url}/v1") as client:
        yield client


def upload(client: OpenAI, text: str, name: str = "notes.txt") -> FileObject:
    return client.files.create(file=(name, text.encode(), "text/plain"), purpose="assistants")


def strictly(model: type, raw: dict) -> None:
    assert model.model_validate(raw, strict=True).model_dump(exclude_unset=True) == raw


def test_a_search_finds_the_chunk_with_the_words_and_filters_exclude_by_attribute(client: OpenAI,
                                                                                  http: httpx.Client) -> None:
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


def test_files_are_listed_read_and_chunked_as_their_strategy_says(client: OpenAI, http: httpx.Client) -> None:
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
    binary = client.files.create(file=("blob.bin", b"\xff\xfe\x00binary"), purpose="assistants")
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
def test_errors_are_openai_shaped(http: httpx.Client, sent: tuple[str, str, dict | None],
                                  expected: tuple[int, str]) -> None:
    method, path, body = sent
    answer = http.request(method, path, json=body)
    assert answer.status_code == expected[0]
    error = answer.json()["error"]
    assert expected[1] in error["message"] and error["type"] == "invalid_request_error"


def test_errors_on_a_store_name_the_field(client: OpenAI, http: httpx.Client) -> None:
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
        ("POST", f"{base}/search", {"query": "x", "max_num_results": 51}, 400, "between 1 and 50", "max_num_results"),
        ("POST", f"{base}/search", {"query": "x", "filters": {"type": "like", "key": "k", "value": 1}}, 400,
         "Invalid value: 'like'", "filters.type"),
        ("POST", f"{base}/search", {"query": "x", "filters": {"type": "eq", "value": 1}}, 400,
         "Missing required parameter: 'filters.key'.", "filters.key"),
        ("POST", f"{base}/search", {"query": "x", "ranking_options": {"score_threshold": 2}}, 400,
         "between 0 and 1", "ranking_options.score_threshold"),
        ("POST", f"{base}/search", {"query": "x", "rewrite_query": True}, 400, "does not rewrite queries",
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
