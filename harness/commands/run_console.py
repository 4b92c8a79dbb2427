"""What `parity run` and `parity record` show people, at pytest's verbosity levels:

- quiet (`-q`): nothing while the run goes; at its end one line per scenario run that failed
  or could not run, and the tally;
- default: a line per finished scenario run, with the findings that fail it; the summary
  table and the tally;
- verbose (`-v`): the same, with every finding of every scenario run (warnings and notes of
  passing ones too).

All of it goes to standard output, or to standard error when standard output carries the
results document (`--json`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..defaults import MODES
from ..judge.results import ScenarioResult, StepResult, UnitFinished
from .console import err, out

QUIET, DEFAULT, VERBOSE = -1, 0, 1
_STYLE = {"pass": "green", "known": "magenta", "fail": "red", "could_not_run": "yellow", "unsupported": "blue"}
_LABEL = {"pass": "pass", "known": "known", "fail": "fail", "could_not_run": "could not run",
          "unsupported": "unsupported"}


@dataclass(frozen=True)
class RunConsole:
    verbosity: int
    """`-v` count minus `-q` count, clamped to QUIET..VERBOSE."""
    to_stderr: bool = False

    @classmethod
    def of(cls, verbose: int, quiet: int, to_stderr: bool) -> RunConsole:
        return cls(max(QUIET, min(VERBOSE, verbose - quiet)), to_stderr)

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

    def progress(self, event: UnitFinished) -> None:
        """A finished scenario run's line and what it found (unless quiet)."""
        if self.verbosity == QUIET or not isinstance(event, UnitFinished):
            return
        result = event.result
        style = _STYLE[result.outcome]
        width = len(str(event.total))
        self.console.print(f"[{event.done:>{width}}/{event.total}] [{style}]{_LABEL[result.outcome]:<5}[/{style}] "
                           f"{result.scenario.id} [dim]\\[{result.mode}] {result.duration_s:.2f}s[/dim]")
        if result.unsupported:
            self.console.print(f"        [dim]{escape(result.unsupported)}[/dim]", soft_wrap=True)
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
        """The end of the run: the table (or, quiet, a line per run that did not pass) and the
        tally, with how many runs were never started and where the report is."""
        if self.verbosity == QUIET:
            for result in results:
                if result.outcome in ("fail", "could_not_run"):
                    self.console.print(f"[{_STYLE[result.outcome]}]{_LABEL[result.outcome]}[/] {result.scenario.id} "
                                       f"\\[{result.mode}]: {escape(_first_problem(result))}", soft_wrap=True)
        else:
            self.console.print(_summary(results))
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
