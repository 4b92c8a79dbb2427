"""Shared test fixtures: one stack of real servers on loopback for the whole test session,
and a helper that runs a scenario (given as YAML text) against any target."""

from __future__ import annotations

import asyncio
import gc
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from hypothesis import HealthCheck, settings

from responses_parity.fixtures.mcp import FIXTURE_SERVERS
from responses_parity.harness.engine.fixture_client import FixtureClient
from responses_parity.harness.engine.runner import Engine
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.judge.results import ScenarioResult
from responses_parity.harness.probe.run import PROBED_GATEWAY
from responses_parity.harness.scenario.loader import LoadedScenario, load_file
from responses_parity.harness.scenario.model import Mode
from responses_parity.reference_impl import build_gateway_app

RunScenario = Callable[..., ScenarioResult]
_FIGURES = pytest.StashKey[list[str]]()

# Property tests judge what an example does, never how long it took: Hypothesis's default 200 ms
# deadline per example (and its check that generating examples is not too slow) fail a test when
# a loaded machine merely pauses it.
settings.register_profile("parity", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("parity")


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    """A command run in a test's process settles the garbage collector as for a process of its
    own (harness/engine/collector.py); each test leaves it as it found it."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    with Stack(mcp_names=FIXTURE_SERVERS, with_reference=True) as running:
        yield running


@pytest.fixture(scope="session")
def probed_gateway(stack: Stack) -> Iterator[str]:
    """The URL of a reference gateway set up as `parity probe` sets one up (a chat completion runs
    through its loop, so it is checked), on the session's fixtures."""
    config = reference_config(stack.upstream_url or "", stack.search_url, **PROBED_GATEWAY)
    server = ServerThread(build_gateway_app(config)).start()
    yield server.url
    server.stop()


def write_scenario(directory: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def run_scenario(stack: Stack, tmp_path: Path) -> RunScenario:
    """Run a scenario written as YAML against a target URL (default: the reference gateway)."""

    def run(text: str, mode: Mode = "nonstream", target_url: str | None = None,
            timeout_s: float = 20) -> ScenarioResult:
        path = write_scenario(tmp_path, text)
        scenario = load_file(path)
        assert not isinstance(scenario, list), scenario
        target = Target("test", target_url or stack.reference_url or "", timeout_s=timeout_s)

        async def go() -> ScenarioResult:
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(timeout_s)) as http:
                fixtures = FixtureClient(http, stack.upstream_url or "", stack.mcp, stack.search_url)
                engine = Engine(target, http, fixtures, gateways=stack.reference_gateways())
                return await engine.run(LoadedScenario(scenario, path), mode)

        return asyncio.run(go())

    return run


@pytest.fixture
def record_figure(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Keep a figure a test measured (how many cases it generated, ...) for the end of the run."""
    return pytestconfig.stash.setdefault(_FIGURES, []).append


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    figures = config.stash.get(_FIGURES, [])
    if figures:
        terminalreporter.section("figures")
        for figure in figures:
            terminalreporter.write_line(figure)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--peers", action="store_true",
                     help="Run the peer tier: the suite against smg, Llama Stack, open-responses-server and LiteLLM "
                          "(installed from PyPI on first use).")


FULL_PROBE_SET = "full_probe_set"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "peers: runs real peer gateways (opt in with --peers)")
    config.addinivalue_line("markers", f"{FULL_PROBE_SET}: every generated probe against the reference gateway "
                                       f"(opt in with -m {FULL_PROBE_SET}; CI runs it as a step of its own)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL_PROBE_SET not in (config.option.markexpr or ""):
        leave_out = pytest.mark.skip(reason=f"the full probe set sends over 10,000 requests (about 40 s): "
                                            f"pytest -m {FULL_PROBE_SET}, as CI does")
        for item in items:
            if FULL_PROBE_SET in item.keywords:
                item.add_marker(leave_out)
    if config.getoption("peers"):
        return
    skip = pytest.mark.skip(reason="the peer tier installs four gateways from PyPI on first use and runs the whole "
                                   "suite against each (about 8 minutes, 3 once they are installed): pass --peers")
    for item in items:
        if "peers" in item.keywords:
            item.add_marker(skip)
