"""`parity proxy` as a user runs it, for the proxy's tests: a child process on loopback (see
`parity_process`), and the capture files it writes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from parity_process import DEADLINE_S, PARITY, ParityProcess

LISTENING = r"parity proxy listening on (?P<url>http://\S+) "


def start_proxy(start: Callable[..., ParityProcess], upstream: str, captures: Path,
                *extra: str) -> tuple[ParityProcess, str]:
    """`parity proxy` in front of `upstream`, started with `start` (`parity_process.running`),
    once it listens; and its URL."""
    proxy = start([str(PARITY), "proxy", "--upstream", upstream, "--port", "0", "--captures", str(captures), *extra],
                  f"proxy-{captures.name}")
    return proxy, proxy.wait_for(LISTENING)["url"]


def captured_files(folder: Path, count: int) -> list[Path]:
    """The capture files once `count` are written (each is written when its answer ended)."""
    deadline = time.monotonic() + DEADLINE_S
    while len(files := sorted(folder.glob("*.json"))) < count:
        assert time.monotonic() < deadline, f"only {len(files)} of {count} captures written"
        time.sleep(0.05)  # poll interval while the proxy finishes writing
    return files
