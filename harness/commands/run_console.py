"""What `parity run`, `record` and `matrix` show people, at pytest's verbosity levels:

- quiet (`-q`): nothing while the run goes; at its end one line per scenario run that failed
  or could not run, and the tally;
- default: the run's progress (`progress.py`), each scenario run that failed or could not run
  as it finishes, with the findings that fail it; at the end, as pytest's short summary, the
  unsupported runs, one line per reason with how many (as its `SKIPPED [28] reason`), a line
  per run that did not pass, and the tally;
- verbose (`-v`): a line per finished scenario run, with every finding (warnings and notes of
  passing ones too); at the end the table of every scenario and mode, then the default's end.

All of it goes to standard output, or to standard error when standard output carries the
results document (`--json`); the progress always to standard error."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..defaults import MODES
from ..judge.results import ScenarioResult, StepResult, UnitFinished
from .console import err, out
from .progress import Progress

QUIET, DEFAULT, VERBOSE = -1, 0, 1
_STYLE = {"pass": "green", "known": "magenta", "fail": "red", "could_not_run": "yellow", "unsupported": "blue"}
_LABEL = {"pass": "pass", "known": "known", "fail": "fail", "could_not_run": "could not run",
          "unsupported": "unsupported"}
_NOT_PASSED = ("fail", "could_not_run")
"""The outcomes a run's console shows as they come, at the default verbosity."""


@dataclass
class RunConsole:
    verbosity: int
    """`-v` count minus `-q` count, clamped to QUIET..VERBOSE."""
    to_stderr: bool = False
    shows_progress: bool = True
    """Whether the run's progress is shown (`running`); never when quiet (see `of`)."""
    _progress: Progress | None = None

    @classmethod
    def of(cls, verbose: int, quiet: int, to_stderr: bool) -> RunConsole:
        verbosity = max(QUIET, min(VERBOSE, verbose - quiet))
        return cls(verbosity, to_stderr, shows_progress=verbosity > QUIET)

    @property
    def console(self) -> Console:
        return err if self.to_stderr else out

    def say(self, line: str) -> None:
        """A line of progress worth telling (a gateway installing), unless quiet."""
        if self.verbosity > QUIET:
            self.console.print(escape(line), soft_wrap=True)

    def started(self, units: int, target: str) -> None:
        if self.verbosity > QUIET:
            self.console.print(f"Running {units} scenario run(s) against [bold]{escape(target)}[/bold] ...")

    @contextmanager
    def running(self) -> Iterator[None]:
        """Held while the scenario runs go: their progress is shown (`unit_finished` tells it)."""
        with Progress() if self.shows_progress else nullcontext() as progress:
            self._progress = progress
            try:
                yield
            finally:
                self._progress = None

    def unit_finished(self, event: UnitFinished) -> None:
        """A scenario run finished: the progress, and its line and findings (every run's when
        verbose, those that did not pass by default, none when quiet)."""
        if not isinstance(event, UnitFinished):
            return
        if self._progress is not None:
            self._progress.update("scenario runs", event.done, event.total)
        result = event.result
        if self.verbosity == QUIET or (self.verbosity == DEFAULT and result.outcome not in _NOT_PASSED):
            return
        style = _STYLE[result.outcome]
        width = len(str(event.total))
        self.console.print(f"[{event.done:>{width}}/{event.total}] [{style}]{_LABEL[result.outcome]:<5}[/{style}] "
                           f"{result.scenario.id} [dim]\\[{result.mode}] {result.duration_s:.2f}s[/dim]")
        for step_result in result.steps:
            self._findings(step_result)
        for step_result in result.steps:
            if step_result.error:
                self.console.print(f"        [dim]{step_result.step_id}:[/dim] could not run: "
                                   f"{escape(step_result.error)}", soft_wrap=True)

    def _findings(self, step: StepResult) -> None:
        """A step's findings: all of them when verbose, else those that fail it, with what an
        error answer caused folded into one line under the finding that quotes it."""
        caused = [finding for finding in step.findings if finding.consequence and finding.fails]
        for finding in step.findings:
            if self.verbosity == VERBOSE:
                indent = "          " if finding.consequence else "        "
                self.console.print(f"{indent}[dim]{step.step_id}:[/dim] {finding.severity} {finding.kind} "
                                   f"({finding.rule}): {escape(finding.message)}", soft_wrap=True)
            elif finding.fails and not finding.consequence:
                self.console.print(f"        [dim]{step.step_id}:[/dim] {escape(finding.message)}", soft_wrap=True)
        if caused and self.verbosity != VERBOSE:
            rules = ", ".join(dict.fromkeys(str(finding.rule) for finding in caused))
            self.console.print(f"          [dim]and {len(caused)} finding(s) it caused ({escape(rules)}; -v shows "
                               "them)[/dim]", soft_wrap=True)

    def finished(self, results: list[ScenarioResult], tally_line: str, not_run: int, report: Path | None) -> None:
        """The end of the run, as pytest's short summary: (verbose) the table; (unless quiet) the
        unsupported runs by reason; a line per run that did not pass; the tally, with how many
        runs were never started and where the report is."""
        if self.verbosity == VERBOSE:
            self.console.print(_summary(results))
        if self.verbosity > QUIET:
            for reason, count in Counter(result.unsupported for result in results if result.unsupported).items():
                self.console.print(f"[{_STYLE['unsupported']}]unsupported[/] \\[{count}] {escape(reason)}",
                                   soft_wrap=True)
        for result in results:
            if result.outcome in _NOT_PASSED:
                self.console.print(f"[{_STYLE[result.outcome]}]{_LABEL[result.outcome]}[/] {result.scenario.id} "
                                   f"\\[{result.mode}]: {escape(_first_problem(result))}", soft_wrap=True)
        line = tally_line + (f"; {not_run} not run (stopped at the first failure)" if not_run else "")
        self.console.print(escape(line + (f"; report: {report}" if report else "")), soft_wrap=True)


def _first_problem(result: ScenarioResult) -> str:
    """What first made a scenario run fail or not run, in one line."""
    for step in result.steps:
        if step.error:
            return f"{step.step_id}: could not run: {step.error}"
        if failing := next((finding for finding in step.findings if finding.fails), None):
            return f"{step.step_id}: {failing.message}"
    return result.outcome


def _summary(results: list[ScenarioResult]) -> Table:
    table = Table(title="responses-parity", show_lines=False)
    table.add_column("scenario")
    ran = [mode for mode in MODES if any(result.mode == mode for result in results)]
    for mode in ran:
        table.add_column(mode, justify="center")
    rows: dict[str, dict[str, str]] = {}
    for result in results:
        rows.setdefault(result.scenario.id, {})[result.mode] = result.outcome
    for scenario, modes in rows.items():
        cells = [f"[{_STYLE[modes[m]]}]{_LABEL[modes[m]]}[/{_STYLE[modes[m]]}]" if m in modes else "-" for m in ran]
        table.add_row(scenario, *cells)
    return table
