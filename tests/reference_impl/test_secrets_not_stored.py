"""An MCP tool's `authorization` and header values reach the MCP server but never the store."""

from __future__ import annotations

from pathlib import Path

import httpx2

from responses_parity.fixtures.recording import fingerprint
from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app

TOKEN = "oauth-secret-7f7f7f7f"
HEADER = "header-secret-8e8e8e8e"


def test_secrets_reach_the_server_but_not_the_database(stack: Stack, tmp_path: Path) -> None:
    database = tmp_path / "gateway.sqlite3"
    app = build_gateway_app(reference_config(stack.upstream_url or "", store_path=str(database)))
    server = ServerThread(app).start()
    try:
        run = new_run_token()
        script = RunScript.model_validate({"steps": [[{"call": {"tool": "add", "arguments": {"a": 1, "b": 1}}},
                                                      {"text": "2"}]]})
        httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json"))
        tools = [{"type": "mcp", "server_label": "calc", "server_url": stack.mcp["calc"].for_run(run).url,
                  "require_approval": "never", "authorization": TOKEN, "headers": {"X-Key": HEADER}}]
        response = httpx2.post(f"{server.url}/v1/responses", timeout=20,
                               json={"model": "m", "input": f"1+1 {run_marker(run, 0)}", "tools": tools})
        assert response.status_code == 200 and TOKEN not in response.text and HEADER not in response.text
        echoed = response.json()["tools"][0]
        assert echoed["authorization"] == "<redacted>" and echoed["headers"] == {"X-Key": "<redacted>"}
    finally:
        server.stop()
    calls = httpx2.get(f"{stack.mcp['calc'].base_url}/__parity/runs/{run}/calls").json()["calls"]
    assert {call["headers"]["authorization"] for call in calls} == {fingerprint(f"Bearer {TOKEN}")}
    assert {call["headers"]["x-key"] for call in calls} == {fingerprint(HEADER)}
    stored = b"".join(path.read_bytes() for path in tmp_path.iterdir())
    assert TOKEN.encode() not in stored and HEADER.encode() not in stored
    assert b"mcp_call" in stored
