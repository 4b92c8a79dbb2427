"""`parity`: run scenarios against a gateway, list and validate them, serve the fixtures.

Exit codes of `parity run`: 0 every scenario passed (or is unsupported by the target); 1 a
scenario failed; 2 a usage error (a selection that matches nothing among them), a target that
cannot be started or reached, a broken scenario file or a scenario that could not run (even
when others also failed). When nothing could run at all, the previous report stays in place.
`parity matrix` exits 1 only when a target could not run at all.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import replace
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..fixtures.mcp import FIXTURE_SERVERS
from ..fixtures.upstream import build_upstream_app
from ..reference_impl import ConfigError, GatewayConfig, build_gateway_app
from . import baseline, goldens
from .checks import no_reference_findings
from .defaults import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_UPSTREAM_PORT, LOOPBACK
from .exchange import Exchange
from .findings import Finding, HarnessError, Severity
from .loader import Catalogue, LoadedScenario, builtin_scenarios_dir, load
from .matrix import build_matrix, run_matrix, write_matrix
from .profile import ProfileError, find_profile, profile_paths
from .redaction import RedactedStream, Redactor
from .judges import judges
from .report import RunInfo, tally, tally_line, write_reports
from .runner import EngineEvent, Judge, ScenarioResult, UnitFinished, units_of
from .scenario import MODES, Mode, scenario_json_schema
from .session import REFERENCE, TargetOptions, open_session, parse_header
from .stack import ServerThread

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SCHEMA_FILE = "scenario.schema.json"
_STYLE = {"pass": "green", "fail": "red", "could_not_run": "yellow", "unsupported": "blue"}
_LABEL = {"pass": "pass", "fail": "fail", "could_not_run": "could not run", "unsupported": "unsupported"}

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@contextmanager
def _redacted_consoles() -> Iterator[Redactor]:
    """A new redactor for a run; until the block ends, everything written to standard output
    and error passes through it: `out` and `err`, and the log lines of the servers the run
    starts (uvicorn, the reference gateway)."""
    redactor = Redactor()
    with redirect_stdout(RedactedStream(sys.stdout, redactor)), redirect_stderr(RedactedStream(sys.stderr, redactor)):
        yield redactor


def _catalogue(paths: tuple[Path, ...]) -> Catalogue:
    catalogue = load(paths or (builtin_scenarios_dir(),))
    for error in catalogue.errors:
        err.print(f"[red]error[/red] {escape(str(error))}", soft_wrap=True)
    return catalogue


_PROFILE_DIR = click.option("--profile-dir", "profile_dirs", multiple=True, type=click.Path(path_type=Path),
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
        _PROFILE_DIR,
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
    except ValueError as error:
        raise click.UsageError(str(error)) from error
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


def _say(line: str) -> None:
    out.print(escape(line), soft_wrap=True)


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


@click.group()
@click.version_option(package_name="responses-parity", prog_name="parity")
def main() -> None:
    """Contract-level parity checks for OpenAI-compatible Responses API gateways."""


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
    catalogue = _catalogue(paths)
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
        with open_session(options, mcp_names, _say, redactor) as session:
            results = session.run(units, jobs, _progress, judges)
    except HarnessError as error:
        err.print(f"[red]error[/red] {escape(str(error))}", soft_wrap=True)
        sys.exit(EXIT_USAGE)
    return catalogue, results, RunInfo(session.target, started, time.monotonic() - clock, redactor,
                                       tuple(str(e) for e in catalogue.errors))


def _finish(catalogue: Catalogue, results: list[ScenarioResult], info: RunInfo, report_dir: Path) -> None:
    """Report the run (console, report folder) and exit with its code. When nothing could run,
    the previous report stays in place."""
    counts = tally(results)
    if results and counts["could_not_run"] == len(results):
        out.print(_summary(results))
        err.print(f"[red]error[/red] nothing could run ({tally_line(counts)}); the report in {report_dir} is "
                  "left as it was", soft_wrap=True)
        sys.exit(EXIT_USAGE)
    write_reports(report_dir, results, info)
    out.print(_summary(results))
    out.print(f"{tally_line(counts)}; report: {report_dir / 'report.md'}", soft_wrap=True)
    if catalogue.errors or counts["could_not_run"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if counts["fail"] else EXIT_OK)


@main.command()
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
    except HarnessError as error:
        raise click.UsageError(str(error)) from error
    with _redacted_consoles() as redactor:
        catalogue, results, info = _execute(judges=chosen, redactor=redactor, **selection)
        _finish(catalogue, results, info, report_dir)


@main.command()
@_selection_options
@click.option("--name", default=None, help="Name of the golden set (default: the target's name; required for a "
                                           "URL target).")
@click.option("--golden-dir", type=click.Path(path_type=Path), default=goldens.DEFAULT_GOLDEN_DIR, show_default=True)
def record(*, report_dir: Path, name: str | None, golden_dir: Path, **selection: Any) -> None:
    """Run scenarios and save every exchange and its contract as goldens, secrets removed."""
    target = selection["target"]
    if name is None and "://" in target:
        raise click.UsageError("name the golden set of a URL target with --name")
    with _redacted_consoles() as redactor:
        catalogue, results, info = _execute(redactor=redactor, **selection)
        folder = goldens.record(golden_dir, name or target, results, target_name=info.target.name,
                                model=info.target.model, scripted=info.target.scripted, recorded_at=info.started_at,
                                redactor=redactor)
        out.print(f"recorded {sum(1 for _ in folder.glob('*/*.json'))} scenario run(s) in {folder}", soft_wrap=True)
        _finish(catalogue, results, info, report_dir)


@main.group("golden")
def golden_group() -> None:
    """Work with recorded golden sets."""


@golden_group.command("diff")
@click.argument("old", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("new", type=click.Path(exists=True, file_okay=False, path_type=Path))
def golden_diff(old: Path, new: Path) -> None:
    """What changed between two golden sets (e.g. OpenAI a month apart). Exit 1 if anything did."""
    try:
        before, after = goldens.load(old), goldens.load(new)
    except HarnessError as error:
        raise click.UsageError(str(error)) from error
    changes = goldens.diff_sets(before, after)
    for change in changes:
        where = f"{change.scenario} [{change.mode}]" + (f" step {change.step}" if change.step else "")
        out.print(escape(f"{where}: {change.finding.severity} ({change.finding.kind}, {change.finding.rule}): "
                         f"{change.finding.message}"), soft_wrap=True)
    out.print(f"{len(changes)} change(s) from {before.name} ({before.manifest.get('recorded_at')}) to "
              f"{after.name} ({after.manifest.get('recorded_at')})", soft_wrap=True)
    sys.exit(EXIT_FAILED if changes else EXIT_OK)


@main.group("baseline")
def baseline_group() -> None:
    """Known divergences of a target, so CI fails only on new or worse ones."""


@baseline_group.command("update")
@click.option("--results", "results_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=Path("reports/latest/results.json"), show_default=True, help="The run to accept.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="The baseline file (default: baselines/<target>.json).")
def baseline_update(results_file: Path, output: Path | None) -> None:
    """Accept every divergence (warning or error) of a run as known."""
    try:
        document = json.loads(results_file.read_text())
    except ValueError as error:
        raise click.UsageError(f"{results_file}: not a results.json ({error})") from error
    accepted = baseline.build(document)
    path = output or Path("baselines") / f"{_file_safe(str(accepted['target']))}.json"
    baseline.write(path, accepted)
    out.print(f"wrote {path}: {len(accepted['divergences'])} known divergence(s)", soft_wrap=True)


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "target"


@main.command("matrix")
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
@_PROFILE_DIR
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
                        f"--output {output}"])
    with _redacted_consoles() as redactor:
        runs = run_matrix(names, units, base, report_dir, jobs=jobs, say=_say, on_event=_progress, redactor=redactor)
        html = write_matrix(build_matrix(runs, command), output, redactor)
        for run in runs:
            counts = run.document["summary"]["parity"] if run.document else None
            state = f"parity {counts['pass']}/{counts['runs']}" if counts else "[red]could not run[/red]"
            out.print(f"{run.name}: {state}")
        out.print(f"matrix: {output} and {html}")
    if catalogue.errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if any(run.failure for run in runs) else EXIT_OK)


@main.command("bench")
@click.option("--targets", default="reference", show_default=True, metavar="A,B,...",
              help="What to measure: 'reference' (the reference gateway, in a process of its own), target "
                   "profiles (smg, llama-stack, ...; installed and started against the run's upstream), or base "
                   "URLs of running gateways pointed at --upstream.")
@click.option("--rounds", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Rounds; each measures every workload on every target right after a floor batch.")
@click.option("--requests", "sequential", type=click.IntRange(1), default=40, show_default=True,
              help="Requests per batch of W1, W2 and W4 (one at a time).")
@click.option("--throughput-requests", type=click.IntRange(1), default=800, show_default=True,
              help="Requests per W3 batch.")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=16, show_default=True,
              help="Requests in flight at once in W3.")
@click.option("--workload", "-w", "workloads", multiple=True, type=click.Choice(["text", "stream", "throughput",
                                                                                   "mcp"]),
              help="Measure only these (repeatable): text (W1), stream (W2), throughput (W3), mcp (W4).")
@click.option("--upstream", default=None, help="A running scripted upstream (`parity serve upstream`) that URL "
                                               "targets talk to; default: the run starts one.")
@click.option("--api-key", envvar="PARITY_API_KEY", help="Bearer token for URL targets (env PARITY_API_KEY).")
@click.option("--header", "headers", multiple=True, help="Extra header 'Name: value' for URL targets (repeatable).")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds one request may take.")
@click.option("--output", type=click.Path(path_type=Path), default=Path("reports/latest/bench.md"),
              show_default=True, help="The Markdown report; the JSON (every sample) goes beside it.")
@_PROFILE_DIR
def bench_command(*, targets: str, rounds: int, sequential: int, throughput_requests: int, concurrency: int,
                  workloads: tuple[str, ...], upstream: str | None, api_key: str | None, headers: tuple[str, ...],
                  timeout_s: float, output: Path, profile_dirs: tuple[Path, ...]) -> None:
    """Measure what gateways add to each model turn, side by side with the floor (the same work
    without a gateway), on loopback: W1 a text response, W2 its stream (first event, whole
    stream), W3 throughput, W4 one MCP tool round trip. Prints and writes the figures."""
    from . import bench

    try:
        parsed = dict(parse_header(h) for h in headers) | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    names = tuple(name.strip() for name in targets.split(",") if name.strip())
    if not names:
        raise click.UsageError("--targets names nothing")
    options = bench.BenchOptions(
        targets=names, rounds=rounds, sizes=bench.Sizes(sequential, throughput_requests, concurrency),
        workloads=tuple(w for w in bench.WORKLOADS if not workloads or w in workloads), upstream=upstream,
        headers=parsed, timeout_s=timeout_s, profile_dirs=profile_dirs)
    command = "parity " + shlex.join(sys.argv[1:])
    with _redacted_consoles() as redactor:
        redactor.add(*parsed.values())
        try:
            result = bench.run_bench(options, lambda line: err.print(line, soft_wrap=True))
        except HarnessError as error:
            err.print(f"[red]error[/red] {escape(str(error))}", soft_wrap=True)
            sys.exit(EXIT_USAGE)
        report, data = bench.write(result, output, redactor.redact_text(command), redactor)
        out.print(report.read_text(), markup=False, soft_wrap=True)
        err.print(f"wrote {report} and {data}", soft_wrap=True)


@main.command("profiles")
@click.option("--profile-dir", "profile_dirs", multiple=True, type=click.Path(path_type=Path))
def profiles_command(profile_dirs: tuple[Path, ...]) -> None:
    """List the target profiles (shipped, and in --profile-dir folders); exit 2 if one is broken."""
    broken = 0
    for name, path in profile_paths(profile_dirs).items():
        try:
            profile = find_profile(name, profile_dirs)
        except ProfileError as error:
            err.print(f"[red]error[/red] {escape(str(error))}", soft_wrap=True)
            broken += 1
            continue
        assert profile is not None
        out.print(f"[bold]{name}[/bold] [dim]{escape(str(path))}[/dim]")
        out.print(f"    {escape(profile.title)}", soft_wrap=True)
        for capability, why in profile.lacks.items():
            out.print(f"    [dim]lacks {capability}: {escape(why)}[/dim]", soft_wrap=True)
    sys.exit(EXIT_USAGE if broken else EXIT_OK)


@main.command("list")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--tag", "-t", "tags", multiple=True)
def list_(paths: tuple[Path, ...], tags: tuple[str, ...]) -> None:
    """List scenarios: id, modes, tags and title."""
    catalogue = _catalogue(paths)
    for loaded in catalogue.select((), tags):
        scenario = loaded.scenario
        out.print(f"[bold]{scenario.id}[/bold] [dim]{'/'.join(scenario.modes)} · {', '.join(scenario.tags)}[/dim]")
        out.print(f"    {scenario.title}", soft_wrap=True)
    sys.exit(EXIT_USAGE if catalogue.errors else EXIT_OK)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check scenario files; print one line per problem."""
    catalogue = _catalogue(paths)
    out.print(f"{len(catalogue.scenarios)} scenario(s) valid, {len(catalogue.errors)} problem(s)")
    sys.exit(EXIT_USAGE if catalogue.errors else EXIT_OK)


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 if the shipped schema is out of date.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help=f"Where to write it (default: the built-in scenarios folder's {SCHEMA_FILE}).")
def schema(check: bool, output: Path | None) -> None:
    """Write the JSON Schema of scenario files (for editor validation)."""
    path = output or builtin_scenarios_dir() / SCHEMA_FILE
    text = json.dumps(scenario_json_schema(), indent=2) + "\n"
    if check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            err.print(f"{path} is out of date; run `parity schema`")
            sys.exit(EXIT_FAILED)
        out.print(f"{path} is up to date")
        return
    path.write_text(text)
    out.print(f"wrote {path}")


def _grouped(findings: list[Finding]) -> list[tuple[Finding, int]]:
    """The same difference found in several places, once with a count (a legacy stream lacks
    `logprobs` on hundreds of deltas: one line, not hundreds), worst first. A group of several
    is told by its key, which names no place."""
    groups: dict[tuple[Severity, tuple[str, str, str]], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.severity, finding.group), []).append(finding)
    folded = [(group[0] if len(group) == 1 else replace(group[0], message=group[0].key or group[0].message),
               len(group)) for group in groups.values()]
    return sorted(folded, key=lambda pair: -pair[0].severity)


def _exchanges_in(path: Path) -> list[Exchange]:
    """The exchanges a file holds (one object, a list of them, or a golden unit's steps);
    raises `HarnessError` naming the file and the problem."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise HarnessError(f"{path}: cannot read it as JSON ({error})") from error
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        data = [step.get("exchange") if isinstance(step, dict) else None for step in data["steps"]]
    entries = data if isinstance(data, list) else [data]
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("response"), dict):
            where = f"{path}[{index}]" if isinstance(data, list) else str(path)
            raise HarnessError(f"{where}: not an exchange (an object with a `response` object)")
    return [Exchange.from_file(entry) for entry in entries]


@main.command("check-exchange")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--surface", type=click.Choice(["auto", "responses", "chat"]), default="auto", show_default=True,
              help="Which endpoint the exchanges come from (auto: tell from the answer).")
@click.option("--current", is_flag=True,
              help="The exchanges were captured just now (a gateway's traffic today): a field the openai SDK "
                   "requires and they lack is a warning, not drift of older traffic.")
def check_exchange(files: tuple[Path, ...], surface: str, current: bool) -> None:
    """Run every no-reference check (SDK schema, stream grammar) on exchange files.

    A file holds {"request": {method, url, body}, "response": {status, headers, body, sse}}, a
    list of such objects, or a golden unit (`parity record`'s `<scenario>/<mode>.json`). Exit 1
    if any error-level finding, 2 if a file could not be read."""
    chat = None if surface == "auto" else surface == "chat"
    counts = {severity: 0 for severity in Severity}
    unreadable = 0
    for path in files:
        try:
            exchanges = _exchanges_in(path)
        except HarnessError as error:
            err.print(f"[red]error[/red] {escape(str(error))}", soft_wrap=True)
            unreadable += 1
            continue
        for index, exchange in enumerate(exchanges):
            name = f"{path}[{index}]" if len(exchanges) > 1 else str(path)
            findings = no_reference_findings(exchange, chat, current=current)
            worst = max((f.severity for f in findings), default=None)
            label = "ok" if worst is None or worst < Severity.WARNING else str(worst)
            out.print(f"[bold]{escape(name)}[/bold]: {label}", soft_wrap=True)
            for finding, count in _grouped(findings):
                times = f" (x{count})" if count > 1 else ""
                out.print(escape(f"    {finding.severity} {finding.kind}/{finding.rule}{times}: {finding.message}"),
                          soft_wrap=True)
            for finding in findings:
                counts[finding.severity] += 1
    out.print(f"{len(files) - unreadable} file(s) checked: {counts[Severity.ERROR]} error(s), "
              f"{counts[Severity.WARNING]} warning(s), {counts[Severity.NOTE]} note(s)")
    sys.exit(EXIT_USAGE if unreadable else EXIT_FAILED if counts[Severity.ERROR] else EXIT_OK)


@main.group()
def serve() -> None:
    """Serve one part alone on loopback, to point your own gateway at the fixtures."""


def _serve_forever(app: Any, port: int, what: str) -> None:
    """Serve until Ctrl-C; a port that cannot be listened on is a one-line error and exit 2."""
    try:
        bound = ServerThread(app, port)
    except HarnessError as error:
        err.print(f"[red]error[/red] {escape(str(error))}; choose another with --port", soft_wrap=True)
        sys.exit(EXIT_USAGE)
    server = bound.start()
    out.print(f"{what} listening on {server.url} (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


@serve.command("upstream")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT, show_default=True)
def serve_upstream(port: int) -> None:
    """The scripted upstream model (point your gateway's OpenAI base URL at .../v1)."""
    _serve_forever(build_upstream_app(), port, "scripted upstream")


@serve.command("mcp")
@click.argument("name", type=click.Choice(sorted(FIXTURE_SERVERS)))
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT + 1, show_default=True)
def serve_mcp(name: str, port: int) -> None:
    """An MCP fixture server (streamable HTTP at /mcp, SSE at /sse)."""
    _serve_forever(FIXTURE_SERVERS[name](), port, f"MCP fixture {name!r}")


@serve.command("reference")
@click.option("--port", type=int, default=DEFAULT_UPSTREAM_PORT - 2, show_default=True)
@click.option("--config", "config_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Gateway settings (YAML).")
@click.option("--upstream", default=None, help="Model base URL, e.g. http://127.0.0.1:8642/v1 "
                                               "(default: a scripted upstream started alongside).")
@click.option("--store", "store_path", default="reference.sqlite3", show_default=True,
              help="SQLite file for responses and conversations (':memory:' keeps nothing); a --config "
                   "file's store_path wins.")
def serve_reference(port: int, config_file: Path | None, upstream: str | None, store_path: str) -> None:
    """The reference gateway."""
    extra: ServerThread | None = None
    try:
        if config_file is not None:
            config = GatewayConfig.from_file(config_file)
        else:
            if upstream is None:
                extra = ServerThread(build_upstream_app()).start()
                upstream = f"{extra.url}/v1"
                out.print(f"scripted upstream listening on {extra.url}")
            config = GatewayConfig(upstream_url=upstream, store_path=store_path)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    try:
        _serve_forever(build_gateway_app(config), port, "reference gateway")
    finally:
        if extra is not None:
            extra.stop()
