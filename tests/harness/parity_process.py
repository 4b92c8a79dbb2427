"""`parity` commands run as a user runs them: child processes, each a `ChildProcess` (a process
group of its own that ends with the test run, even a killed one), their output in a log file the
test reads until the command says what it waits for, and stopped by PID (their own process group)
at the end."""

from __future__ import annotations

import fcntl
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from responses_parity.harness.engine.child_process import ChildProcess

PARITY = Path(sys.executable).with_name("parity")
"""The `parity` console script of the environment the tests run in."""
DEADLINE_S = 60.0
"""How long a command may take to say it is ready (a loaded 2-core machine imports slowly)."""
STOP_GRACE_S = 10.0


def command_line(line: str) -> list[str]:
    """A shell line as its arguments, `parity` the one of this environment (no shell runs it)."""
    words = shlex.split(line, comments=True)
    return [str(PARITY), *words[1:]] if words and words[0] == "parity" else words


class ParityProcess:
    """One command running in the background, its standard output and error in `log` (its
    standard output in `stdout` instead, when given)."""

    def __init__(self, args: Sequence[str], log: Path, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None, stdout: Path | None = None) -> None:
        self.log = log
        with ExitStack() as files:
            sink = files.enter_context(log.open("wb"))
            apart = files.enter_context(stdout.open("wb")) if stdout else sink
            self.process = ChildProcess(list(args), stdout=apart, stderr=sink, stdin=subprocess.DEVNULL, cwd=cwd,
                                        env=env, grace_s=STOP_GRACE_S)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first match of `pattern` in the output, once the command printed it; fails when
        the command exits or `DEADLINE_S` passes first."""
        deadline = time.monotonic() + DEADLINE_S
        while (found := re.search(pattern, self.output(), re.MULTILINE)) is None:
            assert self.process.poll() is None, f"{self.process.args} exited:\n{self.output()}"
            assert time.monotonic() < deadline, f"{self.process.args} did not print {pattern!r}:\n{self.output()}"
            time.sleep(0.05)  # poll interval while waiting for the command to say it is ready
        return found

    def stop(self) -> None:
        self.process.stop()


@contextmanager
def the_documented_ports() -> Iterator[None]:
    """Held while a test serves on the fixed ports the documentation names (8642-8646, 8080):
    two such tests in parallel workers would each find the ports free, then collide. A lock
    file all workers share, taken in turn (the kernel drops it if a worker dies)."""
    with open(Path(tempfile.gettempdir()) / "responses-parity-documented-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def running(folder: Path) -> Iterator[Callable[..., ParityProcess]]:
    """`start(args, name, ...)` starts a command logging to `folder/<name>.log`; every command
    started is stopped when the block ends."""
    with ExitStack() as stops:
        def start(args: Sequence[str], name: str, cwd: Path | None = None,
                  env: Mapping[str, str] | None = None, stdout: Path | None = None) -> ParityProcess:
            started = ParityProcess(args, folder / f"{name}.log", cwd, env, stdout)
            stops.callback(started.stop)
            return started

        yield start
