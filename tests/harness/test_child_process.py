"""Child processes end with what started them: `stop` ends a child's whole process group, and
a starter killed with SIGKILL (as a CI time limit kills a test run, its process group with it)
leaves nothing running: not the `parity proxy` a test session started, not the profiled gateway
`parity run` started nor the worker that gateway forked."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from parity_process import DEADLINE_S, PARITY, ParityProcess, running

from responses_parity.harness.engine.child_process import ChildProcess

HERE = Path(__file__).parent
PROFILE = HERE / "profiles" / "forks-a-worker.yaml"
IGNORES_SIGTERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
                  "signal.pause()"
NEVER_DONE = """
id: never-done
title: waits for a model call that never comes
evidence: {contract: "none", unrecorded: true}
steps:
  - id: waits
    send: false
    wait: {until: {upstream: {model_calls: 1}}, timeout: 120}
"""
"""A scenario that keeps `parity run` going until it is killed."""
PROXY_SESSION = """
import os, threading
from pathlib import Path
from parity_process import PARITY, ParityProcess

def test_a_proxy_runs(tmp_path):
    proxy = ParityProcess([str(PARITY), "proxy", "--upstream", "http://127.0.0.1:9", "--port", "0",
                           "--captures", str(tmp_path / "captures")], tmp_path / "proxy.log")
    proxy.wait_for(r"parity proxy listening on ")
    written = Path(os.environ["PROXY_PID_FILE"] + ".part")
    written.write_text(str(proxy.process.pid))
    written.rename(os.environ["PROXY_PID_FILE"])  # whole once it exists: the test reads it then
    threading.Event().wait()
"""
"""A test session whose test starts `parity proxy` as the project's tests do, then waits to be killed."""


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S:g}s: {what}"
        time.sleep(0.05)  # poll interval while the other processes work


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie waiting for its parent to reap it has)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """PIDs of processes a test's starters started: any still running at the end (the defect the
    test is about) is killed by its PID, so that a failure leaves nothing behind either."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_stop_ends_the_whole_group_even_what_ignores_sigterm(leftovers: list[int]) -> None:
    forks = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {IGNORES_SIGTERM!r}]); input()"
    child = ChildProcess([sys.executable, "-c", forks], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         grace_s=30)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    [worker] = psutil.Process(child.pid).children()
    leftovers.append(worker.pid)
    assert os.getpgid(worker.pid) == os.getpgid(child.pid) == child.group != os.getpgrp()
    started = time.monotonic()
    child.stop()  # the child itself ends on SIGTERM: no waiting for the grace period
    assert time.monotonic() - started < 30
    assert child.returncode == -signal.SIGTERM
    until(lambda: gone(worker.pid), "the worker that ignores SIGTERM ends")
    assert gone(child.group)  # the watchdog, reaped


def test_a_proxy_a_killed_test_session_started_ends(tmp_path: Path, leftovers: list[int]) -> None:
    (tmp_path / "test_proxy_session.py").write_text(textwrap.dedent(PROXY_SESSION))
    pid_file = tmp_path / "proxy.pid"
    env = os.environ | {"PYTHONPATH": str(HERE), "PROXY_PID_FILE": str(pid_file), "PYTEST_ADDOPTS": ""}
    with running(tmp_path) as start:
        session = start([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_proxy_session.py"],
                        "session", cwd=tmp_path, env=env)
        until(pid_file.exists, f"the session's test started the proxy:\n{session.output()}")
        proxy = int(pid_file.read_text())
        leftovers.append(proxy)
        assert not gone(proxy)
        killed_at_the_time_limit(session)
        until(lambda: gone(proxy), "the proxy ends")


def test_a_profiled_gateway_and_its_worker_end_when_the_run_is_killed(tmp_path: Path, leftovers: list[int]) -> None:
    (tmp_path / "never-done.yaml").write_text(NEVER_DONE)
    cache = tmp_path / "cache"
    runs = cache / "gateways" / "forks-a-worker" / "runs"
    with running(tmp_path) as start:
        run = start([str(PARITY), "run", str(tmp_path / "never-done.yaml"), "--target", str(PROFILE), "--report-dir",
                     str(tmp_path / "reports")], "run", env=os.environ | {"PARITY_CACHE_DIR": str(cache)})
        def worker_line() -> str | None:
            logs = [log.read_text() for log in runs.glob("*/gateway.log")]
            return next((line for text in logs for line in text.splitlines() if re.fullmatch(r"worker \d+", line)),
                        None)
        until(lambda: worker_line() is not None, f"the gateway starts its worker:\n{run.output()}")
        worker = int(worker_line().split()[1])
        gateway = psutil.Process(worker).ppid()
        leftovers += [gateway, worker]
        assert psutil.Process(gateway).ppid() == run.process.pid
        killed_at_the_time_limit(run)
        until(lambda: gone(gateway) and gone(worker), "the gateway and its worker end")


def killed_at_the_time_limit(starter: ParityProcess) -> None:
    """SIGKILL to the starter's process group, as a CI runner ends a job at its time limit."""
    os.killpg(os.getpgid(starter.process.pid), signal.SIGKILL)
    starter.process.wait(timeout=DEADLINE_S)
    assert starter.process.returncode == -signal.SIGKILL
