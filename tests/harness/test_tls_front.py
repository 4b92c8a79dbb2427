"""The TLS front a profile can put before the scripted upstream (`upstream_tls`): a client that
trusts its certificate (and nothing else) reaches the plain-HTTP server through it over HTTPS,
a stream and a WebSocket included; one that trusts the usual authorities is refused; stopping it
ends what it relays. The harness's own clients trust what httpx trusts (`SSL_CERT_FILE` names
the front's authority), loaded once for a whole run."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from websockets import ConnectionClosed
from websockets.sync.client import connect

from responses_parity.fixtures.upstream.script import AdHocScript
from responses_parity.harness.defaults import DEFAULT_MODEL
from responses_parity.harness.engine.session import open_session
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import http_client, tls_context
from responses_parity.harness.engine.tls_front import TlsFront, start_tls_front
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, units_of
from responses_parity.harness.scenario.loader import load as load_scenarios

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def fronted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsFront]:
    script = AdHocScript.model_validate({"turns": [{"text": "Hello over TLS."}] * 3})  # one per request
    with Stack(adhoc_script=script) as stack:
        assert stack.upstream_url is not None
        front = start_tls_front(stack.upstream_url, tmp_path_factory.mktemp("tls"))
        yield front
        front.stop()


def test_a_client_trusting_its_certificate_gets_the_servers_answers(fronted: TlsFront) -> None:
    assert fronted.url.startswith("https://127.0.0.1:")
    with httpx2.Client(verify=ssl.create_default_context(cafile=fronted.ca_file), timeout=DEADLINE_S) as client:
        answer = client.post(f"{fronted.url}/v1/responses", json={"model": DEFAULT_MODEL, "input": "Hi"})
        assert answer.json()["output"][0]["content"][0]["text"] == "Hello over TLS."
        with client.stream("POST", f"{fronted.url}/v1/responses",
                           json={"model": DEFAULT_MODEL, "input": "Hi", "stream": True}) as streamed:
            assert "response.completed" in streamed.read().decode()


async def _get(url: str) -> int:
    async with http_client(DEADLINE_S) as client:
        return (await client.get(url)).status_code


def test_the_harness_clients_trust_what_httpx_trusts(fronted: TlsFront, monkeypatch: pytest.MonkeyPatch) -> None:
    health = f"{fronted.url}/__parity/health"
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls_context.cache_clear()
    try:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(_get(health))
        tls_context.cache_clear()
        monkeypatch.setenv("SSL_CERT_FILE", str(fronted.ca_file))
        assert asyncio.run(_get(health)) == 200
    finally:
        tls_context.cache_clear()


def test_a_run_loads_the_trust_store_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run makes several clients (to the target, to the fixtures, one for each step that
    drops its connection on purpose); a client given no context loads the trust store itself
    (tens of milliseconds each), so every one is given the same. (The gateway's own clients,
    served apart, are another process's.)"""
    trusted = []
    make = httpx2.AsyncClient.__init__
    monkeypatch.setattr(httpx2.AsyncClient, "__init__",
                        lambda client, **how: trusted.append(how.get("verify", True)) or make(client, **how))
    tls_context.cache_clear()
    catalogue = load_scenarios([builtin_scenarios_dir() / "client-disconnect.yaml"])
    try:
        with open_session(TargetOptions(), catalogue.scenarios[0].scenario.fixtures, apart=True) as session:
            results = session.run(units_of(catalogue.scenarios, ("nonstream",)))
    finally:
        tls_context.cache_clear()
    assert [result.outcome for result in results] == ["pass"]
    assert len(trusted) >= 3
    assert all(isinstance(context, ssl.SSLContext) for context in trusted)
    assert len({id(context) for context in trusted}) == 1


def test_a_websocket_passes_through_it(fronted: TlsFront) -> None:
    context = ssl.create_default_context(cafile=fronted.ca_file)
    with connect("wss" + fronted.url.removeprefix("https") + "/v1/responses", ssl=context,
                 open_timeout=DEADLINE_S) as socket:
        socket.send(json.dumps({"type": "response.create", "model": DEFAULT_MODEL, "input": "Hi"}))
        frames = []
        while not frames or frames[-1]["type"] != "response.completed":
            frames.append(json.loads(socket.recv(timeout=DEADLINE_S)))
    assert frames[0]["type"] == "response.created"


def test_a_client_trusting_the_usual_authorities_is_refused(fronted: TlsFront) -> None:
    with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx2.get(f"{fronted.url}/health", timeout=DEADLINE_S)


def test_stopping_it_ends_what_it_relays(tmp_path: Path) -> None:
    with Stack() as stack:
        assert stack.upstream_url is not None
        front = start_tls_front(stack.upstream_url, tmp_path)
        context = ssl.create_default_context(cafile=front.ca_file)
        with connect("wss" + front.url.removeprefix("https") + "/v1/responses", ssl=context,
                     open_timeout=DEADLINE_S) as socket:
            front.stop()
            with pytest.raises(ConnectionClosed):  # without a close frame: the front cut the connection
                socket.recv(timeout=DEADLINE_S)
