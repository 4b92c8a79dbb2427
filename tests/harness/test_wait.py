"""`parity wait` as a CI step runs it: a separate process polling servers that are still
starting, on real loopback servers; it returns once they answer, and fails naming the URL
when they do not within the deadline."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from responses_parity.harness.defaults import LOOPBACK
from responses_parity.harness.engine import child_process
from responses_parity.harness.engine.child_process import ChildProcess
from responses_parity.harness.engine.server_thread import ServerThread

PARITY = Path(sys.executable).with_name("parity")
DEADLINE_S = 30.0


class Health:
    """A server whose status is set by the test; it counts the requests it answered."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.seen = 0

    def app(self) -> Starlette:
        async def answer(request: Request) -> PlainTextResponse:
            self.seen += 1
            return PlainTextResponse(f"status {self.status}", status_code=self.status)

        return Starlette(routes=[Route("/{path:path}", answer)])


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {DEADLINE_S:g}s"
        time.sleep(0.05)  # poll interval while the other process works


@pytest.fixture
def waiting() -> Iterator[list[ChildProcess]]:
    """`parity wait` processes started by a test, stopped by their PID if still running."""
    started: list[ChildProcess] = []
    yield started
    for process in started:
        process.stop()


def start_wait(waiting: list[ChildProcess], *args: str) -> ChildProcess:
    process = ChildProcess([str(PARITY), "wait", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waiting.append(process)
    return process


def test_it_waits_through_failed_connections_until_the_server_answers(waiting: list[ChildProcess]) -> None:
    """The port first drops every connection unanswered (a server still starting), then a
    gateway without a health route answers 404: its application is up."""
    with socket.create_server((LOOPBACK, 0)) as starting:
        port = starting.getsockname()[1]
        process = start_wait(waiting, f"http://{LOOPBACK}:{port}/v1/models", "--timeout", str(DEADLINE_S))
        starting.settimeout(DEADLINE_S)
        for _ in range(2):
            connection, _ = starting.accept()
            connection.close()
    assert process.poll() is None, process.communicate()
    health = Health(404)
    server = ServerThread(health.app(), port).start()
    try:
        out, err = process.communicate(timeout=DEADLINE_S)
    finally:
        server.stop()
    assert process.returncode == 0, err
    assert out == f"{server.url}/v1/models answers\n"
    assert health.seen == 1


def test_a_server_error_is_not_ready_and_the_wait_goes_on(waiting: list[ChildProcess]) -> None:
    health = Health(503)
    server = ServerThread(health.app()).start()
    try:
        process = start_wait(waiting, server.url, "--timeout", str(DEADLINE_S))
        until(lambda: health.seen >= 2, "two polls answered 503")
        assert process.poll() is None, process.communicate()
        health.status = 200
        out, err = process.communicate(timeout=DEADLINE_S)
    finally:
        server.stop()
    assert process.returncode == 0, err
    assert out.endswith("answers\n")


def test_the_deadline_fails_the_wait_naming_the_url_and_what_it_got(waiting: list[ChildProcess]) -> None:
    health = Health(503)
    server = ServerThread(health.app()).start()
    silent = socket.socket()
    silent.bind((LOOPBACK, 0))  # bound, never listening: every connection is refused
    silent_url = f"http://{LOOPBACK}:{silent.getsockname()[1]}"
    try:
        started = time.monotonic()
        process = start_wait(waiting, server.url, silent_url, "--timeout", "5")
        out, err = process.communicate(timeout=DEADLINE_S)
        took = time.monotonic() - started
    finally:
        server.stop()
        silent.close()
    assert process.returncode == 1
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"error {server.url} did not answer within 5s: HTTP 503: status 503"
    assert lines[1].startswith(f"error {silent_url} did not answer within 5s: ConnectError")
    assert 5 <= took < DEADLINE_S


@pytest.mark.parametrize("url", ["localhost:8080", "ftp://127.0.0.1/", "http://"])
def test_what_is_not_an_http_url_is_a_usage_error(url: str) -> None:
    ran = child_process.run([str(PARITY), "wait", url], capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert ran.returncode == 2
    assert f"Invalid value for 'URL...': '{url}'" in ran.stderr
