"""A plain response costs the store one transaction (one commit, one sync of the WAL): its
end, with its audit, its conversation items and its retention sweep; nothing is committed when
it is created. Counted from the statements SQLite runs (a trace callback on the store's
connection), so a write outside a transaction counts as the commit it is."""

from __future__ import annotations

import json
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
from sql_trace import SqlTrace


@pytest.fixture(params=[None, 1], ids=["default-retention", "sweep-at-every-end"])
def traced_gateway(request: pytest.FixtureRequest, stack: Stack,
                   tmp_path: Path) -> Iterator[tuple[str, SqlTrace, bool]]:
    """A gateway on a WAL file store whose statements are traced, and whether it sweeps at
    every end (else not within this test)."""
    statements = SqlTrace()
    settings: dict[str, Any] = {"store_path": str(tmp_path / "gateway.sqlite3")}
    if request.param is not None:
        settings["response_retention_max"] = request.param
    with statements.connections():
        app = build_gateway_app(reference_config(stack.upstream_url or "", **settings))
    server = ServerThread(app).start()
    try:
        yield server.url, statements, request.param is not None
    finally:
        server.stop()


def body(stack: Stack, **fields: Any) -> dict[str, Any]:
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Rome."}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    return {"model": "m", "input": f"Capital of Italy? {run_marker(run, 0)}", **fields}


def respond(url: str, request: dict[str, Any]) -> str:
    """The id of the response, once the client has seen it complete."""
    if not request.get("stream"):
        answer = httpx2.post(f"{url}/v1/responses", json=request, timeout=20)
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
        return str(answer.json()["id"])
    with httpx2.stream("POST", f"{url}/v1/responses", json=request, timeout=20) as answer:
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed", events[-1]
    return str(events[-1]["response"]["id"])


@pytest.mark.parametrize("fields", [{}, {"stream": True}, {"store": False}, {"stream": True, "store": False},
                                    {"conversation": True}],
                         ids=["json", "stream", "json-store-false", "stream-store-false", "conversation"])
def test_a_response_commits_once(traced_gateway: tuple[str, SqlTrace, bool], stack: Stack,
                                 fields: dict[str, Any]) -> None:
    url, statements, sweeps = traced_gateway
    respond(url, body(stack))  # an earlier response, for the sweep to evict
    if fields.pop("conversation", False):
        fields["conversation"] = httpx2.post(f"{url}/v1/conversations", json={}).json()["id"]
    statements.run.clear()
    response_id = respond(url, body(stack, **fields))
    assert statements.commits() == 1, statements.run
    written = " ".join(statements.writes())
    assert ("INTO responses" in written) == fields.get("store", True), written
    assert ("INTO conversation_items" in written) == ("conversation" in fields), written
    assert "INTO audit_trails" in written, written
    assert ("DELETE FROM tool_cache" in written) == sweeps, written
    assert ("DELETE FROM responses" in written) == (sweeps and fields.get("store", True)), written
    found = httpx2.get(f"{url}/v1/responses/{response_id}").status_code
    assert found == (200 if fields.get("store", True) else 404)
