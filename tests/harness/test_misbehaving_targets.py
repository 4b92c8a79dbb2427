"""A target that hangs, is unreachable or answers garbage is a finding, never a crash or a
stuck run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import write_scenario
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from responses_parity.harness.cli import main
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.model.findings import Kind

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


def test_an_unreachable_target_is_one_error_before_any_unit(stack: Stack, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    write_scenario(tmp_path, SLOW)
    target = f"http://127.0.0.1:{port}"
    result = CliRunner().invoke(main, ["run", str(tmp_path), "--target", target, "--upstream", stack.upstream_url or "",
                                       "--report-dir", str(tmp_path / "reports")])
    assert result.exit_code == 2, result.output
    assert [line for line in result.output.splitlines() if "error" in line] == [
        f"error the target {target} at {target} is unreachable: cannot connect to 127.0.0.1:{port} "
        "(Connection refused)"]
    assert not (tmp_path / "reports").exists()


@pytest.fixture(params=["<html>not an API</html>", "null"])
def garbage(request: pytest.FixtureRequest) -> Iterator[str]:
    """A target answering 200 with HTML, or with the JSON value null (open-responses-server 0.4.1
    does that for every request that is not streamed)."""
    async def answer(_: Any) -> PlainTextResponse:
        return PlainTextResponse(request.param, status_code=200, media_type="application/json")

    server = ServerThread(Starlette(routes=[Route("/v1/responses", answer, methods=["POST"])])).start()
    yield server.url
    server.stop()


def test_a_body_that_is_not_a_response_is_a_finding(run_scenario: Any, garbage: str) -> None:
    result = run_scenario(SLOW.replace(", delay: 3", ""), target_url=garbage)
    assert result.outcome == "fail"
    [finding] = [f for _, f in result.findings]
    assert finding.message in ("the 200 answer to a create request is not a Response object but null",
                               "the body is not JSON (Expecting value at line 1 column 1); it begins "
                               "'<html>not an API</html>'")
