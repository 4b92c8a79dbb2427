"""A response's end is shown only once it is stored: when the store cannot take a run's end, no
client is shown that end, on any path."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app
from responses_parity.reference_impl.store import SqliteStore


@pytest.fixture
def failing_store_gateway(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A gateway whose store takes everything but a run's end."""
    async def cannot_store(*_: Any, **__: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(SqliteStore, "save_end", cannot_store)
    config = reference_config(stack.upstream_url or "", store_path=str(tmp_path / "gateway.sqlite3"))
    server = ServerThread(build_gateway_app(config)).start()
    try:
        yield server.url
    finally:
        server.stop()


def request(stack: Stack, **fields: Any) -> dict[str, Any]:
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Rome."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    return {"model": "m", "input": f"Capital of Italy? {run_marker(run, 0)}", **fields}


def streamed(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx2.stream("POST", f"{url}/v1/responses", json=body, timeout=20) as answer:
        assert answer.status_code == 200
        return [json.loads(line.removeprefix("data: ")) for line in answer.iter_lines() if line.startswith("data: ")]


@pytest.mark.parametrize("background", [False, True], ids=["stream", "background-stream"])
def test_a_stream_whose_end_was_not_stored_never_shows_it(failing_store_gateway: str, stack: Stack,
                                                          background: bool) -> None:
    events = streamed(failing_store_gateway, request(stack, stream=True, background=background))
    types = [event["type"] for event in events]
    assert not {"response.completed", "response.failed", "error"} & set(types), types
    if not background:
        assert "response.output_item.done" in types, types  # the run got that far


def test_a_json_answer_whose_end_was_not_stored_is_an_error(failing_store_gateway: str, stack: Stack) -> None:
    answer = httpx2.post(f"{failing_store_gateway}/v1/responses", json=request(stack), timeout=20)
    assert answer.status_code == 500, answer.text
