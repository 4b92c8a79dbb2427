"""How far a long command has come (`run`, `record`, `matrix`, `probe`, `bench`), on standard
error only, so it never mixes with a `--json` document: a live bar when standard error is an
interactive terminal (rich's, gone when the command ends), else a line now and then, for a log
or a CI job (at most one per `LINE_EVERY_S`, and only after another `LINE_STEP` of the work)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import TracebackType

from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as LiveBar

from .console import err, out

LINE_EVERY_S = 5.0
LINE_STEP = 0.1
"""A line is said once `LINE_EVERY_S` passed since the last one and a tenth more is done: a
run says at most nine lines, however long it takes."""


@dataclass
class _Told:
    """What the last line about one piece of work said, and when."""

    done: int
    at: float


class Progress:
    """The progress of one or more pieces of work (a run; each target of a matrix), each named by
    what `update` is told; used as a context manager around the work."""

    def __init__(self, *, live: bool | None = None) -> None:
        self.live = err.is_terminal and err.is_interactive if live is None else live
        self._bar: LiveBar | None = None
        self._tasks: dict[str, TaskID] = {}
        self._told: dict[str, _Told] = {}

    def __enter__(self) -> Progress:
        if self.live:
            # The lines others print while the bar is shown go above it: those on standard
            # error always, those on standard output only when it is the terminal too (piped,
            # they stay in their pipe).
            self._bar = LiveBar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=err, transient=True, redirect_stderr=True,
                                redirect_stdout=out.is_terminal)
            self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def update(self, what: str, done: int, total: int) -> None:
        """`done` of `total` of the work `what` are done."""
        if self._bar is not None:
            if what not in self._tasks:
                self._tasks[what] = self._bar.add_task(what, total=total)
            self._bar.update(self._tasks[what], completed=done, total=total)
            return
        now = time.monotonic()
        told = self._told.setdefault(what, _Told(0, now))
        if done < total and now - told.at >= LINE_EVERY_S and done - told.done >= LINE_STEP * total:
            self._told[what] = _Told(done, now)
            err.print(f"{what}: {done}/{total} ({100 * done // total}%)", markup=False, soft_wrap=True)
