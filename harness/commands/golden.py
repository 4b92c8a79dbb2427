"""Commands on what earlier runs left: golden sets (`golden diff`) and a target's known
divergences (`baseline update`)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
from rich.markup import escape

from .. import baseline, goldens
from ..findings import HarnessError
from .console import EXIT_FAILED, EXIT_OK, out


@click.group("golden")
def golden_group() -> None:
    """Work with recorded golden sets."""


@golden_group.command("diff")
@click.argument("old", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("new", type=click.Path(exists=True, file_okay=False, path_type=Path))
def golden_diff(old: Path, new: Path) -> None:
    """What changed between two golden sets (e.g. OpenAI a month apart). Exit 1 if anything did."""
    try:
        before, after = goldens.load(old), goldens.load(new)
    except HarnessError as problem:
        raise click.UsageError(str(problem)) from problem
    changes = goldens.diff_sets(before, after)
    for change in changes:
        where = f"{change.scenario} [{change.mode}]" + (f" step {change.step}" if change.step else "")
        out.print(escape(f"{where}: {change.finding.severity} ({change.finding.kind}, {change.finding.rule}): "
                         f"{change.finding.message}"), soft_wrap=True)
    out.print(f"{len(changes)} change(s) from {before.name} ({before.manifest.get('recorded_at')}) to "
              f"{after.name} ({after.manifest.get('recorded_at')})", soft_wrap=True)
    sys.exit(EXIT_FAILED if changes else EXIT_OK)


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
        document = json.loads(results_file.read_text())
    except ValueError as problem:
        raise click.UsageError(f"{results_file}: not a results.json ({problem})") from problem
    accepted = baseline.build(document)
    path = output or Path("baselines") / f"{_file_safe(str(accepted['target']))}.json"
    baseline.write(path, accepted)
    out.print(f"wrote {path}: {len(accepted['divergences'])} known divergence(s)", soft_wrap=True)


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "target"
