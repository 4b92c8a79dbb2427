"""Commands on what earlier runs left: golden sets (`golden diff`) and a target's known
divergences (`baseline update`)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
from rich.markup import escape

from ...openai_contract.documents import read_json
from ..errors import HarnessError
from ..judge import baseline, goldens
from ..report import changelog
from .click_options import json_option
from .console import EXIT_FAILED, EXIT_OK, err, out


@click.group("golden")
def golden_group() -> None:
    """Work with recorded golden sets."""


@golden_group.command("diff")
@click.argument("old", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("new", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the changelog as Markdown here.")
@json_option("Print the changelog as JSON on standard output.")
def golden_diff(old: Path, new: Path, output: Path | None, as_json: bool) -> None:
    """The contract-level changelog from one golden set to another (a gateway before and after an
    upgrade, OpenAI a month apart): each change by scenario, mode and step, with its aspect and
    whether it now matches OpenAI's contract (fixed), no longer does (broke) or neither
    (changed). Exit 1 if anything changed."""
    try:
        log = changelog.changelog(goldens.load(old), goldens.load(new))
    except HarnessError as problem:
        raise click.UsageError(str(problem)) from problem
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(changelog.markdown(log, f"parity golden diff {old} {new} --output {output}"))
    if as_json:
        click.echo(json.dumps(log.to_dict(), indent=2))
    else:
        for change in log.changes:
            where = f"{change.scenario} [{change.mode}]" + (f" step {change.step}" if change.step else "")
            out.print(escape(f"{change.verdict}: {where}: {change.aspect}: {change.message}"), soft_wrap=True)
        counts = log.counts()
        out.print(escape(f"{len(log.changes)} change(s) from {log.old.name} ({log.old.manifest.get('recorded_at')}) "
                         f"to {log.new.name} ({log.new.manifest.get('recorded_at')}): "
                         + ", ".join(f"{counts[v]} {v}" for v in changelog.Verdict)), soft_wrap=True)
    if output is not None:
        (err if as_json else out).print(escape(f"changelog: {output}"), soft_wrap=True)
    sys.exit(EXIT_FAILED if log.changes else EXIT_OK)


@click.group("baseline")
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
        document = read_json(results_file)
    except (OSError, ValueError) as problem:
        raise click.UsageError(f"{results_file}: not a results.json ({problem})") from problem
    accepted = baseline.build(document)
    path = output or Path("baselines") / f"{_file_safe(str(accepted['target']))}.json"
    baseline.write(path, accepted)
    out.print(f"wrote {path}: {len(accepted['divergences'])} known divergence(s)", soft_wrap=True)


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "target"
