"""A target that hangs, is unreachable or answers garbage is a finding, never a crash or a
stuck run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from responses_parity.harness.findings import Kind
from responses_parity.harness.stack import ServerThread

SLOW = """
id: slow
title: the model takes its time
evidence: {contract: "1.3"}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "late", delay: 3}]
    expect: {status: completed}
"""


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_a_hang_is_a_transport_finding(run_scenario: Any, mode: str) -> None:
    result = run_scenario(SLOW, mode=mode, timeout_s=1)
    assert result.outcome == "fail"
    [transport] = [f for _, f in result.findings if f.kind is Kind.TRANSPORT]
    assert transport.message == "no complete answer within 1s"


def test_an_unreachable_target_is_a_finding(run_scenario: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_scenario(SLOW.replace(", delay: 3", ""), target_url=f"http://127.0.0.1:{port}")
    assert result.outcome == "fail"
    assert any(f.kind is Kind.TRANSPORT and "ConnectError" in f.message for _, f in result.findings)


@pytest.fixture
def garbage() -> Iterator[str]:
    async def answer(request: Any) -> PlainTextResponse:
        return PlainTextResponse("<html>not an API</html>", status_code=200)

    server = ServerThread(Starlette(routes=[Route("/v1/responses", answer, methods=["POST"])])).start()
    yield server.url
    server.stop()


def test_a_body_that_is_not_a_response_is_a_finding(run_scenario: Any, garbage: str) -> None:
    result = run_scenario(SLOW.replace(", delay: 3", ""), target_url=garbage)
    assert result.outcome == "fail"
    assert [f.message for _, f in result.findings] == [
        "the answer (HTTP 200) carries no Response object: the body is not one"]
