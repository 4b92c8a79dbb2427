"""Commands on real traffic: `parity proxy` records and checks it as it flows, `parity replay`
sends it again to another target and diffs the contracts, `parity scenario from-capture`
drafts a scenario from it."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import click
import httpx2

from ..engine.fixture_client import FixtureClient
from ..engine.session import open_session
from ..engine.server_thread import ServerThread
from ..engine.targets import http_client
from ..errors import HarnessError
from ..model.findings import Finding
from ..options import MAX_ANSWER_MB, PROXY_UPSTREAM, TARGET_OPTIONS, OptionError, target_options
from ..traffic.from_capture import scenario_text
from ..traffic.forwarding import (DEFAULT_READ_TIMEOUT_S, Credentials, Dropped, Found, NotForwarded, ProxyEvent,
                                  ProxyLimits, Recorded)
from ..traffic.proxy import RecordingProxy
from ..traffic.replay import Replayed, replay
from ..wire.capture import read_captures
from ..wire.redaction import Redactor
from .click_options import click_options, json_option
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, for_people, out, redacted_consoles, say
from .serve import serve_forever

DEFAULT_PROXY_PORT = 8650
_MB = 2**20


def _finding_line(where: str, finding: Finding) -> str:
    return f"{where}: {finding.severity} {finding.rule}: {finding.message}"


def _finding_json(where: str, finding: Finding) -> str:
    return json.dumps({"capture": where} | finding.to_dict(), default=str)


def _printer(as_json: bool) -> Callable[[ProxyEvent], None]:
    tell = for_people(as_json)

    def show(event: ProxyEvent) -> None:
        if isinstance(event, Found):
            say(_finding_json(event.capture, event.finding) if as_json else _finding_line(event.capture, event.finding))
        elif isinstance(event, NotForwarded | Dropped):  # no finding: with --json, not on standard output
            tell(f"{event.method} {event.path}: not forwarded: {event.reason}" if isinstance(event, NotForwarded)
                 else f"{event.capture}: neither checked nor written: {event.reason}")
        elif isinstance(event, Recorded) and not as_json:
            exchange = event.exchange
            what = exchange.transport_error or \
                f"{exchange.status or 'no answer'}{' (stream)' if exchange.streamed else ''}"
            ended = f"; {exchange.meta['ended']}" if exchange.meta.get("ended") else ""
            say(f"{event.capture}: {exchange.method} {exchange.meta.get('path')} -> {what}{ended}")
    return show


@click.command("proxy")
@click_options(PROXY_UPSTREAM)
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PROXY_PORT, show_default=True,
              help="Loopback port to listen on (0: any free one).")
@click.option("--captures", type=click.Path(file_okay=False, path_type=Path), default=Path("captures"),
              show_default=True, help="Folder the exchanges are written to, one file each.")
@json_option("Print each finding as a JSON line on standard output (capture and the finding's fields, as in "
             "results.json); the rest (where it listens, what is not checked) goes to standard error.")
@click_options(MAX_ANSWER_MB)
@click.option("--max-request-mb", type=click.FloatRange(0, min_open=True), default=ProxyLimits.max_request_bytes / _MB,
              show_default=True, help="A larger request body is refused with a 413 in OpenAI's error envelope, "
                                      "before the rest of it is read.")
@click.option("--max-recorded-request-mb", type=click.FloatRange(0, min_open=True),
              default=ProxyLimits.max_recorded_request_bytes / _MB, show_default=True,
              help="How much of one request body is recorded (it is forwarded whole).")
@click.option("--read-timeout", type=click.FloatRange(0, min_open=True), default=DEFAULT_READ_TIMEOUT_S,
              show_default=True, help="Seconds the upstream may send nothing, before its answer or within it: then "
                                      "the client gets a 504 (in a stream, an error event) and it is a finding.")
@click.option("--secret-header", "secret_headers", multiple=True, metavar="NAME",
              help="A request header whose value is a credential, removed from every capture and line like "
                   "Authorization's (repeatable).")
@click.option("--secret-param", "secret_params", multiple=True, metavar="NAME",
              help="A query parameter whose value is a credential, besides api_key, key, token, access_token, ... "
                   "(repeatable).")
def proxy_command(*, upstream: str, port: int, captures: Path, as_json: bool, max_answer_mb: float,
                  max_request_mb: float, max_recorded_request_mb: float, read_timeout: float,
                  secret_headers: tuple[str, ...], secret_params: tuple[str, ...]) -> None:
    """Forward a client's traffic to UPSTREAM unchanged, record every Responses, Chat Completions
    and Conversations exchange and every WebSocket-mode connection (secrets removed), and print
    the findings of the checks that need no reference as they occur: one line each, the capture
    file, the rule and what is wrong.
    Point the client's base URL at http://127.0.0.1:PORT/v1. Stops on Ctrl-C or SIGTERM,
    closing what is open and writing what it recorded."""
    if not upstream.startswith(("http://", "https://")):
        raise click.BadParameter(f"{upstream!r} is not an http(s) URL", param_hint="--upstream")
    limits = ProxyLimits(max_request_bytes=int(max_request_mb * _MB),
                         max_recorded_request_bytes=int(max_recorded_request_mb * _MB),
                         max_answer_bytes=int(max_answer_mb * _MB), read_timeout_s=read_timeout)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped as by Ctrl-C: open exchanges end, recorded
    with redacted_consoles() as redactor:
        proxy = RecordingProxy(upstream, captures, _printer(as_json), redactor=redactor, limits=limits,
                               credentials=Credentials.naming(secret_headers, secret_params))

        def stop(server: ServerThread) -> None:
            proxy.stop()  # open exchanges end, and are recorded, before the server stops
            if pending := proxy.checker.pending:
                for_people(as_json)(f"parity proxy stopping: writing what is still being checked ({pending:,} "
                                    "bytes; Ctrl-C again leaves it unwritten)")
            server.stop(timeout=None)  # until the checker wrote all it was sent, however loaded the machine

        serve_forever(lambda: proxy.server(port).start(),
                      lambda server: for_people(as_json)(f"parity proxy listening on {server.url} -> {proxy.upstream}; "
                                                         f"captures in {captures} (Ctrl-C to stop)"), stop)


def _show(replayed: Replayed, as_json: bool) -> None:
    name = replayed.captured.path.name
    if as_json:
        say(json.dumps({"capture": name, "status": replayed.answer.status, "differs": replayed.differs,
                        "errors": replayed.errors, "findings": [finding.to_dict() for finding in replayed.findings]},
                       default=str))
        return
    say(f"{name}: {'differs' if replayed.differs else 'same contract'} (status {replayed.answer.status})")
    for side, answered in replayed.errors.items():
        say(f"    {side}: {answered}")
    for finding in replayed.findings:
        say(f"    {finding.severity} {finding.rule}: {finding.message}")


@click.command("replay")
@click.argument("captures", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click_options(*TARGET_OPTIONS)
@json_option("Print each exchange's result as a JSON line on standard output (capture, status, differs, errors: "
             "each side's error message where the answers' errors differ, findings); errors go to standard error.")
def replay_command(captures: tuple[Path, ...], as_json: bool, **values: object) -> None:
    """Send the captured requests (folders of `parity proxy` captures, or files) again to
    --target, in order, and diff the contract of each new answer with the captured one. The
    reference gateway or a profile's talks to a scripted model playing the captured turns.
    Exit 1 if any differs, 2 if a capture cannot be read or the target not reached."""
    try:
        options = target_options(values)
        recorded = read_captures(list(captures))
    except OptionError as problem:
        raise click.BadParameter(problem.problem, param_hint=f"--{problem.option.name}") from problem
    except HarnessError as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    with redacted_consoles() as redactor:
        try:
            with open_session(options, (), redactor=redactor) as session:
                async def go() -> list[Replayed]:
                    async with http_client(httpx2.Timeout(session.target.timeout_s)) as client:
                        upstream = session.stack.upstream_url if session.stack is not None else None
                        fixtures = FixtureClient(client, upstream, {}) if upstream is not None else None
                        return await replay(recorded, session.target, client, fixtures)
                results = asyncio.run(go())
        except HarnessError as problem:
            error(str(problem))
            sys.exit(EXIT_USAGE)
        for result in results:
            _show(result, as_json)
        differing = sum(result.differs for result in results)
        if not as_json:
            say(f"{len(results)} exchange(s) replayed against {options.target}: {differing} differ")
    sys.exit(EXIT_FAILED if differing else EXIT_OK)


@click.group("scenario")
def scenario_group() -> None:
    """Work with scenario files."""


@scenario_group.command("from-capture")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The scenario file to write (default: standard output).")
@click.option("--id", "scenario_id", default="captured", show_default=True, help="The scenario's id.")
def from_capture_command(files: tuple[Path, ...], output: Path | None, scenario_id: str) -> None:
    """Draft a scenario from captured exchanges (files, or a folder of them, in order): one step
    per request, each expecting the captured answer's contract. Review it before committing:
    its top comments say what a capture cannot tell."""
    try:
        text = scenario_text(read_captures(list(files)), scenario_id)
    except (HarnessError, ValueError) as problem:
        error(str(problem))
        sys.exit(EXIT_USAGE)
    text = Redactor().redact_text(text)
    if output is None:
        out.file.write(text)
        return
    output.write_text(text, encoding="utf-8")
    say(f"wrote {output}; check it with: parity validate {output}")
