"""One judge: the same answer gets the same finding whichever way it reaches the harness: a
scenario the engine runs, traffic the proxy relays, a capture `parity replay` sends again, a
capture `parity check-exchange` reads."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from faulty_gateways import TEXT_SCENARIO, RewritingGateway, numbered_from_one
from parity_process import DEADLINE_S, PARITY, ParityProcess, running
from proxy_process import captured_files, start_proxy

from responses_parity.fixtures.upstream.script import AdHocScript
from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.reference_impl import build_gateway_app

RULE = "grammar.sequence_numbers"
MESSAGE = "event 0 (response.created) has sequence_number 1, expected 0: numbering starts at 0 and goes up by 1"
"""What a gateway that numbers its stream's events from 1 gets, from the stream grammar."""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ParityProcess]]:
    with running(tmp_path) as start:
        yield start


def faulty_gateway(stack: Stack) -> ServerThread:
    """The reference gateway on `stack`'s model, its streams numbered from 1."""
    app = build_gateway_app(reference_config(stack.upstream_url or ""))
    return ServerThread(RewritingGateway(app, events=numbered_from_one)).start()


def through_the_engine(run_scenario: Callable[..., object], url: str) -> list[tuple[str, str]]:
    result = run_scenario(TEXT_SCENARIO, mode="stream", target_url=url)
    return [(finding.rule, finding.message) for _, finding in result.findings]  # type: ignore[attr-defined]


def test_the_engine_the_proxy_replay_and_check_exchange_find_the_same_fault(
        stack: Stack, run_scenario: Callable[..., object], start: Callable[..., ParityProcess],
        tmp_path: Path) -> None:
    engine_gateway = faulty_gateway(stack)
    try:
        assert (RULE, MESSAGE) in through_the_engine(run_scenario, engine_gateway.url)
    finally:
        engine_gateway.stop()

    captures = tmp_path / "captures"
    with Stack(with_reference=False, adhoc_script=AdHocScript.model_validate({"turns": [{"text": "Hi."}] * 2})) \
            as scripted:
        gateway = faulty_gateway(scripted)
        try:
            proxy, url = start_proxy(start, gateway.url, captures, "--json")
            with httpx2.Client(timeout=DEADLINE_S) as client:
                answer = client.post(f"{url}/v1/responses", json={"model": "m", "input": "Hello", "stream": True})
            assert answer.status_code == 200
            proxied = json.loads(proxy.wait_for(r'^\{"capture": "0001-post-v1-responses.json".*"rule": "'
                                                + RULE.replace(".", r"\.") + '".*$').group(0))
            assert proxied["message"] == MESSAGE
            capture = captured_files(captures, 1)[0]

            replayed = child_process.run([str(PARITY), "replay", str(capture), "--target", gateway.url, "--json"],
                                         capture_output=True, text=True, timeout=120, check=False)
        finally:
            gateway.stop()
    findings = json.loads(replayed.stdout.splitlines()[-1])["findings"]
    assert {"rule": RULE, "message": MESSAGE} in [{"rule": f["rule"], "message": f["message"]} for f in findings], \
        replayed.stdout + replayed.stderr

    checked = child_process.run([str(PARITY), "check-exchange", "--current", str(capture)], capture_output=True,
                                text=True, timeout=120, check=False)
    assert checked.returncode == 1
    assert f"{RULE}: {MESSAGE}" in checked.stdout, checked.stdout
