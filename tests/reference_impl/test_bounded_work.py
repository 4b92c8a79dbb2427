"""No request costs the reference gateway more than its size and bounds allow, and none holds the
others up. Counted, never timed: what is parsed and checked of a body too long to be taken
(spies on the checks, a body whose tail is not even JSON), what the store's lock is doing while
SQLite ranks a search (a progress handler on every connection), what a repeated id costs (the
statements SQLite runs), how many rows a page reads (a row factory on every connection), and
what an upload holds in memory (tracemalloc, over a real upload through the app)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import re
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.openai_contract import strict_json
from responses_parity.openai_contract.request_schema import RequestSchema
from responses_parity.reference_impl import build_gateway_app, files, json_body, runtime, vector_stores
from responses_parity.reference_impl.chunking import text_chunks
from responses_parity.reference_impl.upstream import http as upstream_http
from responses_parity.reference_impl.vector_stores import fts_match
from sql_trace import SqlTrace

WORDS = " ".join(f"word{n}" for n in range(300))
"""A file's text: three chunks of 100 words with the static chunking below."""
STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}


@pytest.fixture
def traced(stack: Stack) -> Iterator[tuple[httpx2.Client, SqlTrace]]:
    """A reference gateway of its own (`:memory:` store), every statement it runs and every row
    it reads counted."""
    trace = SqlTrace()
    with trace.connections():
        server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()
    try:
        with httpx2.Client(base_url=f"{server.url}/v1", timeout=60) as client:
            yield client, trace
    finally:
        server.stop()


def upload(client: httpx2.Client, text: str = WORDS, name: str = "words.txt") -> str:
    answer = client.post("/files", files={"file": (name, text.encode())}, data={"purpose": "assistants"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def chunk_inserts(trace: SqlTrace) -> int:
    return sum(1 for sql in trace.run if sql.startswith("INSERT INTO vector_store_chunks"))


# -- bodies: counted before they are walked ------------------------------------------------------

def test_a_conversation_is_refused_at_its_21st_item_before_the_rest_of_the_body_is_parsed(stack: Stack) -> None:
    items = ", ".join(json.dumps({"role": "user", "content": f"item {n}"}) for n in range(21))
    body = f'{{"items": [{items}, this is not JSON at all'  # never read: the 21st item is one too many
    for path in ("/v1/conversations", f"/v1/conversations/{conversation(stack)}/items"):
        answer = httpx2.post(f"{stack.reference_url}{path}", content=body.encode(),
                             headers={"content-type": "application/json"}, timeout=30)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == ("items", "array_above_max_length"), error


def conversation(stack: Stack) -> str:
    return str(httpx2.post(f"{stack.reference_url}/v1/conversations", json={}).json()["id"])


def test_100000_items_are_refused_before_any_check_walks_them(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[str] = []
    checked, nested = RequestSchema.first_violation, strict_json.nesting_depth
    monkeypatch.setattr(RequestSchema, "first_violation",
                        lambda self, body: walked.append("schema") or checked(self, body))
    monkeypatch.setattr(strict_json, "nesting_depth", lambda value: walked.append("depth") or nested(value))
    items = [{"type": "message", "role": "user", "content": "hello"}] * 100_000
    existing = conversation(stack)
    walked.clear()
    for path in ("/v1/conversations", f"/v1/conversations/{existing}/items"):
        answer = httpx2.post(f"{stack.reference_url}{path}", json={"items": items, "metadata": {}}, timeout=60)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "items", answer.text
    assert walked == []


def test_a_count_bound_is_checked_before_the_values_it_bounds(stack: Stack) -> None:
    """17 metadata values, each of the wrong type: the count is what is wrong first."""
    metadata = {f"key{n}": n for n in range(17)}
    answer = httpx2.post(f"{stack.reference_url}/v1/responses", json={"model": "m", "input": "x", "metadata": metadata},
                         timeout=30)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "object_above_max_properties", answer.text


# -- search: the store's lock stays free, the query is bounded, a store is searched once ----------

def test_a_search_leaves_the_store_lock_free_while_sqlite_ranks_the_chunks(stack: Stack, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress handler on every connection, called between SQLite's steps, notes whether the
    store's lock is held while a `MATCH` runs."""
    stores: list[Any] = []
    built = runtime.SqliteStore
    monkeypatch.setattr(runtime, "SqliteStore", lambda *args: stores.append(built(*args)) or stores[-1])
    held_while_ranking: list[bool] = []
    connect = sqlite3.connect

    def watched(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection, running = connect(*args, **kwargs), [""]
        connection.set_trace_callback(lambda sql: running.__setitem__(0, sql))
        connection.set_progress_handler(
            lambda: held_while_ranking.append(stores[0]._lock.locked()) if "MATCH" in running[0] else None, 1)
        return connection

    monkeypatch.setattr(sqlite3, "connect", watched)
    config = reference_config(stack.upstream_url or "", store_path=str(tmp_path / "gateway.sqlite3"))
    server = ServerThread(build_gateway_app(config)).start()
    try:
        with httpx2.Client(base_url=f"{server.url}/v1", timeout=60) as client:
            store_id = client.post("/vector_stores", json={"file_ids": [upload(client)],
                                                           "chunking_strategy": STATIC}).json()["id"]
            hits = client.post(f"/vector_stores/{store_id}/search", json={"query": "word7 word150"}).json()["data"]
    finally:
        server.stop()
    assert len(hits) == 2
    assert held_while_ranking and not any(held_while_ranking)


def on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_long_search_body_is_checked_off_the_loop(traced: tuple[httpx2.Client, SqlTrace],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = traced
    store_id = client.post("/vector_stores", json={"file_ids": [upload(client)]}).json()["id"]
    where: list[bool] = []
    queries = vector_stores._queries
    monkeypatch.setattr(vector_stores, "_queries", lambda value: where.append(on_the_loop()) or queries(value))
    for query in ("word1", ["word1"] * 10_000):
        assert client.post(f"/vector_stores/{store_id}/search", json={"query": query}).status_code == 200
    assert where == [True, False]  # a small body on the loop, a long one in a worker thread


def test_a_large_body_is_parsed_off_the_loop_a_member_at_a_time(traced: tuple[httpx2.Client, SqlTrace],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call into the C scanner, and where it ran: a small body is one call on the loop, a
    large one's 20,000 input items each a call in a worker thread (so no call holds the loop for
    the whole body)."""
    client, _ = traced
    calls: list[tuple[bool, int]] = []
    scan = json_body.DECODER.scan_once  # what `decode` calls too

    def scanned(text: str, at: int) -> tuple[Any, int]:
        value, end = scan(text, at)
        calls.append((on_the_loop(), end - at))
        return value, end

    monkeypatch.setattr(json_body.DECODER, "scan_once", scanned)
    small = {"model": "m", "input": "Hi", "max_output_tokens": 0}  # refused after it is parsed: no model is called
    large = small | {"input": [{"type": "message", "role": "user", "content": "hello " * 3}] * 20_000}
    assert len(json.dumps(large)) > json_body.PARSE_ON_THE_LOOP_BYTES
    for body in (small, large):
        answer = client.post("/responses", content=json.dumps(body), headers={"content-type": "application/json"})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "max_output_tokens", answer.text
    assert calls[0] == (True, len(json.dumps(small)))
    off_the_loop = calls[1:]
    assert not any(loop for loop, _ in off_the_loop) and len(off_the_loop) > 20_000
    assert max(size for _, size in off_the_loop) < 100


def test_a_long_transcript_is_built_and_encoded_for_the_model_off_the_loop_a_member_at_a_time(
        stack: Stack, traced: tuple[httpx2.Client, SqlTrace], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call into the C encoder for the model request, and where it ran: a short transcript
    is encoded in one call on the loop, a long one an item at a time in a worker thread."""
    client, _ = traced
    encoded: list[tuple[bool, int]] = []
    encode = upstream_http.compact_json
    monkeypatch.setattr(upstream_http, "compact_json", lambda value: encoded.append((on_the_loop(), len(
        text := encode(value)))) or text)
    for count in (1, 1000):
        run = new_run_token()
        script = RunScript.model_validate({"steps": [[{"text": "Read."}]]})
        httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
        items = [{"role": "user", "content": f"item {n}"} for n in range(count - 1)]
        encoded.clear()
        answer = client.post("/responses", json={"model": "m", "input": [
            *items, {"role": "user", "content": f"Read. {run_marker(run, 0)}"}]})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
        if count == 1:
            assert [loop for loop, _ in encoded] == [True]  # the whole request at once
        else:
            assert not any(loop for loop, _ in encoded) and len(encoded) > count
            assert max(size for _, size in encoded) < 200  # an item, a key or a value at a time (of 40 KB)


def test_reading_a_response_does_not_read_its_chain(stack: Stack, traced: tuple[httpx2.Client, SqlTrace]) -> None:
    """A continuation's chain holds the whole conversation so far; a `GET` of the response (a
    client polling a background one) answers the response as stored, the chain left unread."""
    client, trace = traced
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Read."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    created = client.post("/responses", json={"model": "m", "input": f"Read. {run_marker(run, 0)}"})
    assert created.status_code == 200, created.text
    trace.run.clear()
    read = client.get(f"/responses/{created.json()['id']}")
    assert read.status_code == 200 and read.content == created.content
    reads = [sql for sql in trace.run if sql.startswith("SELECT")]
    assert reads and not [sql for sql in reads if "chain" in sql], reads


def test_a_query_is_searched_by_its_first_words_only() -> None:
    from responses_parity.reference_impl.vector_stores import MAX_QUERY_WORDS
    match = fts_match([" ".join(f"w{n}" for n in range(100_000)), "later"])
    assert match is not None and match.count(" OR ") + 1 == MAX_QUERY_WORDS
    assert '"w0"' in match and f'"w{MAX_QUERY_WORDS}"' not in match and '"later"' not in match


def test_a_store_named_again_is_looked_up_and_searched_once(stack: Stack, traced: tuple[httpx2.Client, SqlTrace]
                                                            ) -> None:
    client, trace = traced
    store_id = client.post("/vector_stores", json={"file_ids": [upload(client)],
                                                   "chunking_strategy": STATIC}).json()["id"]
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"call": {"tool": "file_search", "arguments": {
        "queries": ["word5"]}}}, {"text": "Found."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    trace.run.clear()
    answer = client.post("/responses", json={
        "model": "m", "input": f"Search. {run_marker(run, 0)}", "include": ["file_search_call.results"],
        "tools": [{"type": "file_search", "vector_store_ids": [store_id] * 1000}]})
    assert answer.status_code == 200, answer.text
    call = next(item for item in answer.json()["output"] if item["type"] == "file_search_call")
    assert [result["text"][:6] for result in call["results"]] == ["word0 "]  # one hit, not one per mention
    assert sum(1 for sql in trace.run if "FROM vector_stores WHERE id" in sql) <= 2  # the check, the loop's run
    assert sum(1 for sql in trace.run if "MATCH" in sql) == 1


def test_a_search_asks_a_filter_once_a_file_and_reads_only_the_text_it_returns(
        traced: tuple[httpx2.Client, SqlTrace], monkeypatch: pytest.MonkeyPatch) -> None:
    client, trace = traced
    text = " ".join(f"common word{n}" for n in range(1500))  # 30 chunks of 100 words, each with "common"
    store_id = client.post("/vector_stores", json={"file_ids": [upload(client, text)],
                                                   "chunking_strategy": STATIC}).json()["id"]
    asked: list[Any] = []
    monkeypatch.setattr(vector_stores, "passes", lambda filter_, attributes: asked.append(attributes) or False)
    found = client.post(f"/vector_stores/{store_id}/search", json={
        "query": "common", "filters": {"type": "eq", "key": "kind", "value": "none"}}).json()
    assert found["data"] == [] and asked == [{}]
    monkeypatch.undo()
    trace.rows = 0
    hits = client.post(f"/vector_stores/{store_id}/search", json={"query": "common", "max_num_results": 2}).json()
    assert len(hits["data"]) == 2
    assert trace.rows < 10  # the store, the best chunks ranked (their texts), not the 30 that match


# -- repeated file ids: one file, indexed once ---------------------------------------------------

def test_a_file_named_many_times_is_indexed_once(traced: tuple[httpx2.Client, SqlTrace]) -> None:
    client, trace = traced
    file_id = upload(client)
    trace.run.clear()
    created = client.post("/vector_stores", json={"file_ids": [file_id] * 500, "chunking_strategy": STATIC})
    assert created.status_code == 200 and created.json()["file_counts"]["total"] == 1, created.text
    assert chunk_inserts(trace) == 3
    trace.run.clear()
    batch = client.post(f"/vector_stores/{created.json()['id']}/file_batches",
                        json={"files": [{"file_id": file_id, "attributes": {"n": n}, "chunking_strategy": STATIC}
                                        for n in range(2000)]})
    assert batch.status_code == 200 and batch.json()["file_counts"]["total"] == 1, batch.text
    assert chunk_inserts(trace) == 3
    attached = client.get(f"/vector_stores/{created.json()['id']}/files/{file_id}").json()
    assert attached["attributes"] == {"n": 1999}  # the last entry naming it says what it is


def test_a_list_longer_than_its_bound_is_refused_before_any_file_is_looked_up(
        traced: tuple[httpx2.Client, SqlTrace]) -> None:
    client, trace = traced
    file_id = upload(client)
    store_id = client.post("/vector_stores", json={}).json()["id"]
    trace.run.clear()
    for path, body in (("/vector_stores", {"file_ids": [file_id] * 501}),
                       (f"/vector_stores/{store_id}/file_batches", {"file_ids": [file_id] * 2001})):
        answer = client.post(path, json=body)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "file_ids", answer.text
    assert not [sql for sql in trace.run if "FROM files" in sql]


# -- paging: a page reads its own rows -----------------------------------------------------------

def rows_read(trace: SqlTrace, request: Callable[[], httpx2.Response]) -> tuple[int, dict[str, Any]]:
    before = trace.rows
    answer = request()
    assert answer.status_code == 200, answer.text
    return trace.rows - before, answer.json()


def test_every_list_reads_one_page_of_rows(stack: Stack, traced: tuple[httpx2.Client, SqlTrace]) -> None:
    client, trace = traced
    conversation_id = client.post("/conversations", json={}).json()["id"]
    for start in range(0, 60, 20):
        client.post(f"/conversations/{conversation_id}/items",
                    json={"items": [{"role": "user", "content": f"item {n}"} for n in range(start, start + 20)]})
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Read."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    response_id = client.post("/responses", json={"model": "m", "input": [
        {"role": "user", "content": f"item {n} {run_marker(run, 0) if n == 0 else ''}"} for n in range(60)]}
                              ).json()["id"]
    file_ids = [upload(client, f"file {n} " + WORDS, f"f{n}.txt") for n in range(30)]
    store_id = client.post("/vector_stores", json={}).json()["id"]
    batch_id = client.post(f"/vector_stores/{store_id}/file_batches", json={"file_ids": file_ids}).json()["id"]
    for _ in range(30):
        client.post("/vector_stores", json={"name": "many"})
    lists = {"conversation items": f"/conversations/{conversation_id}/items",
             "input items": f"/responses/{response_id}/input_items", "files": "/files",
             "vector stores": "/vector_stores", "vector store files": f"/vector_stores/{store_id}/files",
             "batch files": f"/vector_stores/{store_id}/file_batches/{batch_id}/files"}
    for name, path in lists.items():
        first_rows, first = rows_read(trace, lambda path=path: client.get(path, params={"limit": 2}))
        assert len(first["data"]) == 2 and first["has_more"], name
        rows, following = rows_read(trace, lambda path=path, after=first["last_id"]: client.get(
            path, params={"limit": 2, "after": after}))
        assert following["data"][0]["id"] != first["data"][-1]["id"], name
        assert max(first_rows, rows) <= 12, f"{name}: {first_rows} and {rows} rows read for pages of 2"


# -- uploads: streamed to disk, a bounded number at once -----------------------------------------

PIECE = 64 * 1024
_CYCLE = bytes(range(251)) * (PIECE // 251 + 2)


def pattern(offset: int, length: int) -> bytes:
    """`length` (at most `PIECE`) bytes of a file whose byte at `n` is `n % 251`, from `offset`."""
    return _CYCLE[offset % 251:offset % 251 + length]


def multipart(size: int, after_first_piece: Callable[[], None] = lambda: None) -> Iterator[bytes]:
    """A `file` part of `size` bytes (a known pattern, made as it is sent) and a `purpose`;
    calls `after_first_piece` once the first piece of the file was sent."""
    yield (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n'
           b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n')
    for offset in range(0, size, PIECE):
        yield pattern(offset, min(PIECE, size - offset))
        if offset == 0:
            after_first_piece()
    yield b"\r\n--b--\r\n"


MULTIPART = {"content-type": "multipart/form-data; boundary=b"}


def test_an_upload_and_its_download_are_never_held_in_memory_whole(stack: Stack, tmp_path: Path) -> None:
    """The gateway runs in this process, so tracemalloc sees every Python allocation its upload
    and download make; the client's body is made a piece at a time (SQLite's own pages are not
    Python's)."""
    size = 24 * 2**20
    config = reference_config(stack.upstream_url or "", store_path=str(tmp_path / "gateway.sqlite3"))
    server = ServerThread(build_gateway_app(config)).start()
    tracemalloc.start()
    try:
        with httpx2.Client(base_url=f"{server.url}/v1", timeout=120) as client:
            tracemalloc.reset_peak()
            answer = client.post("/files", content=multipart(size), headers=MULTIPART)
            upload_peak = tracemalloc.get_traced_memory()[1]
            assert answer.status_code == 200 and answer.json()["bytes"] == size, answer.text
            tracemalloc.reset_peak()
            digest = hashlib.sha256()
            with client.stream("GET", f"/files/{answer.json()['id']}/content") as download:
                for piece in download.iter_bytes():
                    digest.update(piece)
            download_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        server.stop()
    expected = hashlib.sha256()
    for offset in range(0, size, PIECE):
        expected.update(pattern(offset, min(PIECE, size - offset)))
    assert digest.hexdigest() == expected.hexdigest()
    assert upload_peak < size / 3 and download_peak < size / 3, (upload_peak, download_peak)


def test_a_streamed_upload_over_the_limit_is_a_413_before_the_rest_is_read(stack: Stack,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 2**20)
    answer = httpx2.post(f"{stack.reference_url}/v1/files", content=multipart(8 * 2**20), headers=MULTIPART, timeout=60)
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "request_too_large", answer.text


class _StartOver(Exception):
    """The paused upload's attempt is abandoned: a probe found the only slot free."""


def test_an_upload_beyond_the_cap_is_a_429_once_no_slot_frees_in_time(stack: Stack) -> None:
    """One upload pauses after its first piece while a probe upload asks for the only slot. Which
    of the two takes the slot is a race, so the test decides each round from what the probe got:
    a 429 means the paused upload holds the slot (it may go on); anything else means it does not
    (it was refused, or the gateway has not reached it yet), so it starts over. No round waits on
    an attempt the gateway already refused."""
    config = reference_config(stack.upstream_url or "", max_concurrent_uploads=1, upload_wait_s=0)
    server = ServerThread(build_gateway_app(config)).start()
    paused, decisions = threading.Event(), queue.Queue[bool]()
    results: list[httpx2.Response] = []

    def pause_for_a_decision() -> None:
        paused.set()
        if not decisions.get(timeout=60):
            raise _StartOver

    def upload_until_it_holds_the_slot(holder: httpx2.Client) -> None:
        while True:
            try:
                answer = holder.post("/files", content=multipart(4 * 2**20, pause_for_a_decision), headers=MULTIPART)
            except (_StartOver, httpx2.TransportError):  # the gateway may close a refused upload's connection
                continue
            results.append(answer)
            return

    try:
        with httpx2.Client(base_url=f"{server.url}/v1", timeout=60) as client, \
                httpx2.Client(base_url=f"{server.url}/v1", timeout=60) as holder:
            held = threading.Thread(target=upload_until_it_holds_the_slot, args=(holder,), daemon=True)
            held.start()
            deadline, pause = time.monotonic() + 60, 0.01
            while True:
                assert paused.wait(max(0.0, deadline - time.monotonic())), "the paused upload never reached its pause"
                paused.clear()
                time.sleep(pause)  # ever longer: ever more time for the gateway to reach the paused upload
                refused = client.post("/files", files={"file": ("a.txt", b"a")}, data={"purpose": "assistants"})
                decisions.put(refused.status_code == 429)
                if refused.status_code == 429:
                    break
                assert time.monotonic() < deadline, "the paused upload never took the only slot"
                pause = min(2 * pause, 1.0)
            held.join(60)
            after = client.post("/files", files={"file": ("b.txt", b"b")}, data={"purpose": "assistants"})
    finally:
        decisions.put(False)
        server.stop()
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] | {"message": ""} == {"message": "", "type": "requests", "param": None,
                                                         "code": "rate_limit_exceeded"}
    assert results and results[0].status_code == 200 and after.status_code == 200, (results, after.text)


def test_50_uploads_at_once_all_succeed_under_the_default_cap(stack: Stack) -> None:
    """Beyond the cap, an upload waits for a slot (the default wait is long enough for these)."""
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or ""))).start()

    async def uploads() -> list[int]:
        async with httpx2.AsyncClient(base_url=f"{server.url}/v1", timeout=120,
                                      limits=httpx2.Limits(max_connections=50)) as client:
            answers = await asyncio.gather(*(client.post("/files", files={"file": (f"{n}.txt", bytes(2**20))},
                                                         data={"purpose": "assistants"}) for n in range(50)))
        return [answer.status_code for answer in answers]

    try:
        assert asyncio.run(uploads()) == [200] * 50
    finally:
        server.stop()


# -- the readers that make this cheap read as the simple ones do --------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=5), lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=4), max_leaves=12)
_SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(body=st.dictionaries(st.sampled_from(["items", "metadata", "other", "x"]), _JSON, max_size=4) | _JSON,
       bound=st.integers(0, 4), space=_SPACE, stepwise=st.booleans())
def test_counting_while_parsing_reads_json_as_json_loads_does(body: Any, bound: int, space: str,
                                                              stepwise: bool) -> None:
    """Members counted up to their bound, or refused exactly when one too many is there; read
    stepwise or not, any JSON value."""
    text = json.dumps(body, indent=1 if space else None).replace("\n", "\n" + space)
    limits = {"items": bound, "metadata": bound}
    members = body.items() if isinstance(body, dict) else []
    over = [key for key, value in members if key in limits and isinstance(value, list | dict) and len(value) > bound]
    try:
        parsed = json_body._counted(text, limits, stepwise)
    except json_body.TooManyMembers as refused:
        assert refused.param in over
    else:
        assert not over and parsed == json.loads(text)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(body=st.dictionaries(st.text(max_size=5), _JSON, max_size=5))
def test_encoding_a_member_at_a_time_writes_what_one_call_writes(body: dict[str, Any]) -> None:
    assert upstream_http.json_bytes_stepwise(body) == upstream_http.json_bytes(body)


def test_a_key_named_again_is_one_member() -> None:
    metadata = ", ".join(f'"key{n}": "v"' for n in range(16))
    text = f'{{"metadata": {{{metadata}, "key0": "again"}}}}'
    assert json_body._counted(text, {"metadata": 16}) == json.loads(text)


@pytest.mark.parametrize("text", ['{"items": [1,]}', '{"items" [1]}', '{"a": 1}x', '{"a": 1,}', '{"items": [1 2]}',
                                  '{"items": [', '{"items": [NaN]}', '{"a": "\x01"}', '{1: 2}', '[1,]', '[[1] 2]',
                                  '[{"a": [1,]}]', '[1]x'])
def test_counting_while_parsing_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json_body.DECODER.decode(text)
    for stepwise in (False, True):
        with pytest.raises(ValueError):
            json_body._counted(text, {"items": 20}, stepwise)


def _chunks_word_by_word(text: str, size: int, overlap: int) -> list[str]:
    """The chunking as first written: every word's span in a list, a window of them per chunk."""
    words = [match.span() for match in re.finditer(r"\S+", text)]
    cut = []
    for start in range(0, len(words), size - overlap):
        window = words[start:start + size]
        cut.append(text[window[0][0]:window[-1][1]])
        if start + size >= len(words):
            break
    return cut


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(words=st.lists(st.tuples(st.text("ab\u00e9x", max_size=6),
                                st.sampled_from([" ", "\n", "  ", "\t", "", "\u2003"])), max_size=40),
       size=st.integers(2, 12), overlap_share=st.floats(0, 0.5), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_chunks_cut_a_piece_at_a_time_are_the_chunks_cut_word_by_word(words: list[tuple[str, str]], size: int,
                                                                      overlap_share: float, cuts: list[int]) -> None:
    text = "".join(word + space for word, space in words)
    overlap = int(size * overlap_share)
    edges = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[start:end] for start, end in zip([0, *edges], [*edges, len(text)], strict=True)]
    assert list(text_chunks(pieces, size, overlap)) == _chunks_word_by_word(text, size, overlap)
