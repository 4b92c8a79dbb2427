"""The processes a benchmark starts, each a process of its own so that none shares a core's
interpreter lock with the load client: the scripted upstream, the `calc` MCP fixture and the
reference gateway as `parity serve ...` children, a proxy as a `parity proxy` child, and
profiled gateways as `parity run` starts them; each a `ChildProcess`, which ends with the
benchmark, even a killed one. Each one's CPU time (with its children's) is read before and
after a measurement; a proxy's is read apart from its checker's (a child process of its own).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..engine.child_process import ChildProcess
from ..errors import HarnessError

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0
LOG_LINES = 20
_LISTENING = re.compile(r"listening on (http://\S+)")


def cpu_seconds(pid: int, *, own: bool = True, children: bool = True) -> float:
    """User and system CPU seconds so far of the process (`own`) and of its living children,
    0 for what is gone."""
    try:
        process = psutil.Process(pid)
        processes = ([process] if own else []) + (process.children(recursive=True) if children else [])
    except psutil.Error:
        return 0.0
    total = 0.0
    for each in processes:
        with contextlib.suppress(psutil.Error):
            times = each.cpu_times()
            total += times.user + times.system
    return total


def rss_bytes(pid: int) -> int:
    """Resident memory of the process and its living children (0 when gone)."""
    try:
        process = psutil.Process(pid)
        return sum(each.memory_info().rss for each in [process, *process.children(recursive=True)])
    except psutil.Error:
        return 0


@dataclass
class ServedPart:
    """A `parity serve <part>` (or `parity proxy`) child on a free loopback port; `url` is where
    it listens."""

    name: str
    process: ChildProcess = field(repr=False)
    url: str
    log: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES), repr=False)
    """The last lines it printed."""

    @classmethod
    def start(cls, name: str, *arguments: str, command: str = "serve") -> ServedPart:
        """Start `parity <command> <arguments> --port 0` and wait for the line saying where it
        listens (a line naming `name`); a child that exits or stays silent is a `HarnessError`
        with what it printed."""
        command_line = [sys.executable, "-m", "responses_parity.harness", command, *arguments, "--port", "0"]
        env = os.environ | {"PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        process = ChildProcess(command_line, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, env=env, grace_s=STOP_GRACE_S)
        log: deque[str] = deque(maxlen=LOG_LINES)
        found = threading.Event()
        url: list[str] = []

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                log.append(line.rstrip())
                if not found.is_set() and (match := _LISTENING.search(line)) and name in line:
                    url.append(match[1])
                    found.set()
            found.set()

        threading.Thread(target=read, name=f"bench-{name}-output", daemon=True).start()
        if not found.wait(START_TIMEOUT_S) or not url:
            process.stop()
            said = "\n".join(log) or "nothing"
            raise HarnessError(f"{name} did not start within {START_TIMEOUT_S:g}s; it printed:\n{said}")
        return cls(name, process, url[0], log)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.stop()


def write_reference_config(folder: Path, upstream_url: str) -> Path:
    """The reference gateway's settings for a benchmark: the scripted upstream, an in-memory
    store, the loopback MCP fixture allowed by the outbound guard, and a per-key run limit
    above any benchmark's concurrency (its 429s would be measured instead of the gateway)."""
    path = folder / "reference-gateway.yaml"
    path.write_text(f"upstream: {{url: '{upstream_url}/v1'}}\nstore_path: ':memory:'\n"
                    "outbound: {allow: [127.0.0.0/8]}\nmax_concurrent_runs: 1024\n")
    return path
