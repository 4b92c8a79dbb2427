"""`GET /admin/audit/{run_id}`: read only with the admin key the settings name, in OpenAI's error
shape otherwise; a gateway without an admin key has no such route."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import ConfigError, GatewayConfig, build_gateway_app

KEY = "admin-key-for-tests-5a5a5a5a"


def serve(stack: Stack, **settings: str) -> Iterator[str]:
    server = ServerThread(build_gateway_app(reference_config(stack.upstream_url or "", **settings))).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> Iterator[str]:
    yield from serve(stack, admin_key=KEY)


@pytest.fixture(scope="module")
def response_id(stack: Stack, gateway: str) -> str:
    """The id of one finished loop run (one model round)."""
    run = new_run_token()
    script = RunScript.model_validate({"steps": [[{"text": "Hello"}]]})
    httpx2.put(f"{stack.upstream_url}/__parity/runs/{run}", json=script.model_dump(mode="json")).raise_for_status()
    response = httpx2.post(f"{gateway}/v1/responses", timeout=20,
                           json={"model": "m", "input": f"Hi {run_marker(run, 0)}"})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def error(status: int, message: str, code: str | None = None) -> tuple[int, dict[str, object]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def test_the_admin_key_reads_a_runs_audit(gateway: str, response_id: str) -> None:
    answer = httpx2.get(f"{gateway}/admin/audit/{response_id}", headers={"Authorization": f"Bearer {KEY}"})
    assert answer.status_code == 200
    assert answer.json()["run_id"] == response_id
    assert [(record["kind"], record["round"]) for record in answer.json()["records"]] == [("model_round", 1)]


MISSING = "The admin routes need the gateway's admin key, sent as 'Authorization: Bearer <key>'."


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, error(401, MISSING)),
    ({"Authorization": f"Basic {KEY}"}, error(401, MISSING)),
    ({"Authorization": KEY}, error(401, MISSING)),
    ({"Authorization": "Bearer"}, error(401, MISSING)),
    ({"Authorization": f"Bearer {KEY}x"}, error(401, "Incorrect admin key provided.", "invalid_api_key")),
    ({"Authorization": f"Bearer {KEY[:-1]}"}, error(401, "Incorrect admin key provided.", "invalid_api_key")),
])
def test_without_the_admin_key_a_runs_audit_is_a_401(gateway: str, response_id: str, headers: dict[str, str],
                                                       expected: tuple[int, dict[str, object]]) -> None:
    answer = httpx2.get(f"{gateway}/admin/audit/{response_id}", headers=headers)
    assert (answer.status_code, answer.json()) == expected


def test_an_unknown_run_is_a_404(gateway: str) -> None:
    answer = httpx2.get(f"{gateway}/admin/audit/resp_unknown", headers={"Authorization": f"Bearer {KEY}"})
    assert (answer.status_code, answer.json()) == error(404, "No audit records for run 'resp_unknown'.")


@pytest.mark.parametrize("settings", [{}, {"admin_key": ""}])
def test_without_an_admin_key_in_the_settings_there_is_no_audit_route(stack: Stack, settings: dict[str, str]) -> None:
    for url in serve(stack, **settings):
        answer = httpx2.get(f"{url}/admin/audit/resp_any", headers={"Authorization": "Bearer"})
        assert (answer.status_code, answer.json()) == error(404, "Invalid URL (GET /admin/audit/resp_any)")


def test_the_admin_key_comes_from_the_variable_the_settings_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_TEST_ADMIN_KEY", KEY)
    config = GatewayConfig.from_mapping({"upstream": {"url": "http://127.0.0.1:1/v1"},
                                         "admin_key_env": "PARITY_TEST_ADMIN_KEY"})
    assert config.admin_key == KEY and KEY not in repr(config)
    with pytest.raises(ConfigError, match="unknown field"):
        GatewayConfig.from_mapping({"upstream": {"url": "http://127.0.0.1:1/v1"}, "admin_key": KEY})
