"""`parity`: run scenarios against a gateway, list and validate them, serve the fixtures.

Exit codes of `parity run`: 0 every scenario passed; 1 a scenario failed; 2 a usage error or
a broken scenario file (even when others also failed).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..fixtures.mcp import FIXTURE_SERVERS
from ..fixtures.upstream import build_upstream_app
from ..reference_impl import ConfigError, GatewayConfig, build_gateway_app
from .findings import HarnessError, Severity
from .loader import Catalogue, builtin_scenarios_dir, load
from .report import RunInfo, parity_counts, write_reports
from .runner import EngineEvent, ScenarioResult, UnitFinished, units_of
from .scenario import MODES, Mode, scenario_json_schema
from .session import REFERENCE, TargetOptions, open_session, parse_header
from .stack import DEFAULT_UPSTREAM_PORT, LOOPBACK, ServerThread

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SCHEMA_FILE = "scenario.schema.json"
_STYLE = {"pass": "green", "fail": "red", "error": "yellow", "unsupported": "blue"}

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def _catalogue(paths: tuple[Path, ...]) -> Catalogue:
    catalogue = load(paths or (builtin_scenarios_dir(),))
    for error in catalogue.errors:
        err.print(f"[red]error[/red] {error}", soft_wrap=True)
    return catalogue


def _target_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--target", default=REFERENCE, show_default=True,
                     help="'reference' (the embedded reference gateway) or a gateway's base URL."),
        click.option("--api-key", envvar="PARITY_API_KEY", help="Sent as a bearer token (env PARITY_API_KEY)."),
        click.option("--header", "headers", multiple=True, help="Extra request header 'Name: value' (repeatable)."),
        click.option("--model", default="parity-model", show_default=True, help="Model name sent in requests."),
        click.option("--responses-path", default="/v1/responses", show_default=True,
                     help="Path of the target's Responses endpoint."),
        click.option("--chat-path", default="/v1/chat/completions", show_default=True,
                     help="Path of the target's Chat Completions endpoint."),
        click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
                     help="Seconds one request may take."),
        click.option("--upstream", default=f"http://{LOOPBACK}:{DEFAULT_UPSTREAM_PORT}", show_default=True,
                     help="The scripted upstream a URL target talks to (started there if not running)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _build_options(*, target: str, api_key: str | None, headers: tuple[str, ...], model: str,
                   responses_path: str, chat_path: str, timeout_s: float, upstream: str) -> TargetOptions:
    try:
        parsed = tuple(parse_header(h) for h in headers)
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    return TargetOptions(target=target, api_key=api_key, headers=parsed, model=model, responses_path=responses_path,
                         chat_path=chat_path, timeout_s=timeout_s, upstream=upstream)


def _progress(event: EngineEvent) -> None:
    if isinstance(event, UnitFinished):
        result = event.result
        style = _STYLE[result.outcome]
        width = len(str(event.total))
        out.print(f"[{event.done:>{width}}/{event.total}] [{style}]{result.outcome:<5}[/{style}] "
                  f"{result.scenario.id} [dim]\\[{result.mode}] {result.duration_s:.2f}s[/dim]")
        if result.unsupported:
            out.print(f"        [dim]{result.unsupported}[/dim]", soft_wrap=True)
        for step, finding in result.findings:
            if finding.severity >= Severity.ERROR:
                out.print(f"        [dim]{step}:[/dim] {finding.message}", soft_wrap=True)
        for step in result.steps:
            if step.error:
                out.print(f"        [dim]{step.step_id}:[/dim] could not run: {step.error}", soft_wrap=True)


def _summary(results: list[ScenarioResult]) -> Table:
    table = Table(title="responses-parity", show_lines=False)
    table.add_column("scenario")
    for mode in MODES:
        table.add_column(mode, justify="center")
    rows: dict[str, dict[str, str]] = {}
    for result in results:
        rows.setdefault(result.scenario.id, {})[result.mode] = result.outcome
    for scenario, modes in rows.items():
        cells = [f"[{_STYLE[modes[m]]}]{modes[m]}[/{_STYLE[modes[m]]}]" if m in modes else "-" for m in MODES]
        table.add_row(scenario, *cells)
    return table


@click.group()
@click.version_option(package_name="responses-parity", prog_name="parity")
def main() -> None:
    """Contract-level parity checks for OpenAI-compatible Responses API gateways."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@_target_options
@click.option("--scenario", "-s", "ids", multiple=True, help="Run only this scenario id (repeatable).")
@click.option("--tag", "-t", "tags", multiple=True, help="Run only scenarios with this tag (repeatable).")
@click.option("--mode", type=click.Choice(["both", *MODES]), default="both", show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Scenario runs in parallel.")
@click.option("--report-dir", type=click.Path(path_type=Path), default=Path("reports/latest"), show_default=True)
def run(*, paths: tuple[Path, ...], ids: tuple[str, ...], tags: tuple[str, ...], mode: str, jobs: int,
        report_dir: Path, **target: Any) -> None:
    """Run scenarios (default: the built-in ones) against a target, in both stream modes."""
    options = _build_options(**target)
    catalogue = _catalogue(paths)
    if unknown := sorted(set(ids) - {s.scenario.id for s in catalogue.scenarios}):
        raise click.UsageError(f"no scenario with id {', '.join(unknown)}")
    modes: tuple[Mode, ...] = MODES if mode == "both" else (mode,)  # type: ignore[assignment]
    units = units_of(catalogue.select(ids, tags), modes)
    mcp_names = {name for loaded, _ in units for name in loaded.scenario.fixtures}
    started, clock = datetime.now(UTC), time.monotonic()
    out.print(f"Running {len(units)} scenario run(s) against [bold]{options.target}[/bold] ...")
    try:
        with open_session(options, mcp_names) as session:
            results = session.run(units, jobs, _progress)
    except HarnessError as error:
        err.print(f"[red]error[/red] {error}")
        sys.exit(EXIT_USAGE)
    info = RunInfo(session.target, started, time.monotonic() - clock, tuple(str(e) for e in catalogue.errors))
    write_reports(report_dir, results, info)
    if results:
        out.print(_summary(results))
    failed = sum(1 for r in results if r.outcome in ("fail", "error"))
    unsupported = sum(1 for r in results if r.outcome == "unsupported")
    counts = parity_counts(results)
    out.print(f"{len(results) - failed - unsupported} passed, {failed} failed, {unsupported} unsupported; "
              f"parity with OpenAI {counts['parity']['pass']}/{counts['parity']['runs']}, gateway policy "
              f"{counts['gateway_policy']['pass']}/{counts['gateway_policy']['runs']}; "
              f"report: {report_dir / 'report.md'}")
    if catalogue.errors:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


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


@main.group()
def serve() -> None:
    """Serve one part alone on loopback, to point your own gateway at the fixtures."""


def _serve_forever(app: Any, port: int, what: str) -> None:
    server = ServerThread(app, port).start()
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
