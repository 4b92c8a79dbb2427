"""Commands that run scenarios against targets: `run`, `record` and `matrix`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .. import goldens
from ..defaults import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_UPSTREAM_PORT, LOOPBACK
from ..findings import HarnessError
from ..judges import judges
from ..loader import Catalogue, LoadedScenario
from ..matrix import build_matrix, run_matrix, write_matrix
from ..redaction import Redactor
from ..report import RunInfo, tally, tally_line, write_reports
from ..runner import EngineEvent, Judge, ScenarioResult, UnitFinished, units_of
from ..scenario import MODES, Mode
from ..session import REFERENCE, TargetOptions, open_session, parse_header
from .catalogue import load_catalogue
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, out, redacted_consoles, say

_STYLE = {"pass": "green", "fail": "red", "could_not_run": "yellow", "unsupported": "blue"}
_LABEL = {"pass": "pass", "fail": "fail", "could_not_run": "could not run", "unsupported": "unsupported"}

PROFILE_DIR = click.option("--profile-dir", "profile_dirs", multiple=True, type=click.Path(path_type=Path),
                           help="A folder of your own target profiles (repeatable; `parity profiles` lists them).")


def _target_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--target", default=REFERENCE, show_default=True,
                     help="'reference' (the embedded reference gateway), 'openai' (live: OPENAI_API_KEY, "
                          "OPENAI_BASE_URL, PARITY_OPENAI_MODEL), a target profile (smg, llama-stack, "
                          "open-responses-server, litellm, or a profile file: installed and started for the "
                          "run) or a running gateway's base URL."),
        click.option("--api-key", envvar="PARITY_API_KEY", help="Sent as a bearer token (env PARITY_API_KEY)."),
        click.option("--header", "headers", multiple=True, help="Extra request header 'Name: value' (repeatable)."),
        click.option("--model", default="parity-model", show_default=True, help="Model name sent in requests."),
        click.option("--responses-path", default="/v1/responses", show_default=True,
                     help="Path of the target's Responses endpoint."),
        click.option("--chat-path", default="/v1/chat/completions", show_default=True,
                     help="Path of the target's Chat Completions endpoint."),
        click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
                     help="Seconds one request may take, from sending it to the last byte of its answer."),
        click.option("--max-answer-mb", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_MAX_ANSWER_BYTES / 2**20, show_default=True,
                     help="How much of one answer is read; a larger one is cut there (a finding)."),
        click.option("--upstream", default=f"http://{LOOPBACK}:{DEFAULT_UPSTREAM_PORT}", show_default=True,
                     help="The scripted upstream a URL target talks to (started there if not running)."),
        click.option("--public-mcp", multiple=True, metavar="NAME=URL",
                     help="Live runs: where `parity serve mcp NAME` is reachable from the internet (repeatable)."),
        click.option("--retries", type=click.IntRange(0, 10), default=None,
                     help="Resend a request answered 429/5xx or not at all (default: 2 for openai, else 0)."),
        PROFILE_DIR,
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _build_options(*, target: str, api_key: str | None, headers: tuple[str, ...], model: str,
                   responses_path: str, chat_path: str, timeout_s: float, max_answer_mb: float, upstream: str,
                   public_mcp: tuple[str, ...], retries: int | None,
                   profile_dirs: tuple[Path, ...]) -> TargetOptions:
    try:
        parsed = tuple(parse_header(h) for h in headers)
    except ValueError as problem:
        raise click.UsageError(str(problem)) from problem
    mapping = [entry.partition("=") for entry in public_mcp]
    if bad := [name for name, sep, url in mapping if not sep or not name or "://" not in url]:
        raise click.UsageError(f"--public-mcp {bad[0]!r}: write NAME=URL, e.g. calc=https://mcp.example.org")
    return TargetOptions(target=target, api_key=api_key, headers=parsed, model=model, responses_path=responses_path,
                         chat_path=chat_path, timeout_s=timeout_s,
                         max_answer_bytes=int(max_answer_mb * 2**20), upstream=upstream,
                         public_mcp=tuple((name, url) for name, _, url in mapping), retries=retries,
                         profile_dirs=profile_dirs)


def _progress(event: EngineEvent) -> None:
    if isinstance(event, UnitFinished):
        result = event.result
        style = _STYLE[result.outcome]
        width = len(str(event.total))
        out.print(f"[{event.done:>{width}}/{event.total}] [{style}]{_LABEL[result.outcome]:<5}[/{style}] "
                  f"{result.scenario.id} [dim]\\[{result.mode}] {result.duration_s:.2f}s[/dim]")
        if result.unsupported:
            out.print(f"        [dim]{escape(result.unsupported)}[/dim]", soft_wrap=True)
        for step, finding in result.findings:
            if finding.fails:
                out.print(f"        [dim]{step}:[/dim] {escape(finding.message)}", soft_wrap=True)
        for step in result.steps:
            if step.error:
                out.print(f"        [dim]{step.step_id}:[/dim] could not run: {escape(step.error)}", soft_wrap=True)


def _summary(results: list[ScenarioResult]) -> Table:
    table = Table(title="responses-parity", show_lines=False)
    table.add_column("scenario")
    for mode in MODES:
        table.add_column(mode, justify="center")
    rows: dict[str, dict[str, str]] = {}
    for result in results:
        rows.setdefault(result.scenario.id, {})[result.mode] = result.outcome
    for scenario, modes in rows.items():
        cells = [f"[{_STYLE[modes[m]]}]{_LABEL[modes[m]]}[/{_STYLE[modes[m]]}]" if m in modes else "-" for m in MODES]
        table.add_row(scenario, *cells)
    return table


def _selection_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("paths", nargs=-1, type=click.Path(path_type=Path)),
        click.option("--scenario", "-s", "ids", multiple=True, help="Run only this scenario id (repeatable)."),
        click.option("--tag", "-t", "tags", multiple=True, help="Run only scenarios with this tag (repeatable)."),
        click.option("--mode", type=click.Choice(["both", *MODES]), default="both", show_default=True),
        click.option("--jobs", "-j", type=click.IntRange(1, 64), default=4, show_default=True,
                     help="Scenario runs in parallel."),
        click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports/latest"),
                     show_default=True),
    ]
    for option in reversed(options):
        function = option(function)
    return _target_options(function)


def _units(paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...],
           mode: str) -> tuple[Catalogue, list[tuple[LoadedScenario, Mode]]]:
    """The scenario catalogue and the selected (scenario, mode) units; a selection that
    matches nothing is a usage error."""
    catalogue = load_catalogue(paths)
    if unknown := sorted(set(ids) - {s.scenario.id for s in catalogue.scenarios}):
        raise click.UsageError(f"no scenario with id {', '.join(unknown)}")
    modes: tuple[Mode, ...] = MODES if mode == "both" else (mode,)  # type: ignore[assignment]
    units = units_of(catalogue.select(ids, tags), modes)
    if not units:
        if not catalogue.scenarios:
            raise click.UsageError("no scenario could be loaded (see the errors above)" if catalogue.errors
                                   else "no scenario file found")
        asked = [*(f"tag {t}" for t in tags), *(f"id {i}" for i in ids), *([f"mode {mode}"] if mode != "both" else [])]
        raise click.UsageError(f"no scenario run matches {' and '.join(asked) or 'the selection'}")
    return catalogue, units


def _execute(*, paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...], mode: str, jobs: int,
             redactor: Redactor, judges: tuple[Judge, ...] = (),
             **target: Any) -> tuple[Catalogue, list[ScenarioResult], RunInfo]:
    """Load the scenarios, run the selected units against the target (`redactor` learning the
    run's secrets), and time it; a harness error (a target that cannot be started or reached)
    exits with the usage code."""
    options = _build_options(**target)
    catalogue, units = _units(paths, ids, tags, mode)
    mcp_names = {name for loaded, _ in units for name in loaded.scenario.fixtures}
    started, clock = datetime.now(UTC), time.monotonic()
    out.print(f"Running {len(units)} scenario run(s) against [bold]{options.target}[/bold] ...")
    try:
        with open_session(options, mcp_names, say, redactor) as session:
            results = session.run(units, jobs, _progress, judges)
    except HarnessError as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    return catalogue, results, RunInfo(session.target, started, time.monotonic() - clock, redactor,
                                       tuple(str(e) for e in catalogue.errors))


def _finish(catalogue: Catalogue, results: list[ScenarioResult], info: RunInfo, report_dir: Path) -> None:
    """Report the run (console, report folder) and exit with its code. When nothing could run,
    the previous report stays in place."""
    counts = tally(results)
    if results and counts["could_not_run"] == len(results):
        out.print(_summary(results))
        error(f"nothing could run ({tally_line(counts)}); the report in {report_dir} is left as it was")
        sys.exit(EXIT_USAGE)
    write_reports(report_dir, results, info)
    out.print(_summary(results))
    out.print(f"{tally_line(counts)}; report: {report_dir / 'report.md'}", soft_wrap=True)
    if catalogue.errors or counts["could_not_run"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if counts["fail"] else EXIT_OK)


@click.command("run")
@_selection_options
@click.option("--against", default=None, metavar="golden:NAME",
              help="Also compare every step's contract with a recorded golden set (offline).")
@click.option("--golden-dir", type=click.Path(path_type=Path), default=None,
              help=f"Where golden sets are (default: {goldens.DEFAULT_GOLDEN_DIR}, then the shipped ones).")
@click.option("--baseline", "baseline_file", type=click.Path(path_type=Path), default=None,
              help="Known divergences of this target (`parity baseline update`): they no longer fail the run.")
def run(*, report_dir: Path, against: str | None, golden_dir: Path | None, baseline_file: Path | None,
        **selection: Any) -> None:
    """Run scenarios (default: the built-in ones) against a target, in both stream modes."""
    try:
        chosen = judges(against, golden_dir, baseline_file)
    except HarnessError as problem:
        raise click.UsageError(str(problem)) from problem
    with redacted_consoles() as redactor:
        catalogue, results, info = _execute(judges=chosen, redactor=redactor, **selection)
        _finish(catalogue, results, info, report_dir)


@click.command("record")
@_selection_options
@click.option("--name", default=None, help="Name of the golden set (default: the target's name; required for a "
                                           "URL target).")
@click.option("--golden-dir", type=click.Path(path_type=Path), default=goldens.DEFAULT_GOLDEN_DIR, show_default=True)
def record(*, report_dir: Path, name: str | None, golden_dir: Path, **selection: Any) -> None:
    """Run scenarios and save every exchange and its contract as goldens, secrets removed."""
    target = selection["target"]
    if name is None and "://" in target:
        raise click.UsageError("name the golden set of a URL target with --name")
    with redacted_consoles() as redactor:
        catalogue, results, info = _execute(redactor=redactor, **selection)
        folder = goldens.record(golden_dir, name or target, results, target_name=info.target.name,
                                model=info.target.model, scripted=info.target.scripted, recorded_at=info.started_at,
                                redactor=redactor)
        out.print(f"recorded {sum(1 for _ in folder.glob('*/*.json'))} scenario run(s) in {folder}", soft_wrap=True)
        _finish(catalogue, results, info, report_dir)


@click.command("matrix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--targets", required=True, metavar="A,B,...",
              help="Comma-separated targets: reference, profile names or files, base URLs (openai too).")
@click.option("--scenario", "-s", "ids", multiple=True, help="Run only this scenario id (repeatable).")
@click.option("--tag", "-t", "tags", multiple=True, help="Run only scenarios with this tag (repeatable).")
@click.option("--mode", type=click.Choice(["both", *MODES]), default="both", show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Scenario runs in parallel against one target.")
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True,
              help="Seconds one request may take.")
@click.option("--output", type=click.Path(path_type=Path), default=Path("reports/latest/matrix.md"),
              show_default=True, help="The matrix in Markdown; the HTML goes beside it.")
@click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports/latest/matrix"),
              show_default=True, help="Each target's full report goes to a folder of its name here.")
@PROFILE_DIR
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
        runs = run_matrix(names, units, base, report_dir, jobs=jobs, say=say, on_event=_progress, redactor=redactor)
        html = write_matrix(build_matrix(runs, command), output, redactor)
        for one in runs:
            counts = one.document["summary"]["parity"] if one.document else None
            state = f"parity {counts['pass']}/{counts['runs']}" if counts else "[red]could not run[/red]"
            out.print(f"{one.name}: {state}")
        out.print(f"matrix: {output} and {html}")
    if catalogue.errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if any(one.failure for one in runs) else EXIT_OK)
