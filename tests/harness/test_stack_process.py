"""The embedded reference gateway and its fixtures served apart (`engine/stack_process.py`): a
run there has the verdicts of the same run in one process, gateways configured by scenarios
included; settings that make no gateway are the scenario's error there too; a child begun
before its settings are known serves them once told, and one told ahead starts its servers
before it is entered; the child ends with its stack, told or not; a child that dies fails
what waits for it, naming how it ended, instead of hanging the run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import psutil
import pytest

from responses_parity.harness.engine.session import open_session
from responses_parity.harness.engine.stack_process import READY_TIMEOUT_S, StackProcess, reference_settings
from responses_parity.harness.errors import HarnessError
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load, units_of
from responses_parity.harness.scenario.model import MODES, GatewaySetup

SCENARIOS = ("text-basic", "mcp-call", "chat-client-tools", "chat-budgets", "background-poll", "web-search-citations",
             "error-missing-model")
"""Plain, MCP and hosted-tool runs, and runs on gateways their scenarios configure (`gateway:`)."""


def _verdicts(apart: bool) -> list[tuple[Any, ...]]:
    catalogue = load([builtin_scenarios_dir() / f"{name}.yaml" for name in SCENARIOS])
    assert not catalogue.errors
    units = units_of(catalogue.scenarios, MODES)
    with open_session(TargetOptions(), {name for loaded, _ in units for name in loaded.scenario.fixtures},
                      apart=apart) as session:
        assert isinstance(session.stack, StackProcess) == apart
        results = session.run(units, jobs=4)
    return [(r.scenario.id, r.mode, r.outcome, [(s.step_id, sorted(f.rule for f in s.findings)) for s in r.steps])
            for r in results]


def test_a_run_apart_has_the_verdicts_of_the_same_run_in_one_process() -> None:
    apart = _verdicts(apart=True)
    assert {outcome for _, _, outcome, _ in apart} == {"pass"}, apart
    assert any(scenario == "chat-budgets" for scenario, *_ in apart)  # a configured gateway ran in the child
    assert apart == _verdicts(apart=False)


async def _start_a_gateway(stack: StackProcess, setup: GatewaySetup) -> str:
    gateways = stack.reference_gateways()
    assert gateways is not None
    async with gateways.gateway(setup, "run-1") as url:
        return url


def test_settings_that_make_no_gateway_are_the_scenarios_error_apart_too() -> None:
    with StackProcess(with_reference=True) as stack:
        with pytest.raises(HarnessError, match="cannot be configured as the scenario asks: outbound"):
            asyncio.run(_start_a_gateway(stack, GatewaySetup(outbound_allow=["not an address range"])))
        assert asyncio.run(_start_a_gateway(stack, GatewaySetup())).startswith("http://127.0.0.1:")


def test_the_child_ends_with_its_stack() -> None:
    with StackProcess(with_reference=True) as stack:
        pid = stack.pid
        assert pid is not None and psutil.Process(pid).is_running()
    assert stack.pid is None
    assert not psutil.pid_exists(pid)


def test_a_child_begun_before_its_settings_are_known_serves_them_once_told() -> None:
    servers = StackProcess().begin()
    begun = servers.pid
    with servers.tell(mcp_names=("calc",), with_reference=True):
        assert servers.pid == begun  # the child begun ahead serves, no other
        assert set(servers.mcp) == {"calc"} and servers.reference_url is not None
        assert httpx2.get(f"{servers.reference_url}/v1/responses/resp_none").status_code == 404
    assert not psutil.pid_exists(begun)


def _listening(pid: int) -> set[int]:
    return {connection.laddr.port for connection in psutil.net_connections(kind="tcp")
            if connection.pid == pid and connection.status == psutil.CONN_LISTEN}


def test_a_child_told_its_settings_starts_its_servers_before_it_is_entered() -> None:
    """A run tells the child what to serve as soon as its files are read: the servers start
    while it imports what runs the units, and entering finds them serving."""
    servers = StackProcess().tell(**reference_settings(["calc"]))
    try:
        assert servers.pid is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(_listening(servers.pid)) < 4:  # the upstream, the search and calc fixtures, the gateway
            assert time.monotonic() < deadline, "the child told its settings started no servers"
            time.sleep(0.05)
        with servers.tell(**reference_settings(["calc"])):  # told the same again: nothing changes
            urls = (servers.upstream_url, servers.search_url, servers.reference_url, servers.mcp["calc"].base_url)
            assert {urlsplit(url).port for url in urls if url} == _listening(servers.pid)
    finally:
        servers.close()


def test_a_child_never_told_what_to_serve_ends_when_closed() -> None:
    servers = StackProcess().begin()
    pid = servers.pid
    assert pid is not None and psutil.Process(pid).is_running()
    servers.close()
    assert servers.pid is None and not psutil.pid_exists(pid)


def test_a_child_that_dies_fails_what_waits_for_it() -> None:
    with StackProcess(with_reference=True) as stack:
        assert stack.pid is not None
        os.kill(stack.pid, signal.SIGKILL)
        with pytest.raises(HarnessError, match=r"the run's servers stopped \(their process exited with code -9\)"):
            asyncio.run(_start_a_gateway(stack, GatewaySetup()))


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


SERVING_PARENT = """
import sys
from responses_parity.harness.engine.stack_process import StackProcess
if __name__ == "__main__":
    with StackProcess(with_reference=True) as stack:
        print(stack.pid, flush=True)
        sys.stdin.read()
"""
BEGINNING_PARENT = """
import sys
from responses_parity.harness.engine.stack_process import StackProcess
if __name__ == "__main__":
    stack = StackProcess().begin()
    print(stack.pid, flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("parent_script", [SERVING_PARENT, BEGINNING_PARENT], ids=["serving", "not-yet-told"])
def test_the_child_ends_by_itself_when_its_parent_is_killed(tmp_path: Path, parent_script: str) -> None:
    script = tmp_path / "parent.py"
    script.write_text(parent_script)
    parent = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 60  # it reads the end of its requests and ends (then init reaps it, or not)
        while _alive(child):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()


SERVED_APART = """
import json, sys
from responses_parity.harness.engine.session import open_session
from responses_parity.harness.options import TargetOptions
if __name__ == "__main__":
    with open_session(TargetOptions(), ["calc"], apart=True) as session:
        assert session.stack is not None and session.stack.admin_key and "calc" in session.stack.mcp
        print(json.dumps(sorted(sys.modules)))
"""


def test_a_session_served_apart_imports_none_of_the_servers_itself(tmp_path: Path) -> None:
    """The child serves the gateway and the fixtures; the run's own process, which waits for the
    child before it runs anything, does not spend a fifth of a second importing them too."""
    script = tmp_path / "parent.py"
    script.write_text(SERVED_APART)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=300)
    modules = json.loads(done.stdout.splitlines()[-1])
    servers = ("uvicorn", "aiohttp", "responses_parity.harness.engine.stack", "responses_parity.reference_impl.app")
    assert [name for name in servers if name in modules] == []
