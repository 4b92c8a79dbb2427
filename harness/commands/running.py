"""Commands that run scenarios against targets: `run`, `record` and `matrix`. Their options
are declared in `harness/options.py` (the pytest plugin reads the same declarations); the
conventions of talking to the user (`--json`, `-q`, `-v`, `-x`, `--junitxml`) are pytest's,
which has them itself."""

from __future__ import annotations

import functools
import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, NoReturn

import click

from .. import goldens
from ..findings import HarnessError
from ..judges import judges
from ..junit import write_junit
from ..loader import Catalogue, LoadedScenario
from ..matrix import build_matrix, run_matrix, write_matrix
from ..options import (JUDGE_OPTIONS, MATRIX_JOBS, MATRIX_REPORT_DIR, MATRIX_TIMEOUT, MODE, PROFILE_DIR,
                       RECORD_GOLDEN_DIR, SCENARIO, SELECTION_OPTIONS, TAG, TARGET_OPTIONS, OptionError,
                       TargetOptions, modes, target_options)
from ..redaction import Redactor
from ..report import RunInfo, results_document, tally, tally_line, write_reports
from ..runner import Judge, ScenarioResult, units_of
from ..scenario import Mode
from ..session import open_session
from ..targets import Target
from .catalogue import load_catalogue
from .click_options import click_options
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, out, redacted_consoles, say
from .run_console import DEFAULT, RunConsole


@dataclass(frozen=True)
class Conventions:
    """How a run talks to its user, as pytest users expect."""

    console: RunConsole
    json_document: bool = False
    """The results document on standard output; everything for people on standard error."""
    exitfirst: bool = False
    junitxml: Path | None = None


def _conventions(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--json`, `-q`, `-v` and `-x`; the command gets them as `conventions`."""
    options = [
        click.option("--json", "json_document", is_flag=True,
                     help="Print the results document (as results.json) on standard output; progress and the "
                          "summary go to standard error."),
        click.option("-q", "--quiet", count=True,
                     help="Show only the runs that did not pass, one line each, and the tally."),
        click.option("-v", "--verbose", count=True,
                     help="Show every finding of every run, warnings and notes of passing ones too."),
        click.option("-x", "--exitfirst", is_flag=True,
                     help="Stop at the first run that fails or could not run; runs not started are not run."),
    ]

    @functools.wraps(function)
    def with_conventions(*, json_document: bool, quiet: int, verbose: int, exitfirst: bool,
                         junitxml: Path | None = None, **rest: Any) -> Any:
        console = RunConsole.of(verbose, quiet, to_stderr=json_document)
        return function(conventions=Conventions(console, json_document, exitfirst, junitxml), **rest)

    for option in reversed(options):
        with_conventions = option(with_conventions)
    return with_conventions


def _units(paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...],
           mode: str) -> tuple[Catalogue, list[tuple[LoadedScenario, Mode]]]:
    """The scenario catalogue and the selected (scenario, mode) units; a selection that
    matches nothing is a usage error."""
    catalogue = load_catalogue(paths)
    if unknown := sorted(set(ids) - {s.scenario.id for s in catalogue.scenarios}):
        raise click.UsageError(f"no scenario with id {', '.join(unknown)}")
    units = units_of(catalogue.select(ids, tags), modes(mode))
    if not units:
        if not catalogue.scenarios:
            raise click.UsageError("no scenario could be loaded (see the errors above)" if catalogue.errors
                                   else "no scenario file found")
        asked = [*(f"tag {t}" for t in tags), *(f"id {i}" for i in ids), *([f"mode {mode}"] if mode != "both" else [])]
        raise click.UsageError(f"no scenario run matches {' and '.join(asked) or 'the selection'}")
    return catalogue, units


def _target_options(values: dict[str, Any]) -> TargetOptions:
    try:
        return target_options(values)
    except OptionError as problem:
        raise click.UsageError(f"--{problem.option.name}: {problem.problem}") from problem


def _execute(*, paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...], mode: str, jobs: int,
             redactor: Redactor, conventions: Conventions, judges: tuple[Judge, ...] = (),
             **target: Any) -> tuple[Catalogue, list[ScenarioResult], RunInfo]:
    """Load the scenarios, run the selected units against the target (`redactor` learning the
    run's secrets), and time it; a harness error (a target that cannot be started or reached)
    exits with the usage code."""
    options = _target_options(target)
    catalogue, units = _units(paths, ids, tags, mode)
    mcp_names = {name for loaded, _ in units for name in loaded.scenario.fixtures}
    started, clock = datetime.now(UTC), time.monotonic()
    console = conventions.console
    console.started(len(units), options.target)
    stop_after = (lambda result: result.outcome in ("fail", "could_not_run")) if conventions.exitfirst else None
    try:
        with open_session(options, mcp_names, console.say, redactor) as session:
            results = session.run(units, jobs, console.progress, judges, stop_after)
    except HarnessError as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    return catalogue, results, RunInfo(session.target, started, time.monotonic() - clock, redactor,
                                       tuple(str(e) for e in catalogue.errors), not_run=len(units) - len(results))


def _finish(catalogue: Catalogue, results: list[ScenarioResult], info: RunInfo, report_dir: Path,
            conventions: Conventions) -> NoReturn:
    """Report the run (console, report folder, JUnit XML, the JSON document) and exit with its
    code. When nothing could run, the previous report stays in place."""
    counts = tally(results)
    nothing_ran = counts["could_not_run"] == len(results)
    document = results_document(results, info) if nothing_ran else write_reports(report_dir, results, info)
    if conventions.junitxml is not None:
        write_junit(conventions.junitxml, results, info)
    conventions.console.finished(results, tally_line(counts), info.not_run,
                                 None if nothing_ran else report_dir / "report.md")
    if conventions.json_document:
        click.echo(json.dumps(document, indent=2))
    if nothing_ran:
        error(f"nothing could run ({tally_line(counts)}); the report in {report_dir} is left as it was")
        sys.exit(EXIT_USAGE)
    if catalogue.errors or counts["could_not_run"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if counts["fail"] else EXIT_OK)


def _run_judges(against: str | None, golden_dir: Path | None, baseline_file: Path | None) -> tuple[Judge, ...]:
    try:
        return judges(against, golden_dir, baseline_file)
    except HarnessError as problem:
        raise click.UsageError(str(problem)) from problem


@click.command("run")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click_options(*SELECTION_OPTIONS, *TARGET_OPTIONS, *JUDGE_OPTIONS)
@click.option("--junitxml", type=click.Path(path_type=Path), default=None,
              help="Also write the run as JUnit XML here, shaped as pytest writes it.")
@_conventions
def run(*, report_dir: Path, against: str | None, golden_dir: Path | None, baseline_file: Path | None,
        conventions: Conventions, **selection: Any) -> None:
    """Run scenarios (default: the built-in ones) against a target, in both stream modes."""
    chosen = _run_judges(against, golden_dir, baseline_file)
    with redacted_consoles() as redactor:
        catalogue, results, info = _execute(judges=chosen, redactor=redactor, conventions=conventions, **selection)
        _finish(catalogue, results, info, report_dir, conventions)


@click.command("record")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click_options(*SELECTION_OPTIONS, *TARGET_OPTIONS, RECORD_GOLDEN_DIR)
@click.option("--name", default=None, help="Name of the golden set (default: a profiled gateway's name and "
                                           "version, e.g. smg-1.13.0; another target's name; required for a URL "
                                           "target).")
@_conventions
def record(*, report_dir: Path, name: str | None, golden_dir: Path, conventions: Conventions,
           **selection: Any) -> None:
    """Run scenarios and save every exchange and its contract as goldens, secrets removed."""
    target = selection["target"]
    if name is None and "://" in target:
        raise click.UsageError("name the golden set of a URL target with --name")
    with redacted_consoles() as redactor:
        catalogue, results, info = _execute(redactor=redactor, conventions=conventions, **selection)
        folder = goldens.record(golden_dir, name or _set_name(info.target), results, target_name=info.target.name,
                                model=info.target.model, scripted=info.target.scripted, recorded_at=info.started_at,
                                redactor=redactor, gateway=info.target.gateway,
                                command=_record_command(name, golden_dir, selection))
        conventions.console.say(f"recorded {sum(1 for _ in folder.glob('*/*.json'))} scenario run(s) in {folder}")
        _finish(catalogue, results, info, report_dir, conventions)


def _record_command(name: str | None, golden_dir: Path, selection: dict[str, Any]) -> str:
    """The `parity record` command line that records the same set: what it selects, its target,
    name and folder (other options, which may carry secrets, left out)."""
    words = ["parity", "record", *map(str, selection["paths"]), "--target", selection["target"],
             *(word for scenario in selection["ids"] for word in ("-s", scenario)),
             *(word for tag in selection["tags"] for word in ("-t", tag)),
             *(["--mode", selection["mode"]] if selection["mode"] != "both" else []),
             *(word for folder in selection["profile_dirs"] for word in ("--profile-dir", str(folder))),
             *(["--name", name] if name else []), "--golden-dir", str(golden_dir)]
    return shlex.join(words)


def _set_name(target: Target) -> str:
    """A profiled gateway's golden set is named after it and its version (`smg-1.13.0`), so the
    sets before and after an upgrade sit side by side; another target's after the target."""
    version = (target.gateway or {}).get("version")
    return f"{target.name}-{version}" if version else target.name


@click.command("matrix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--targets", required=True, metavar="A,B,...",
              help="Comma-separated targets: reference, profile names or files, base URLs (openai too).")
@click_options(SCENARIO, TAG, MODE, MATRIX_JOBS, MATRIX_TIMEOUT)
@click.option("--output", type=click.Path(path_type=Path), default=Path("reports/latest/matrix.md"),
              show_default=True, help="The matrix in Markdown; the HTML goes beside it.")
@click_options(MATRIX_REPORT_DIR, PROFILE_DIR)
def matrix_command(*, paths: tuple[Path, ...], targets: str, ids: tuple[str, ...], tags: tuple[str, ...], mode: str,
                   jobs: int, timeout_s: float, output: Path, report_dir: Path, profile_dirs: tuple[Path, ...]) -> None:
    """Run the same scenarios against several gateways, one after another, and write the matrix.

    Profiled gateways are installed on first use (minutes), started against a fresh scripted
    upstream, run and stopped. Exit 1 if a target could not run at all; divergences are what
    the matrix reports, not a failure of the command."""
    names = [name.strip() for name in targets.split(",") if name.strip()]
    if not names:
        raise click.UsageError("--targets names no target")
    catalogue, units = _units(paths, ids, tags, mode)
    base = TargetOptions(timeout_s=timeout_s, profile_dirs=profile_dirs)
    out.print(f"Running {len(units)} scenario run(s) against each of {', '.join(names)} ...")
    command = " ".join(["parity matrix", f"--targets {','.join(names)}", *(f"-s {i}" for i in ids),
                        *(f"-t {t}" for t in tags), *([f"--mode {mode}"] if mode != "both" else []),
                        f"--output {output}", f"--report-dir {report_dir}"])
    with redacted_consoles() as redactor:
        runs = run_matrix(names, units, base, report_dir, jobs=jobs, say=say, on_event=RunConsole(DEFAULT).progress,
                          redactor=redactor)
        html = write_matrix(build_matrix(runs, command), output, redactor)
        for one in runs:
            counts = one.document["summary"]["parity"] if one.document else None
            state = f"parity {counts['pass']}/{counts['runs']}" if counts else "[red]could not run[/red]"
            out.print(f"{one.name}: {state}")
        out.print(f"matrix: {output} and {html}")
    if catalogue.errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if any(one.failure for one in runs) else EXIT_OK)
