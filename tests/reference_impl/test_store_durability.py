"""The SQLite store survives a restart and stays consistent under concurrent chained requests."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import httpx2

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.chain import Chain
from responses_parity.reference_impl.pagination import PageQuery
from responses_parity.reference_impl.store import RESTARTED, SqliteStore, StoredResponse


def register(stack: Stack, turns: list[list[dict]]) -> str:
    run = new_run_token()
    script = RunScript.model_validate({"steps": turns})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    return run


def gateway(stack: Stack, database: Path) -> ServerThread:
    config = reference_config(stack.upstream_url or "", store_path=str(database), max_concurrent_runs=64)
    return ServerThread(build_gateway_app(config)).start()


def last_model_input(stack: Stack, run: str) -> list[str]:
    return httpx2.get(f"{stack.upstream_url}/__parity/runs/{run}").json()["requests"][-1]["item_types"]


def test_a_chain_continues_after_the_gateway_restarts(stack: Stack, tmp_path: Path) -> None:
    database = tmp_path / "gateway.sqlite3"
    run = register(stack, [[{"text": "Rome."}, {"text": "Madrid."}]])
    first_gateway = gateway(stack, database)
    try:
        first = httpx2.post(f"{first_gateway.url}/v1/responses", timeout=20,
                            json={"model": "m", "input": f"Capital of Italy? {run_marker(run, 0)}"}).json()
    finally:
        first_gateway.stop()
    second_gateway = gateway(stack, database)
    try:
        retrieved = httpx2.get(f"{second_gateway.url}/v1/responses/{first['id']}")
        assert retrieved.status_code == 200 and retrieved.json()["output"] == first["output"]
        second = httpx2.post(f"{second_gateway.url}/v1/responses", timeout=20,
                             json={"model": "m", "input": "And of Spain?", "previous_response_id": first["id"]})
    finally:
        second_gateway.stop()
    assert second.status_code == 200, second.text
    assert second.json()["output"][0]["content"][0]["text"] == "Madrid."
    assert last_model_input(stack, run) == ["message", "message", "message"]


def test_fifty_concurrent_chained_requests(stack: Stack, tmp_path: Path) -> None:
    server = gateway(stack, tmp_path / "gateway.sqlite3")
    runs = [register(stack, [[{"text": f"first {i}"}, {"text": f"second {i}"}]]) for i in range(50)]

    async def chains() -> list[tuple[dict, dict]]:
        async with httpx2.AsyncClient(base_url=server.url, timeout=60) as client:
            async def start(index: int, run: str) -> dict:
                answer = await client.post("/v1/responses", json={"model": "m",
                                                                  "input": f"chain {index} {run_marker(run, 0)}"})
                return answer.json()

            firsts = await asyncio.gather(*(start(i, run) for i, run in enumerate(runs)))

            async def follow(first: dict) -> dict:
                answer = await client.post("/v1/responses", json={"model": "m", "input": "and then?",
                                                                  "previous_response_id": first["id"]})
                return answer.json()

            seconds = await asyncio.gather(*(follow(first) for first in firsts))
            retrieved = await asyncio.gather(*(client.get(f"/v1/responses/{r['id']}") for r in firsts + seconds))
            assert all(answer.status_code == 200 for answer in retrieved)
            return list(zip(firsts, seconds, strict=True))

    try:
        pairs = asyncio.run(chains())
    finally:
        server.stop()
    for index, (first, second) in enumerate(pairs):
        assert first["output"][0]["content"][0]["text"] == f"first {index}"
        assert second["output"][0]["content"][0]["text"] == f"second {index}"
        assert second["previous_response_id"] == first["id"]
        assert last_model_input(stack, runs[index]) == ["message", "message", "message"]


def test_opening_a_store_fails_what_a_process_that_died_left_unfinished(tmp_path: Path) -> None:
    path = str(tmp_path / "gateway.sqlite3")
    queued = {"id": "resp_left", "created_at": int(time.time()), "status": "queued", "background": True, "output": [],
              "error": None}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "half", "annotations": []}]}
    done = queued | {"id": "resp_done", "status": "completed", "output": [item]}
    events = [{"type": "response.created", "sequence_number": 0, "response": queued},
              {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": item}]

    async def leave_unfinished() -> None:
        store = SqliteStore(path)
        await store.save(StoredResponse(queued, [], Chain(), streamed=True))
        await store.save_events("resp_left", events)
        await store.save(StoredResponse(done, [], Chain()))
        store.close()

    async def reopen() -> tuple[StoredResponse | None, list[dict], StoredResponse | None]:
        store = SqliteStore(path)
        try:
            return await store.get("resp_left"), await store.events("resp_left"), await store.get("resp_done")
        finally:
            store.close()

    asyncio.run(leave_unfinished())
    left, left_events, finished = asyncio.run(reopen())
    assert left is not None and left.response["status"] == "failed"
    assert left.response["error"] == RESTARTED and left.response["output"] == [item]
    assert [e["type"] for e in left_events] == ["response.created", "response.output_item.done", "error",
                                                "response.failed"]
    assert [e["sequence_number"] for e in left_events] == [0, 1, 2, 3]
    assert left_events[2]["error"]["code"] == "server_error"
    assert left_events[-1]["response"] == left.response
    assert finished is not None and finished.response == done


def test_a_database_from_before_vector_store_activity_is_upgraded_in_place(tmp_path: Path) -> None:
    """The vector_stores table as the gateway wrote it before stores kept their last activity:
    opening it adds the column, each store active since its creation, and loses no store."""
    database = tmp_path / "older.sqlite3"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE vector_stores (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL, "
                   "metadata TEXT NOT NULL, expires_after TEXT)")
        db.execute("INSERT INTO vector_stores VALUES ('vs_old', 'notes', 1700000000, '{}', NULL)")
    store = SqliteStore(str(database))
    try:
        found = asyncio.run(store.get_vector_store("vs_old"))
    finally:
        store.close()
    assert found is not None and (found.name, found.created_at, found.last_active_at) == ("notes", 1700000000,
                                                                                          1700000000)
    reopened = SqliteStore(str(database))  # a second start finds nothing left to upgrade
    reopened.close()


def test_a_database_from_before_input_items_had_rows_of_their_own_is_upgraded_in_place(tmp_path: Path) -> None:
    """The responses table as the gateway wrote it when a response's input items were one JSON
    array in its row: opening it moves them to rows of their own (read a page at a time), loses
    no response and leaves no column behind."""
    database = tmp_path / "older.sqlite3"
    items = [{"id": f"msg_{n}", "type": "message", "role": "user", "content": [{"type": "input_text", "text": str(n)}]}
             for n in range(5)]
    response = {"id": "resp_old", "object": "response", "created_at": int(time.time()), "status": "completed"}
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE responses (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, status TEXT NOT NULL, "
                   "streamed INTEGER NOT NULL DEFAULT 0, response TEXT NOT NULL, input_items TEXT NOT NULL, "
                   "chain TEXT NOT NULL)")
        db.execute("INSERT INTO responses VALUES ('resp_old', ?, 'completed', 0, ?, ?, ?)",
                   (response["created_at"], json.dumps(response), json.dumps(items), json.dumps(Chain().to_json())))

    async def read(store: SqliteStore) -> tuple[StoredResponse | None, list[dict], bool, list[dict]]:
        first, more = await store.input_items_page("resp_old", PageQuery("asc", 3))
        rest, _ = await store.input_items_page("resp_old", PageQuery("asc", 3, after=first[-1]["id"]))
        return await store.get("resp_old"), first, more, rest

    store = SqliteStore(str(database))
    try:
        found, first, more, rest = asyncio.run(read(store))
    finally:
        store.close()
    assert found is not None and found.response == response
    assert (first + rest, more) == (items, True)
    with sqlite3.connect(database) as db:
        assert "input_items" not in {row[1] for row in db.execute("PRAGMA table_info(responses)")}
    SqliteStore(str(database)).close()  # a second start finds nothing left to upgrade
