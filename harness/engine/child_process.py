"""Child processes that end with the process that started them, even when it is killed.

Every command the harness or its tests start (a profiled gateway, `parity serve` for a benchmark,
`parity proxy` under test, an install step) starts as a `ChildProcess`: in a process group of
its own, led by a small watchdog. The watchdog is this file run as a script: it holds the read
end of a pipe whose only write end (the lifeline) stays in the starting process. When that
process ends, however it ends (SIGKILL at a CI time limit included), the kernel closes the
lifeline, the watchdog reads end-of-file and ends the group: SIGTERM, then SIGKILL after the
child's grace period.

Why a pipe and not `prctl(PR_SET_PDEATHSIG)`: the pipe is portable, covers the command's own
children (the whole group is signalled, not one process), and does not fire when the thread
that started the child ends. Why a group led by the watchdog: the group's id is the watchdog's
PID, which cannot be reused while the starter has not reaped the watchdog, so signalling the
group never reaches a process this harness did not start.

`stop` ends the group as the watchdog would: SIGTERM, then SIGKILL to whatever is left once the
command has ended or its grace period has passed; leaving a `with` block stops it too. Only a
process forked without exec could keep the lifeline open by inheriting it (the pipe is
close-on-exec, and `subprocess` closes the descriptors it does not pass); the harness forks none.

This module imports nothing of the project, so that the watchdog starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_GRACE_S", "ChildProcess", "run"]

DEFAULT_GRACE_S = 5.0
"""How long SIGTERM is given before SIGKILL, unless the starter says otherwise."""
_WATCHDOG = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
"""The watchdog: this file run isolated (no site packages, no user environment)."""


class ChildProcess(subprocess.Popen[Any]):
    """`subprocess.Popen` of `args` in a process group the watchdog leads; takes Popen's keyword
    arguments except `start_new_session` and `process_group`. `pid` is the command's own."""

    def __init__(self, args: Sequence[str], *, grace_s: float = DEFAULT_GRACE_S, **popen: Any) -> None:
        if {"start_new_session", "process_group", "preexec_fn"} & popen.keys():
            raise TypeError("a ChildProcess chooses its own process group")
        self.grace_s = grace_s
        watched, self._lifeline = os.pipe()
        try:
            self._watchdog = subprocess.Popen([*_WATCHDOG, str(watched), repr(grace_s)], pass_fds=(watched,),
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, process_group=0)
        except BaseException:
            os.close(self._lifeline)
            raise
        finally:
            os.close(watched)
        self.group = self._watchdog.pid
        try:
            super().__init__(args, process_group=self.group, **popen)
        except BaseException:
            self._release()
            raise

    def stop(self, grace_s: float | None = None) -> None:
        """SIGTERM to the group; SIGKILL to what is left of it once the command has ended or
        after `grace_s` (default: the one it was started with). Nothing of the group outlives it."""
        if self.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(timeout=self.grace_s if grace_s is None else grace_s)
        self._release()
        self.wait()

    def __exit__(self, *exc_info: object) -> None:
        """Leaving the block stops the group (a command still running gets its grace period)."""
        try:
            self.stop()
        finally:
            super().__exit__(*exc_info)

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.group, signum)

    def _release(self) -> None:
        """SIGKILL to the group (the watchdog included), reap the watchdog, drop the lifeline."""
        if self._lifeline < 0:
            return
        self._signal_group(signal.SIGKILL)
        self._watchdog.wait()
        os.close(self._lifeline)
        self._lifeline = -1


def run(args: Sequence[str], *, timeout: float | None = None, capture_output: bool = False, check: bool = False,
        **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` for a `ChildProcess`: the command to its end, within `timeout` if given
    (after which it is stopped and `subprocess.TimeoutExpired` raised)."""
    if capture_output:
        popen |= {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with ChildProcess(args, **popen) as child:
        output, errors = child.communicate(timeout=timeout)
    done = subprocess.CompletedProcess(args, child.returncode, output, errors)
    if check:
        done.check_returncode()
    return done


def _watch(lifeline: int, grace_s: float) -> None:
    """The watchdog: wait until the starter is gone (end of file on the lifeline), then end the
    group. It ignores the signals a `stop` sends the group, and is killed by its SIGKILL."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    while os.read(lifeline, 4096):
        pass  # nothing is ever written: only the end of file says something
    os.killpg(0, signal.SIGTERM)
    time.sleep(grace_s)  # the grace period the group's processes get to end on their own
    os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), float(sys.argv[2]))
