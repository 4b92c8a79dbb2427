"""Running what a command of `running` selected, once its scenario files are read: against
one target (`run`, `record`), or several (`matrix`); then the reports and the exit code."""

from __future__ import annotations

import itertools
import json
import sys
import time
from datetime import datetime, UTC
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ..engine.session import open_session
from ..engine.stack_process import APART_FROM_UNITS
from ..engine.targets import Target, tls_context
from ..errors import HarnessError
from ..judge import goldens
from ..judge.against import Against, load_against
from ..judge.results import ScenarioResult, UnitFinished
from ..judge.schemas import prepare_validators
from ..options import TargetOptions
from ..report.documents import RunInfo, results_document, tally, tally_line, write_reports
from ..report.html import prepare_html
from ..scenario.loader import Catalogue, LoadedScenario
from ..scenario.model import Mode
from ..wire.redaction import Redactor
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, for_people
from .run_console import QUIET, VERBOSE, RunConsole
from .selection import Conventions, Selection

if TYPE_CHECKING:
    from ..report.matrix import Matrix


def run_against(against: str | None, golden_dir: Path | None, baseline_file: Path | None) -> Against:
    """What `--against` and `--baseline` name; a usage error when one cannot be read."""
    try:
        return load_against(against, golden_dir, baseline_file)
    except HarnessError as problem:
        raise click.UsageError(str(problem)) from problem


def run(selected: Selection, redactor: Redactor, conventions: Conventions, *, report_dir: Path,
        chosen: Against, shard: dict[str, Any] | None = None) -> NoReturn:
    """`parity run`: the selection against its target, held also against `chosen`, reported
    (as one shard of a split run when `shard` says which: `RunInfo.shard`)."""
    console = _console(conventions)
    results, info = _execute(selected, redactor, console, conventions, chosen)
    info = replace(info, shard=shard)
    _finish(selected.catalogue, results, info, console, conventions, report_dir=report_dir)


def record(selected: Selection, redactor: Redactor, conventions: Conventions, *, report_dir: Path,
           name: str | None, golden_dir: Path, command: str) -> NoReturn:
    """`parity record`: the selection against its target, saved as the golden set `name` (by
    default named after the target) in `golden_dir`, then reported."""
    console = _console(conventions)
    results, info = _execute(selected, redactor, console, conventions)
    folder = goldens.record(golden_dir, name or _set_name(info.target), results, target_name=info.target.name,
                            model=info.target.model, scripted=info.target.scripted, recorded_at=info.started_at,
                            redactor=redactor, gateway=info.target.gateway, command=command)
    console.say(f"recorded {sum(1 for _ in folder.glob('*/*.json'))} scenario run(s) in {folder}")
    _finish(selected.catalogue, results, info, console, conventions, report_dir=report_dir)


def matrix(names: list[str], catalogue: Catalogue, units: list[tuple[LoadedScenario, Mode]], base: TargetOptions,
           redactor: Redactor, *, jobs: int, report_dir: Path, output: Path, command: str, verbose: int = 0,
           as_json: bool = False, shard: dict[str, Any] | None = None) -> NoReturn:
    """`parity matrix`: the units against each target named, one after another, and the matrix
    (as one shard of a split matrix when `shard` says which: `Matrix.shard`); see `finish_matrix`.
    Its progress counts the runs of every target; `verbose` shows each run as `parity run -v` does."""
    from ..report.matrix import build_matrix, run_matrix  # the matrix's own: `parity run` never needs it

    tell = for_people(as_json)
    tell(f"Running {len(units)} scenario run(s) against each of {', '.join(names)} ...")
    console = RunConsole(VERBOSE if verbose else QUIET, to_stderr=as_json)
    finished, total = itertools.count(1), len(names) * len(units)

    def unit_finished(event: UnitFinished) -> None:
        console.unit_finished(replace(event, done=next(finished), total=total))

    with console.running():
        runs = run_matrix(names, units, base, report_dir, jobs=jobs, say=tell, on_event=unit_finished,
                          redactor=redactor, shard=None if shard is None else _run_shard(shard))
    finish_matrix(build_matrix(runs, command, shard), output, redactor, file_errors=bool(catalogue.errors),
                  as_json=as_json)


def _run_shard(shard: dict[str, Any]) -> dict[str, Any]:
    """What each target's results document says of a matrix's shard: what a run's says (`RunInfo.shard`)."""
    return {key: shard[key] for key in ("index", "count", "units")}


def finish_matrix(built: Matrix, output: Path, redactor: Redactor, *, file_errors: bool,
                  as_json: bool = False) -> NoReturn:
    """Write the matrix to `output` (and beside it), say how each target did, and exit: 2 when a
    scenario file could not be read, 1 when a target could not run at all, else 0 (divergences
    are what the matrix reports, not a failure). `as_json`: its document (`matrix.json`) on
    standard output, the rest on standard error."""
    from ..report.matrix import write_matrix

    html = write_matrix(built, output, redactor)
    tell = for_people(as_json)
    for one in built.runs:
        tell(f"{one.name}: {one.state}")
    tell(f"matrix: {output} and {html}")
    if as_json:
        click.echo(output.with_suffix(".json").read_text(), nl=False)
    if file_errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if any(one.failure for one in built.runs) else EXIT_OK)


def _console(conventions: Conventions) -> RunConsole:
    return RunConsole.of(conventions.verbose, conventions.quiet, to_stderr=conventions.json_document)


def _execute(selected: Selection, redactor: Redactor, console: RunConsole, conventions: Conventions,
             against: Against | None = None) -> tuple[list[ScenarioResult], RunInfo]:
    """Run the selected units against the target (`redactor` learning the run's secrets), and
    time it; a harness error (a target that cannot be started or reached) exits with the usage
    code."""
    catalogue, units, options, mcp_names = selected.catalogue, selected.units, selected.options, selected.mcp_names
    started, clock = datetime.now(UTC), time.monotonic()
    stop_after = (lambda result: result.outcome in ("fail", "could_not_run")) if conventions.exitfirst else None
    # What the first unit and the report would otherwise wait for, done while the servers start.
    prepare_validators()
    tls_context()
    prepare_html()
    try:
        apart = selected.servers if selected.servers is not None else len(units) >= APART_FROM_UNITS
        with open_session(options, mcp_names, console.say, redactor, apart=apart) as session, console.running():
            console.started(len(units), options.target)  # once the target is known, installed and started
            results = session.run(units, selected.jobs, console.unit_finished, against, stop_after)
    except HarnessError as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    return results, RunInfo(session.target, started, time.monotonic() - clock, redactor,
                            tuple(str(e) for e in catalogue.errors), not_run=len(units) - len(results))


def _finish(catalogue: Catalogue, results: list[ScenarioResult], info: RunInfo, console: RunConsole,
            conventions: Conventions, *, report_dir: Path) -> NoReturn:
    """Report the run (console, report folder, JUnit XML, the JSON document) and exit with its
    code. When nothing could run, the previous report stays in place."""
    counts = tally(results)
    nothing_ran = bool(results) and counts["could_not_run"] == len(results)  # a shard may have no unit
    document = results_document(results, info) if nothing_ran else write_reports(report_dir, results, info)
    if conventions.junitxml is not None:
        from ..report.junit import write_junit  # only when asked for
        write_junit(conventions.junitxml, document, info.redactor)
    console.finished(results, tally_line(counts), info.not_run,
                                 None if nothing_ran else report_dir / "report.md")
    if conventions.json_document:
        click.echo(json.dumps(document, indent=2))
    if nothing_ran:
        error(f"nothing could run ({tally_line(counts)}); the report in {report_dir} is left as it was")
        sys.exit(EXIT_USAGE)
    if catalogue.errors or counts["could_not_run"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if counts["fail"] else EXIT_OK)


def _set_name(target: Target) -> str:
    """A profiled gateway's golden set is named after it and its version (`smg-1.13.0`), so the
    sets before and after an upgrade sit side by side; another target's after the target."""
    version = (target.gateway or {}).get("version")
    return f"{target.name}-{version}" if version else target.name
