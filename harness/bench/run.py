"""A benchmark run: start the scripted upstream, the `calc` MCP fixture and every target that
needs starting in processes of their own; then, round after round, for each workload and each
target, measure a floor batch and right after it the target's batch, reading the CPU time of
every process the run started around each batch. A proxy's checker (a process of its own, at the
lowest priority) is read apart, and waited for after each batch until it stops working:
what it does for a batch is counted in that batch and never slows the next. Stops everything it
started, by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...fixtures.upstream.script import new_run_token
from ..defaults import DEFAULT_MODEL
from ..engine.fixture_client import FixtureClient
from ..engine.gateway_process import install, start
from ..engine.profile import ProfileError, find_profile, unknown_target
from ..engine.rewrites import Rewrites
from ..engine.targets import http_client
from ..errors import HarnessError
from ..scenario.fixtures import McpFixture
from .client import Client
from .processes import ServedPart, cpu_seconds, rss_bytes, write_reference_config
from .workloads import (FIXTURE, SOCKET_WORKLOADS, WORKLOADS, Batch, Endpoint, RunTokens, Sizes, Workload,
                        client_driven_mcp_batch, gateway_batch, scripts)

REFERENCE = "reference"
FLOOR = "floor"
PROXY = "proxy:"
"""`proxy:<target>`: `parity proxy` in front of that target, measured beside it alone."""
CHECKER = "/checker"
"""A proxy's name and this: its checker process's CPU time (`Measured.cpu_s`)."""
WARM_UP_REQUESTS = 5
CATCH_UP_POLL_S = 0.05
IDLE_CPU_S = 0.015
"""A checker that spent at most this (a clock tick and a half) over a poll has caught up."""
CATCH_UP_DEADLINE_S = 120.0


@dataclass(frozen=True)
class BenchOptions:
    targets: tuple[str, ...]
    """`reference`, a profile's name or file, the base URL of a running gateway (pointed at
    `upstream`), or `proxy:` and one of those."""
    rounds: int = 5
    sizes: Sizes = field(default_factory=Sizes)
    workloads: tuple[Workload, ...] = WORKLOADS
    upstream: str | None = None
    """A scripted upstream already running (a URL target's gateway talks to it); None: start one."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Headers for URL targets (an API key)."""
    model: str = DEFAULT_MODEL
    timeout_s: float = 60.0
    profile_dirs: tuple[Path, ...] = ()


@dataclass
class BenchTarget:
    """A target under measurement: how to reach it, its process (when the run started it), and
    the workloads it cannot run, with why."""

    name: str
    title: str
    endpoint: Endpoint
    pid: int | None = None
    cannot: dict[Workload, str] = field(default_factory=dict)
    rss: list[int] = field(default_factory=list)
    """Resident memory of its process after the warm-up, then after each round (none when the run
    did not start it)."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The values of the headers it is sent (a key, a profile's per-start secret): never in a report."""
    baseline: str = FLOOR
    """What its batches are paired with: the floor, or for a proxy the target behind it alone."""


@dataclass
class Measured:
    """One batch, where it ran, and the CPU seconds each started process spent during it."""

    round: int
    workload: Workload
    target: str
    floor_for: str | None
    """For a floor batch (or a proxied target's batch as a proxy's baseline), the target measured
    right after it."""
    batch: Batch
    cpu_s: dict[str, float]


@dataclass
class BenchResult:
    options: BenchOptions
    targets: list[BenchTarget]
    measured: list[Measured]
    processes: dict[str, str]
    """Process name -> what it is (the run's own processes, whose CPU time is read)."""
    machine: dict[str, Any]


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}


class _Started:
    """What the run started, stopped in reverse order."""

    def __init__(self) -> None:
        self.stops: list[Callable[[], None]] = []
        self.pids: dict[str, int] = {}
        self.what: dict[str, str] = {}
        self.checked: set[str] = set()
        """Proxies: their children are their checker."""

    def add(self, name: str, what: str, pid: int, stop: Callable[[], None], *, checked: bool = False) -> None:
        self.pids[name] = pid
        self.what[name] = what
        self.stops.append(stop)
        if checked:
            self.checked.add(name)

    def stop_all(self) -> None:
        for stop in reversed(self.stops):
            stop()


def with_proxied(names: tuple[str, ...]) -> tuple[str, ...]:
    """The targets, each proxied one measured too, alone, right before its first proxy."""
    ordered: list[str] = []
    for name in names:
        behind = name.removeprefix(PROXY)
        if behind != name and behind not in ordered:
            if behind.startswith(PROXY):
                raise HarnessError(f"{name!r}: a proxy in front of a proxy is not measured")
            ordered.append(behind)
        if name not in ordered:
            ordered.append(name)
    return tuple(ordered)


def _proxy_target(name: str, behind: BenchTarget, options: BenchOptions, *, started: _Started,
                  work_dir: Path, say: Callable[[str], None]) -> BenchTarget:
    """`parity proxy` in front of `behind` (its captures in the run's folder), reached as
    `behind` is, with the same headers and rewrites."""
    say(f"starting parity proxy in front of {behind.title} ...")
    captures = work_dir / f"captures-{len(started.pids)}"
    part = ServedPart.start("parity proxy", "--upstream", behind.endpoint.client.base_url, "--captures",
                            str(captures), command="proxy")
    started.add(name, f"parity proxy in front of {behind.name}", part.pid, part.stop, checked=True)
    endpoint = replace(behind.endpoint, name=name,
                       client=Client(part.url, behind.endpoint.client.headers, options.timeout_s))
    title = f"parity proxy in front of {behind.name} (added: over {behind.name} alone)"
    return BenchTarget(name, title, endpoint, part.pid, dict(behind.cannot), secrets=behind.secrets,
                       baseline=behind.name)


def _target(name: str, options: BenchOptions, *, upstream: str, mcp: McpFixture, started: _Started,
            work_dir: Path, say: Callable[[str], None], built: Mapping[str, BenchTarget]) -> BenchTarget:
    def client_for(url: str, headers: Mapping[str, str] | None = None) -> Client:
        return Client(url, headers, options.timeout_s)

    if name.startswith(PROXY):
        return _proxy_target(name, built[name.removeprefix(PROXY)], options, started=started, work_dir=work_dir,
                             say=say)

    if name == REFERENCE:
        say("starting the reference gateway ...")
        part = ServedPart.start("reference gateway", "reference", "--config",
                                str(write_reference_config(work_dir, upstream)))
        started.add(name, "the reference gateway (parity serve reference)", part.pid, part.stop)
        return BenchTarget(name, "reference gateway", Endpoint(name, client_for(part.url), model=options.model),
                           part.pid)
    try:
        profile = find_profile(name, options.profile_dirs)
    except ProfileError as error:
        raise HarnessError(str(error)) from error
    if profile is not None:
        installation = install(profile, say)
        say(f"starting {profile.title} ...")
        gateway = start(profile, installation, upstream=upstream, mcp={FIXTURE: mcp}, model=options.model)
        started.add(profile.name, profile.title, gateway.process.pid, gateway.stop)
        endpoint = Endpoint(profile.name, client_for(gateway.base_url, gateway.headers),
                            profile.target.responses_path, gateway.model, profile.rewrite)
        cannot: dict[Workload, str] = {}
        if "request_mcp_tools" in profile.lacks:
            cannot["mcp"] = f"lacks request-level MCP tools: {profile.lacks['request_mcp_tools']}"
        if "websocket" in profile.lacks:
            cannot |= dict.fromkeys(SOCKET_WORKLOADS, f"lacks WebSocket mode: {profile.lacks['websocket']}")
        return BenchTarget(profile.name, profile.title, endpoint, gateway.process.pid, cannot,
                           secrets=tuple(gateway.headers.values()))
    if not name.startswith("http://"):
        raise HarnessError(unknown_target(name, (REFERENCE,), options.profile_dirs))
    return BenchTarget(name, name, Endpoint(name, client_for(name, dict(options.headers)), model=options.model,
                                            rewrites=Rewrites()), secrets=tuple(options.headers.values()))


@contextlib.contextmanager
def _started_parts(options: BenchOptions, work_dir: Path,
                   say: Callable[[str], None]) -> Iterator[tuple[_Started, str, McpFixture, list[BenchTarget]]]:
    started = _Started()
    try:
        if options.upstream is None:
            part = ServedPart.start("scripted upstream", "upstream")
            started.add("upstream", "the scripted upstream (parity serve upstream)", part.pid, part.stop)
            upstream = part.url
        else:
            upstream = options.upstream.rstrip("/")
        mcp_part = ServedPart.start(f"MCP fixture '{FIXTURE}'", "mcp", FIXTURE)
        started.add("mcp", f"the {FIXTURE} MCP fixture (parity serve mcp {FIXTURE})", mcp_part.pid, mcp_part.stop)
        mcp = McpFixture(FIXTURE, mcp_part.url)
        built: dict[str, BenchTarget] = {}
        for name in with_proxied(options.targets):
            built[name] = _target(name, options, upstream=upstream, mcp=mcp, started=started, work_dir=work_dir,
                                  say=say, built=built)
        yield started, upstream, mcp, list(built.values())
    finally:
        started.stop_all()


def run_bench(options: BenchOptions, say: Callable[[str], None] = lambda line: None,
              progress: Callable[[str, int, int], None] = lambda what, done, total: None) -> BenchResult:
    """Measure every target, `progress` told of each batch measured (`"batches"`, how many, of
    how many); `HarnessError` when a part cannot be started."""
    with tempfile.TemporaryDirectory(prefix="parity-bench-") as folder, \
            _started_parts(options, Path(folder), say) as (started, upstream, mcp, targets):
        measured = asyncio.run(_measure(options, started, upstream_url=upstream, mcp=mcp, targets=targets, say=say,
                                        progress=progress))
        return BenchResult(options, targets, measured, started.what, machine())


def _note_memory(targets: list[BenchTarget]) -> None:
    for target in targets:
        if target.pid:
            target.rss.append(rss_bytes(target.pid))


def _cpu(started: _Started) -> dict[str, float]:
    cpu = {name: cpu_seconds(pid, children=name not in started.checked) for name, pid in started.pids.items()}
    return cpu | {name + CHECKER: cpu_seconds(started.pids[name], own=False) for name in started.checked}


async def _checkers_caught_up(started: _Started, say: Callable[[str], None]) -> None:
    """Wait until no proxy's checker works any more (it spent next to nothing over a poll)."""
    for name in started.checked:
        deadline = time.monotonic() + CATCH_UP_DEADLINE_S
        spent = cpu_seconds(started.pids[name], own=False)
        while True:
            await asyncio.sleep(CATCH_UP_POLL_S)  # poll interval of a condition, bounded by the deadline
            spent, before = cpu_seconds(started.pids[name], own=False), spent
            if spent - before <= IDLE_CPU_S:
                break
            if time.monotonic() > deadline:
                say(f"{name}'s checker was still working {CATCH_UP_DEADLINE_S:g} s after a batch; measuring on")
                break


async def _measure(options: BenchOptions, started: _Started, *, upstream_url: str, mcp: McpFixture,
                   targets: list[BenchTarget], say: Callable[[str], None],
                   progress: Callable[[str, int, int], None]) -> list[Measured]:
    floor = Endpoint(FLOOR, Client(upstream_url, {}, options.timeout_s), model=options.model)
    fixtures = {FIXTURE: mcp}
    measured: list[Measured] = []
    default_routed = any(target.endpoint.rewrites.mcp_server_url for target in targets)
    by_name = {target.name: target for target in targets}
    batches = 2 * options.rounds * sum(workload not in target.cannot for workload in options.workloads
                                       for target in targets)
    async with http_client(30) as http:
        control = FixtureClient(http, upstream_url, fixtures)

        async def batch(workload: Workload, where: BenchTarget | None, runs: RunTokens, sizes: Sizes) -> Batch:
            """One batch against `where` (None: the floor)."""
            if where is None and workload == "mcp":
                return await client_driven_mcp_batch(floor, runs, sizes)
            return await gateway_batch(workload, floor if where is None else where.endpoint, runs, sizes, fixtures)

        async def measure(round_: int, workload: Workload, where: BenchTarget | None, runs: RunTokens,
                          floor_for: str | None = None) -> None:
            """A batch of the round, kept with the CPU time each started process spent in it."""
            before = _cpu(started)
            result = await batch(workload, where, runs, options.sizes)
            await _checkers_caught_up(started, say)
            after = _cpu(started)
            measured.append(Measured(round_, workload, FLOOR if where is None else where.name, floor_for, result,
                                     {name: after[name] - before[name] for name in after}))
            progress("batches", len(measured), batches)

        async def new_runs() -> RunTokens:
            runs = RunTokens(new_run_token(), mcp_run := new_run_token(), mcp.for_run(mcp_run).url, new_run_token())
            for run, script in scripts(runs).items():
                await control.register(run, script)
            if default_routed:
                await control.route_default_mcp(runs.mcp, [FIXTURE])
            return runs

        try:
            warm_up = Sizes(WARM_UP_REQUESTS, WARM_UP_REQUESTS, options.sizes.concurrency, 1)
            runs = await new_runs()
            for workload in options.workloads:
                await batch(workload, None, runs, warm_up)
                for target in targets:
                    if workload not in target.cannot:
                        await batch(workload, target, runs, warm_up)
            _note_memory(targets)
            for round_ in range(options.rounds):
                say(f"round {round_ + 1} of {options.rounds} ...")
                runs = await new_runs()
                for workload in options.workloads:
                    for target in targets:
                        if workload in target.cannot:
                            continue
                        await measure(round_, workload, by_name.get(target.baseline), runs, floor_for=target.name)
                        await measure(round_, workload, target, runs)
                for run in scripts(runs):
                    await control.forget(run)
                _note_memory(targets)
        finally:
            await floor.client.close()
            for target in targets:
                await target.endpoint.client.close()
    return measured
