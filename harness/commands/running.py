"""Commands that run scenarios against targets: `run`, `record` and `matrix` (`run` and `matrix`
split over machines with `--shard I/N`: `engine/shards.py`; `parity merge` puts the parts
together). Their options are declared in `harness/options.py` (the pytest plugin reads the same
declarations); the conventions of talking to the user (`--json`, `-q`, `-v`, `-x`,
`--junitxml`) are pytest's, which has them itself.

The module imports little itself, so its help comes at once, and so does the start of the
process that will serve the embedded reference gateway (`_servers_ahead`), told what to serve
as soon as the files are read (`_served_soon`): each command imports the scenario loader when it
reads its files (`_units`), and names every one that cannot be read before it imports what runs
them (`executing`: the gateway, the fixtures and the SDKs behind them, seconds of imports), so a
broken file is named at once."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

from ..defaults import REFERENCE
from ..engine.collector import settle
from ..engine.stack_process import StackProcess, reference_settings
from ..options import (JUDGE_OPTIONS, MATRIX_JOBS, MATRIX_REPORT_DIR, MATRIX_TIMEOUT, MATRIX_UPSTREAM, MODE,
                       PROFILE_DIR, RECORD_GOLDEN_DIR, SCENARIO, SELECTION_OPTIONS, SHARD_OPTIONS, TAG, TARGET_OPTIONS,
                       TARGETS, OptionError, TargetOptions, modes, target_options)
from .click_options import click_options, json_option
from .console import redacted_consoles
from .selection import Conventions, Selection

if TYPE_CHECKING:
    from ..engine.shards import Unit
    from ..scenario.loader import Catalogue, LoadedScenario
    from ..scenario.model import Mode


def _conventions(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--json`, `-q`, `-v` and `-x`; the command gets them as `conventions`."""
    options = [
        json_option("Print the results document (as results.json) on standard output; progress and the "
                    "summary go to standard error."),
        click.option("-q", "--quiet", count=True,
                     help="Show only the runs that did not pass, one line each, and the tally."),
        click.option("-v", "--verbose", count=True,
                     help="Show every scenario run as it finishes, with every finding (warnings and notes of passing "
                          "ones too), and the table of every scenario and mode at the end."),
        click.option("-x", "--exitfirst", is_flag=True,
                     help="Stop at the first run that fails or could not run; runs not started are not run."),
    ]

    @functools.wraps(function)
    def with_conventions(*, as_json: bool, quiet: int, verbose: int, exitfirst: bool,
                         junitxml: Path | None = None, **rest: Any) -> Any:
        return function(conventions=Conventions(verbose, quiet, as_json, exitfirst, junitxml), **rest)

    for option in reversed(options):
        with_conventions = option(with_conventions)
    return with_conventions


def _units(paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...],
           mode: str) -> tuple[Catalogue, list[tuple[LoadedScenario, Mode]]]:
    """The scenario catalogue and the selected (scenario, mode) units; a selection that
    matches nothing is a usage error."""
    from ..scenario.loader import units_of
    from .catalogue import load_catalogue, selected

    catalogue = load_catalogue(paths)
    if not catalogue.scenarios:
        raise click.UsageError("no scenario could be loaded (see the errors above)" if catalogue.errors
                               else "no scenario file found")
    scenarios = selected(catalogue, ids, tags)
    units = units_of(scenarios, modes(mode))
    if not units:
        asked = [*(f"tag {t}" for t in tags), *(f"id {i}" for i in ids), *([f"mode {mode}"] if mode != "both" else [])]
        runs_in = sorted({m for s in scenarios for m in s.scenario.modes})
        hint = f" (the selected scenarios run in {', '.join(runs_in)}: choose it with --mode)" if runs_in else ""
        raise click.UsageError(f"no scenario run matches {' and '.join(asked) or 'the selection'}{hint}")
    return catalogue, units


def _target_options(values: dict[str, Any]) -> TargetOptions:
    try:
        return target_options(values)
    except OptionError as problem:
        raise click.UsageError(f"--{problem.option.name}: {problem.problem}") from problem


def _selection(*, paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...], mode: str, jobs: int,
               servers: StackProcess | None, **target: Any) -> Selection:
    options = _target_options(target)
    catalogue, units = _units(paths, ids, tags, mode)
    return Selection(catalogue, units, options, jobs, servers)


@contextmanager
def _servers_ahead(target: str) -> Iterator[StackProcess | None]:
    """For the embedded reference gateway, the process that will serve it and its fixtures, begun
    now: it imports them (most of a second) while this process reads the scenario files and
    imports what runs them. Ended on exit, however the command ends."""
    if target != REFERENCE:
        yield None
        return
    with closing(StackProcess().begin()) as servers:
        yield servers


def _served_soon(selected: Selection) -> Selection:
    """`selected`, the servers begun ahead for it told now what to serve: they start them while
    this process imports what runs the units."""
    if selected.servers is not None:
        selected.servers.tell(**reference_settings(selected.mcp_names))
    return selected


@click.command("run")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click_options(*SELECTION_OPTIONS, *TARGET_OPTIONS, *JUDGE_OPTIONS)
@click.option("--junitxml", type=click.Path(path_type=Path), default=None,
              help="Also write the run as JUnit XML here, shaped as pytest writes it.")
@click_options(*SHARD_OPTIONS)
@_conventions
def run(*, report_dir: Path, against: str | None, golden_dir: Path | None, baseline_file: Path | None,
        shard: str | None, shard_durations: Path | None, conventions: Conventions, **selection: Any) -> None:
    """Run scenarios (default: the built-in ones) against a target, non-streamed and streamed (--mode
    websocket or all adds WebSocket mode)."""
    with redacted_consoles() as redactor, _servers_ahead(selection["target"]) as servers:
        selected = _selection(servers=servers, **selection)
        part = _shard(selected.units, shard, shard_durations)
        selected = _served_soon(selected if part is None else replace(selected, units=part[0]))
        executing = _executing()
        executing.run(selected, redactor, conventions, report_dir=report_dir,
                      chosen=executing.run_against(against, golden_dir, baseline_file),
                      shard=None if part is None else part[1])


def _executing() -> ModuleType:
    """`executing`, imported once the scenario files are read (see the module's docstring), and
    the collector settled for what it loaded (`engine/collector.py`)."""
    from . import executing
    settle()
    return executing


def _shard(units: list[Unit], text: str | None, durations_file: Path | None
           ) -> tuple[list[Unit], dict[str, Any]] | None:
    """This machine's part of the selected units, and what its results document says of the
    split (`RunInfo.shard`); None when `--shard` is not given."""
    from ..engine.shards import shard_part, unit_key

    try:
        part = shard_part(units, text, durations_file)
    except OptionError as problem:
        raise click.BadParameter(problem.problem, param_hint=f"--{problem.option.name}") from problem
    if part is None:
        return None
    shard, mine = part
    every = [unit_key(loaded.scenario.id, mode) for loaded, mode in units]
    return mine, {"index": shard.index, "count": shard.count, "units": every}


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
    if name is None and "://" in selection["target"]:
        raise click.UsageError("name the golden set of a URL target with --name")
    command = _record_command(name, golden_dir, selection)
    with redacted_consoles() as redactor, _servers_ahead(selection["target"]) as servers:
        selected = _served_soon(_selection(servers=servers, **selection))
        executing = _executing()
        executing.record(selected, redactor, conventions, report_dir=report_dir, name=name, golden_dir=golden_dir,
                         command=command)


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


@click.command("matrix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click_options(TARGETS, SCENARIO, TAG, MODE, MATRIX_JOBS, MATRIX_TIMEOUT, MATRIX_UPSTREAM)
@click.option("--output", type=click.Path(path_type=Path), default=Path("reports/latest/matrix.md"),
              show_default=True, help="The matrix in Markdown; the HTML and the matrix.json `parity merge` reads go "
                                      "beside it.")
@click_options(MATRIX_REPORT_DIR, PROFILE_DIR, *SHARD_OPTIONS)
@json_option("Print the matrix's document (as matrix.json: command, generated_at, targets, each with target, name, "
             "title, failure, rewrites, lacks, notes, lacks_declared and its report folder; shard when split) on "
             "standard output; the rest goes to standard error.")
@click.option("-v", "--verbose", count=True, help="Show every scenario run of every target as it finishes, with "
                                                  "every finding (warnings and notes of passing ones too).")
def matrix_command(*, paths: tuple[Path, ...], targets: str, ids: tuple[str, ...], tags: tuple[str, ...], mode: str,
                   jobs: int, timeout_s: float, upstream: str, output: Path, report_dir: Path,
                   profile_dirs: tuple[Path, ...],
                   shard: str | None, shard_durations: Path | None, as_json: bool, verbose: int) -> None:
    """Run the same scenarios against several gateways, one after another, and write the matrix.

    Profiled gateways are installed on first use (minutes), started against a fresh scripted
    upstream, run and stopped. Exit 1 if a target could not run at all; divergences are what
    the matrix reports, not a failure of the command. With --shard I/N, every target runs the
    same part of the scenarios: `parity merge` puts the parts together, also parts of other
    targets (a job matrix of gateway x shard)."""
    names = [name.strip() for name in targets.split(",") if name.strip()]
    if not names:
        raise click.UsageError("--targets names no target")
    selection = " ".join([*(f"-s {i}" for i in ids), *(f"-t {t}" for t in tags),
                          *([f"--mode {mode}"] if mode != "both" else [])])
    with redacted_consoles() as redactor:
        catalogue, units = _units(paths, ids, tags, mode)
        part = _shard(units, shard, shard_durations)
        executing = _executing()
        executing.matrix(names, catalogue, units if part is None else part[0],
                         TargetOptions(timeout_s=timeout_s, upstream=upstream, profile_dirs=profile_dirs), redactor,
                         jobs=jobs,
                         report_dir=report_dir, output=output, verbose=verbose, as_json=as_json,
                         command=matrix_command_line(names, selection, output, report_dir, shard),
                         shard=None if part is None else part[1] | {"selection": selection})


def matrix_command_line(targets: Sequence[str], selection: str, output: Path, report_dir: Path,
                        shard: str | None = None) -> str:
    """The command line a matrix says it was made by: its targets, the options that selected its
    scenario runs (`-s`, `-t`, `--mode` words), its shard and where it was written."""
    return " ".join(["parity matrix", f"--targets {','.join(targets)}", *([selection] if selection else []),
                     *([f"--shard {shard}"] if shard else []), f"--output {output}", f"--report-dir {report_dir}"])
