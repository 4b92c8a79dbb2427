"""Retention: the store keeps stored responses for an age and up to a count, and evicts the rest
with everything kept for them; conversations keep their items; an uploaded file goes once past
its `expires_at`, detached from every vector store. The clock is injected."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import ConfigError, GatewayConfig, build_gateway_app
from responses_parity.reference_impl.chain import Chain
from responses_parity.reference_impl.pagination import PageQuery
from responses_parity.reference_impl.retention import Retention
from responses_parity.reference_impl.store import (Attachment, Conversation, SqliteStore, StoredFile, StoredResponse,
                                                   StoredVectorStore)

T = TypeVar("T")
AUDIT = [{"kind": "model_round", "round": 1, "status": "ok"}]


@dataclass
class Clock:
    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def run(work: Callable[[SqliteStore], Awaitable[T]], retention: Retention, clock: Clock | None = None) -> T:
    """`work` on a fresh in-memory store, closed afterwards."""
    async def go() -> T:
        store = SqliteStore(":memory:", retention, clock or Clock())
        try:
            return await work(store)
        finally:
            store.close()
    return asyncio.run(go())


def response(response_id: str, created_at: float, status: str = "completed") -> StoredResponse:
    body = {"id": response_id, "created_at": int(created_at), "status": status, "output": []}
    return StoredResponse(body, [{"id": f"msg_in_{response_id}", "type": "message", "role": "user", "content": "hi"}],
                          Chain())


def event(response_id: str) -> dict[str, Any]:
    return {"type": "response.created", "sequence_number": 0, "response": {"id": response_id}}


async def end(store: SqliteStore, response_id: str, created_at: float, *, stored: bool = True,
              conversation_items: tuple[str, list[dict[str, Any]]] | None = None) -> None:
    """A run's end, as the gateway stores it: audit, events and (unless `store: false`) the response."""
    await store.save_end(response_id, AUDIT, response=response(response_id, created_at) if stored else None,
                         events=[event(response_id)], conversation_items=conversation_items)


async def kept(store: SqliteStore, ids: list[str]) -> list[str]:
    return [response_id for response_id in ids if await store.get(response_id) is not None]


def test_only_the_newest_finished_responses_are_kept_with_their_events_and_audit() -> None:
    ids = [f"resp_{n}" for n in range(5)]

    async def work(store: SqliteStore) -> tuple[list[str], list[Any], list[Any]]:
        for n, response_id in enumerate(ids):
            await end(store, response_id, Clock.now + n)
        return (await kept(store, ids), [await store.events(i) for i in ids], [await store.audit(i) for i in ids])

    still, events, audits = run(work, Retention(max_age_s=None, max_count=3))
    assert still == ids[2:]
    assert [bool(e) for e in events] == [False, False, True, True, True]
    assert [bool(a) for a in audits] == [False, False, True, True, True]


def test_a_response_still_running_is_never_evicted() -> None:
    async def work(store: SqliteStore) -> list[str]:
        await store.save(response("resp_queued", Clock.now, status="queued"))
        for n in range(5):
            await end(store, f"resp_{n}", Clock.now + 1 + n)
        return await kept(store, ["resp_queued", "resp_0", "resp_4"])

    assert run(work, Retention(max_age_s=None, max_count=2)) == ["resp_queued", "resp_4"]


def test_between_sweeps_the_store_holds_at_most_a_tenth_more_than_its_count() -> None:
    retention = Retention(max_age_s=None, max_count=30)
    assert retention.sweep_every == 3

    async def work(store: SqliteStore) -> list[int]:
        held = []
        ids: list[str] = []
        for n in range(100):
            ids.append(f"resp_{n}")
            await end(store, ids[-1], Clock.now + n)
            held.append(len(await kept(store, ids)))
        return held

    held = run(work, retention)
    assert max(held) == 30 + 3 - 1
    assert min(held[30:]) == 30  # never fewer than the count
    assert held[:30] == list(range(1, 31))


def test_a_response_past_its_age_is_unknown_at_once_and_its_rows_go_at_the_next_sweep() -> None:
    clock = Clock()

    async def work(store: SqliteStore) -> None:
        await end(store, "resp_old", clock.now)
        clock.now += 60
        assert await store.get("resp_old") is not None  # exactly its age: still kept
        clock.now += 1
        assert await store.get("resp_old") is None
        assert await store.events("resp_old")  # not swept yet
        await end(store, "resp_new", clock.now)
        assert await store.events("resp_old") == [] and await store.audit("resp_old") == []
        assert await store.get("resp_new") is not None
        assert not await store.delete("resp_old")

    run(work, Retention(max_age_s=60, max_count=10), clock)


def test_a_file_past_its_expiry_is_unknown_at_once_and_its_row_goes_at_the_next_sweep(tmp_path: Path) -> None:
    clock, path = Clock(), tmp_path / "files.sqlite3"
    now = int(clock.now)

    def attached() -> list[tuple[str, int]]:
        """Each file in the vector store, with how many chunks it has there."""
        return sqlite3.connect(path).execute(
            "SELECT v.file_id, COUNT(c.rowid) FROM vector_store_files v LEFT JOIN vector_store_chunks c "
            "ON c.file_id = v.file_id GROUP BY v.file_id ORDER BY v.file_id").fetchall()

    async def work(store: SqliteStore) -> None:
        await store.save_file(StoredFile("file-expiring", "a.txt", "batch", 3, now, now + 60), b"abc")
        await store.save_file(StoredFile("file-kept", "b.txt", "assistants", 3, now, None), b"xyz")
        await store.save_vector_store(StoredVectorStore("vs_1", "", now, {}, None, now))
        sizes = {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}
        await store.attach_files([Attachment("vs_1", file_id, None, sizes) for file_id in ("file-expiring",
                                                                                           "file-kept")])
        clock.now += 59
        assert await store.file_piece("file-expiring", 0) == b"abc"  # gone at `expires_at`, not before
        clock.now += 1
        assert await store.get_file("file-expiring") is None and await store.file_piece("file-expiring", 0) is None
        assert [file.id for file in (await store.files_page(None, PageQuery()))[0]] == ["file-kept"]
        assert [file.file_id for file in (await store.vector_store_files_page("vs_1", PageQuery()))[0]] == ["file-kept"]
        assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM files").fetchone() == (2,)  # not swept yet
        assert attached() == [("file-expiring", 1), ("file-kept", 1)]
        await end(store, "resp_sweeps", clock.now)
        assert sqlite3.connect(path).execute("SELECT id FROM files").fetchall() == [("file-kept",)]
        assert attached() == [("file-kept", 1)]  # detached from the store, its chunks gone
        assert not await store.delete_file("file-expiring")
        assert (await store.get_file("file-kept")) == StoredFile("file-kept", "b.txt", "assistants", 3, now, None)

    async def go() -> None:
        store = SqliteStore(str(path), Retention(max_age_s=None, max_count=1), clock)
        try:
            await work(store)
        finally:
            store.close()
    asyncio.run(go())


@pytest.mark.parametrize(("max_age_s", "kept_audits"), [(60, [False, False, False, False, True]),
                                                       (None, [False, False, False, True, True])])
def test_the_audit_of_runs_that_stored_no_response_follows_the_age_and_the_count(max_age_s: float | None,
                                                                                 kept_audits: list[bool]) -> None:
    clock = Clock()

    async def work(store: SqliteStore) -> list[bool]:
        for n in range(4):
            await end(store, f"resp_{n}", clock.now, stored=False)
        clock.now += 61
        await end(store, "resp_late", clock.now, stored=False)
        return [bool(await store.audit(f"resp_{n}")) for n in range(4)] + [bool(await store.audit("resp_late"))]

    assert run(work, Retention(max_age_s=max_age_s, max_count=2), clock) == kept_audits


def test_conversation_items_outlive_the_responses_that_added_them() -> None:
    item = {"id": "msg_out_1", "type": "message", "role": "assistant", "content": []}

    async def work(store: SqliteStore) -> tuple[bool, list[dict[str, Any]]]:
        await store.create_conversation(Conversation("conv_1", int(Clock.now), {}), [])
        await end(store, "resp_in_conversation", Clock.now, conversation_items=("conv_1", [item]))
        await end(store, "resp_later", Clock.now + 1)
        return await store.get("resp_in_conversation") is None, await store.items("conv_1")

    evicted, items = run(work, Retention(max_age_s=None, max_count=1))
    assert evicted
    assert items == [item]


def test_expired_tool_cache_entries_are_swept() -> None:
    async def work(store: SqliteStore) -> tuple[Any, Any]:
        await store.cache_put("expired", "v", "s", Clock.now - 1)
        await store.cache_put("fresh", "v", "s", Clock.now + 100)
        await end(store, "resp_0", Clock.now)
        return await store.cache_get("expired"), await store.cache_get("fresh")

    expired, fresh = run(work, Retention(max_age_s=None, max_count=1))
    assert expired is None and fresh is not None


def test_a_store_opened_again_sweeps_what_expired_meanwhile(tmp_path: Path) -> None:
    path, clock = str(tmp_path / "gateway.sqlite3"), Clock()

    async def first() -> None:
        store = SqliteStore(path, Retention(max_age_s=60, max_count=None), clock)
        await end(store, "resp_old", clock.now)
        store.close()

    async def reopened() -> list[dict[str, Any]]:
        clock.now += 61
        store = SqliteStore(path, Retention(max_age_s=60, max_count=None), clock)
        try:
            return await store.events("resp_old")
        finally:
            store.close()

    asyncio.run(first())
    assert asyncio.run(reopened()) == []


# -- the settings ----------------------------------------------------------------------------

def test_retention_defaults_to_openais_30_days_and_a_count_that_keeps_memory_flat() -> None:
    config = GatewayConfig.from_mapping({"upstream": {"url": "http://127.0.0.1:1/v1"}})
    assert config.retention == Retention(max_age_s=30 * 24 * 3600, max_count=10_000)


def test_retention_settings_are_read_and_null_means_no_limit() -> None:
    config = GatewayConfig.from_mapping({"upstream": {"url": "http://127.0.0.1:1/v1"},
                                         "response_retention_s": None, "response_retention_max": 5})
    assert config.retention == Retention(max_age_s=None, max_count=5)


@pytest.mark.parametrize(("setting", "value"), [("response_retention_s", 0), ("response_retention_max", 0)])
def test_retention_that_keeps_nothing_is_refused(setting: str, value: int) -> None:
    with pytest.raises(ConfigError, match=setting):
        GatewayConfig.from_mapping({"upstream": {"url": "http://127.0.0.1:1/v1"}, setting: value})


# -- through the gateway -----------------------------------------------------------------------

@pytest.fixture
def keeps_one(stack: Stack) -> Iterator[str]:
    """A gateway that keeps only the newest finished response."""
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or "",
                                                             response_retention_max=1))).start()
    try:
        yield server.url
    finally:
        server.stop()


def create(stack: Stack, gateway: str, **fields: Any) -> dict[str, Any]:
    run_token = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Rome."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run_token}",
               json=script.model_dump(mode="json")).raise_for_status()
    answer = httpx2.post(f"{gateway}/v1/responses", timeout=20,
                         json={"model": "m", "input": f"Capital of Italy? {run_marker(run_token, 0)}", **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_evicted_response_is_unknown_as_openai_says(stack: Stack, keeps_one: str) -> None:
    evicted = create(stack, keeps_one)["id"]
    newest = create(stack, keeps_one)["id"]
    not_found = {"message": f"Response with id '{evicted}' not found.", "type": "invalid_request_error",
                 "param": None, "code": None}
    for path in (f"/v1/responses/{evicted}", f"/v1/responses/{evicted}/input_items"):
        answer = httpx2.get(f"{keeps_one}{path}")
        assert (answer.status_code, answer.json()) == (404, {"error": not_found}), path
    continued = httpx2.post(f"{keeps_one}/v1/responses", timeout=20,
                            json={"model": "m", "input": "And Spain?", "previous_response_id": evicted})
    assert continued.status_code == 400, continued.text
    assert continued.json()["error"] | {"message": ""} == {"message": "", "type": "invalid_request_error",
                                                           "param": "previous_response_id",
                                                           "code": "previous_response_not_found"}
    assert httpx2.get(f"{keeps_one}/v1/responses/{newest}").status_code == 200


def test_a_conversation_keeps_the_items_of_its_evicted_responses(stack: Stack, keeps_one: str) -> None:
    conversation = httpx2.post(f"{keeps_one}/v1/conversations", json={}).json()["id"]
    first = create(stack, keeps_one, conversation=conversation)
    create(stack, keeps_one)
    assert httpx2.get(f"{keeps_one}/v1/responses/{first['id']}").status_code == 404
    items = httpx2.get(f"{keeps_one}/v1/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
    assert [item["id"] for item in items][-1] == first["output"][-1]["id"]
