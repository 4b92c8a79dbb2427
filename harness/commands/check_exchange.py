"""`parity check-exchange`: the checks that need no reference, on exchanges captured anywhere.
It loads none of the servers (gateway, fixtures, uvicorn, mcp), so it starts at once."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ...openai_contract.documents import read_json
from ..errors import HarnessError
from ..judge.judgement import Case, judge
from ..model.findings import Finding, Severity
from ..wire.capture import connection_in, exchange_files
from ..wire.exchange import Exchange
from .click_options import json_option
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, error, out


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
    """The exchanges a file holds (one object, a list of them, a golden unit's steps, or a
    WebSocket connection's creates); raises `HarnessError` naming the file and the problem."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as problem:
        raise HarnessError(f"{path}: cannot read it as JSON ({problem})") from problem
    if (creates := connection_in(path, data)) is not None:
        return creates
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        data = [step.get("exchange") if isinstance(step, dict) else None for step in data["steps"]]
    entries = data if isinstance(data, list) else [data]
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("response"), dict):
            where = f"{path}[{index}]" if isinstance(data, list) else str(path)
            raise HarnessError(f"{where}: not an exchange (an object with a `response` object)")
    return [Exchange.from_file(entry) for entry in entries]


@click.command("check-exchange")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--surface", type=click.Choice(["auto", "responses", "chat"]), default="auto", show_default=True,
              help="Which endpoint the exchanges come from (auto: tell from the answer).")
@click.option("--current", is_flag=True,
              help="The exchanges were captured just now (a gateway's traffic today): a field the openai SDK "
                   "requires and they lack is a warning, not drift of older traffic.")
@json_option("Print one JSON object on standard output: exchanges (each with name, worst: ok, note, warning or "
             "error, and findings: severity, kind, rule, message, count), unreadable (each with path and "
             "problem) and summary (files, unreadable, errors, warnings, notes); the rest goes to standard error.")
def check_exchange(paths: tuple[Path, ...], surface: str, current: bool, as_json: bool) -> None:
    """Run every no-reference check (SDK schema, stream grammar) on exchange files.

    A file holds {"request": {method, url, body}, "response": {status, headers, body, sse}}, a
    list of such objects, a golden unit (`parity record`'s `<scenario>/<mode>.json`) or a
    WebSocket connection ({"transport": "websocket", "messages": [...]}); a folder stands for its
    `*.json` files (a `parity proxy` capture folder). A file that cannot be read as one is an
    error in the tally. Exit 1 if any error-level finding, 2 if a file could not be read or
    there are none."""
    chat = None if surface == "auto" else surface == "chat"
    console = err if as_json else out
    files = tuple(exchange_files(list(paths)))
    if not files:
        error(f"no exchange files in {', '.join(map(str, paths))}")
        sys.exit(EXIT_USAGE)
    counts = {severity: 0 for severity in Severity}
    checked: list[dict[str, Any]] = []
    unreadable: list[dict[str, str]] = []
    for path in files:
        try:
            exchanges = _exchanges_in(path)
        except HarnessError as problem:
            error(str(problem))
            unreadable.append({"path": str(path), "problem": str(problem)})
            continue
        for index, exchange in enumerate(exchanges):
            name = f"{path}[{index}]" if len(exchanges) > 1 else str(path)
            findings = judge(Case(exchange, chat, current=current)).findings
            worst = max((f.severity for f in findings), default=None)
            label = "ok" if worst is None or worst < Severity.WARNING else str(worst)
            console.print(f"[bold]{escape(name)}[/bold]: {label}", soft_wrap=True)
            grouped = _grouped(findings)
            for finding, count in grouped:
                times = f" (x{count})" if count > 1 else ""
                console.print(escape(f"    {finding.severity} {finding.kind}/{finding.rule}{times}: "
                                     f"{finding.message}"), soft_wrap=True)
            for finding in findings:
                counts[finding.severity] += 1
            checked.append({"name": name, "worst": label, "findings": [
                {"severity": str(finding.severity), "kind": str(finding.kind), "rule": str(finding.rule),
                 "message": finding.message, "count": count} for finding, count in grouped]})
    unread = f" ({len(unreadable)} unreadable)" if unreadable else ""
    console.print(f"{len(files)} file(s) checked{unread}: {counts[Severity.ERROR] + len(unreadable)} error(s), "
                  f"{counts[Severity.WARNING]} warning(s), {counts[Severity.NOTE]} note(s)")
    if as_json:
        click.echo(json.dumps({"exchanges": checked, "unreadable": unreadable, "summary": {
            "files": len(files), "unreadable": len(unreadable), "errors": counts[Severity.ERROR],
            "warnings": counts[Severity.WARNING], "notes": counts[Severity.NOTE]}}, indent=2))
    sys.exit(EXIT_USAGE if unreadable else EXIT_FAILED if counts[Severity.ERROR] else EXIT_OK)
