"""`parity bench`: what gateways add to each model turn, measured side by side with the floor."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from .. import bench
from ..errors import HarnessError
from ..options import (BENCH_API_KEY, BENCH_HEADER, BENCH_TARGETS, BENCH_TIMEOUT, BENCH_UPSTREAM, PROFILE_DIR,
                       parse_header)
from .click_options import click_options, json_option
from .console import EXIT_USAGE, err, error, for_people, out, redacted_consoles
from .progress import Progress


@click.command("bench")
@click_options(BENCH_TARGETS)
@click.option("--rounds", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Rounds; each measures every workload on every target right after a floor batch.")
@click.option("--requests", "sequential", type=click.IntRange(1), default=40, show_default=True,
              help="Requests per batch of W1, W2 and W4 (one at a time).")
@click.option("--throughput-requests", type=click.IntRange(1), default=800, show_default=True,
              help="Requests per W3 batch.")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=16, show_default=True,
              help="Requests in flight at once in W3.")
@click.option("--chains", type=click.IntRange(1), default=4, show_default=True,
              help="Chains per W5 chain batch (each of 20 requests, one at a time).")
@click.option("--workload", "-w", "workloads", multiple=True, type=click.Choice(bench.WORKLOADS),
              help="Measure only these (repeatable): text (W1), stream (W2), throughput (W3), mcp (W4), socket, "
                   "chain_socket and chain_http (W5).")
@click_options(BENCH_UPSTREAM, BENCH_API_KEY, BENCH_HEADER, BENCH_TIMEOUT)
@click.option("--output", type=click.Path(path_type=Path), default=Path("reports/latest/bench.md"),
              show_default=True, help="The Markdown report; the JSON (every sample) goes beside it.")
@click_options(PROFILE_DIR)
@json_option("Print the JSON written beside the report on standard output (command, machine, options, processes, "
             "targets, figures, and every batch's samples in batches); the report and the rest go to standard "
             "error.")
def bench_command(*, targets: str, rounds: int, sequential: int, throughput_requests: int, concurrency: int,
                  chains: int, workloads: tuple[str, ...], upstream: str | None, api_key: str | None,
                  headers: tuple[str, ...], timeout_s: float, output: Path, profile_dirs: tuple[Path, ...],
                  as_json: bool) -> None:
    """Measure what gateways add to each model turn, side by side with the floor (the same work
    without a gateway), on loopback: W1 a text response, W2 its stream (first event, whole
    stream), W3 throughput, W4 one MCP tool round trip, W5 WebSocket mode (a response over an
    open socket; a 20-turn chain on one socket against the same chain over HTTP). Prints and
    writes the figures."""
    try:
        parsed = dict(parse_header(h) for h in headers) | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    except ValueError as problem:
        raise click.UsageError(str(problem)) from problem
    names = tuple(name.strip() for name in targets.split(",") if name.strip())
    if not names:
        raise click.UsageError("--targets names nothing")
    options = bench.BenchOptions(
        targets=names, rounds=rounds, sizes=bench.Sizes(sequential, throughput_requests, concurrency, chains),
        workloads=tuple(w for w in bench.WORKLOADS if not workloads or w in workloads), upstream=upstream,
        headers=parsed, timeout_s=timeout_s, profile_dirs=profile_dirs)
    command = "parity " + shlex.join(sys.argv[1:])
    with redacted_consoles() as redactor:
        redactor.add(*parsed.values())
        try:
            with Progress() as measuring:
                result = bench.run_bench(options, for_people(True), measuring.update)
        except HarnessError as problem:
            error(str(problem))
            sys.exit(EXIT_USAGE)
        redactor.add(*(secret for target in result.targets for secret in target.secrets))
        report, data = bench.write(result, output, redactor.redact_text(command), redactor)
        (err if as_json else out).print(report.read_text(), markup=False, soft_wrap=True)
        err.print(f"wrote {report} and {data}", soft_wrap=True, markup=False)
        if as_json:
            click.echo(data.read_text(), nl=False)
