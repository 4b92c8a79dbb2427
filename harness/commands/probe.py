"""`parity probe`: generated request probes sent to a target and compared with another target,
or with recorded answers; with `--shard I/N`, a part of them (`parity merge` puts the parts'
documents together: `probe/parts.py`)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from ..defaults import DEFAULT_MODEL, REFERENCE
from ..engine.collector import settle
from ..engine.shards import Shard, shard_part
from ..errors import HarnessError
from ..options import (PROBE_AGAINST, PROBE_JOBS, PROBE_SHARD, PROBE_TIMEOUT, TARGET_OPTIONS, TIMEOUT, OptionError,
                       target_options)
from ..probe.generate import DEFECTS, Probe, all_probes, select
from ..probe.parts import part_fields
from ..probe.report import console_lines, document, markdown
from ..probe.run import run_probes
from ..probe.send import BASE_INPUT
from .click_options import click_options, json_option
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error, for_people, redacted_consoles, say, warning
from .progress import Progress

DEFAULT_SEED = 17


@click.command("probe")
@click_options(*(PROBE_TIMEOUT if option is TIMEOUT else option for option in TARGET_OPTIONS))
@click_options(PROBE_AGAINST)
@click.option("--record", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Also keep the target's answers in DIR, to compare other targets with later (--against DIR).")
@click.option("--count", type=click.IntRange(min=1), help="Send this many probes, chosen by --seed (default: all).")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True,
              help="Chooses the probes --count keeps (the same ones every time).")
@click.option("--defect", "defects", multiple=True, type=click.Choice(DEFECTS),
              help="Only probes with this kind of defect (repeatable).")
@click.option("--field", "fields", multiple=True, metavar="PREFIX",
              help="Only probes on fields that start with PREFIX, e.g. tools or 'GET /v1/responses' (repeatable).")
@click_options(PROBE_JOBS, PROBE_SHARD)
@click.option("--list", "list_only", is_flag=True, help="Print the selected probes (id, field) and send nothing.")
@json_option("Print the comparison as one JSON object on standard output (command, target, against, selection, "
             "probes, diverging, expected_from, groups, divergences, fields: probes and diverging per field "
             "family, skipped; with --shard, the part's fields `parity merge` reads); everything for people, "
             "the progress too, goes to standard error.")
@click.option("--report", type=click.Path(path_type=Path, dir_okay=False), metavar="PATH",
              help="Write the comparison as a Markdown report.")
def probe_command(*, against: str, record: Path | None, count: int | None, seed: int, defects: tuple[str, ...],
                  fields: tuple[str, ...], jobs: int, shard: str | None, list_only: bool, as_json: bool,
                  report: Path | None, **target: object) -> None:
    """Send generated request probes (each a valid request with one defect: a missing, mistyped,
    out-of-range, unknown or oversized value, conflicting parameters, a bad id) to --target and
    to --against, and report where their answers differ: status class, error envelope, type,
    code and param, grouped per field. Exits 1 when any probe's answers differ. With --shard
    I/N (and --json), only a part of them: `parity merge` puts the parts' documents together."""
    try:
        options = target_options(target)
    except OptionError as problem:
        raise click.UsageError(f"--{problem.option.name}: {problem.problem}") from problem
    generated = all_probes(DEFAULT_MODEL, BASE_INPUT)
    matching = tuple(probe for probe in generated if (not defects or probe.defect in defects)
                     and (not fields or probe.field.startswith(fields)))
    if not matching:
        raise click.UsageError("no probe matches --defect and --field")
    selected = select(matching, seed, count)
    selection = f"{len(selected)} of {len(generated)} generated" + (f", chosen by seed {seed}" if count else "")
    probes, part = selected, _shard(selected, shard)
    if part is not None:
        probes = part[1]
        if not as_json and not list_only:
            raise click.UsageError("--shard: give --json too: its document is the part `parity merge` puts together")
    if list_only:
        for probe in probes:
            say(f"{probe.id}  {probe.field}")
        return
    if options.target == REFERENCE and against == REFERENCE:
        warning("--target reference compared with --against reference compares the reference gateway with itself: "
                "give --against a folder of OpenAI's recorded answers (--record DIR on --target openai), or "
                "--target your gateway")
    tell = for_people(as_json)
    with redacted_consoles() as redactor:
        command = "parity " + shlex.join(sys.argv[1:])  # its secrets are removed where it is written
        shown = selection if part is None else f"{selection}; shard {part[0]}"
        settle()
        try:
            with Progress() as sending:
                comparison = run_probes(options, against, probes, jobs=jobs, redactor=redactor, record=record,
                                        say=tell, progress=sending.update)
        except HarnessError as problem:
            error(str(problem))
            sys.exit(EXIT_USAGE)
        for line in console_lines(comparison, shown):
            tell(line)
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            redactor.write_text(report, markdown(comparison, shown, command))
            tell(f"wrote {report}")
        if as_json:
            whole = {} if part is None else part_fields(comparison, part[0], selected, selection,
                                                        "parity " + shlex.join(_unsplit(sys.argv[1:])))
            click.echo(json.dumps(redactor.redact(document(comparison, shown, command) | whole), indent=2))
    sys.exit(EXIT_FAILED if comparison.divergences else EXIT_OK)


def _shard(probes: list[Probe], text: str | None) -> tuple[Shard, list[Probe]] | None:
    """The shard `--shard` names and its probes, dealt one by one by id; None when none is named."""
    try:
        return shard_part(probes, text, None, group=lambda probe: probe.id)
    except OptionError as problem:
        raise click.BadParameter(problem.problem, param_hint="--shard") from problem


def _unsplit(words: list[str]) -> list[str]:
    """A shard's command line without its `--shard I/N`: the whole run's."""
    kept: list[str] = []
    for word in words:
        if kept[-1:] == ["--shard"]:
            kept.pop()
        elif not word.startswith("--shard="):
            kept.append(word)
    return kept
