"""`parity merge`: what a command split over machines with `--shard I/N` wrote on each, put back
together as one machine would have written it: the shards of a run (`report/merge.py`), of a
matrix, also one run as a job matrix of gateway x shard (`report/matrix_merge.py`), or of a probe
run (`probe/parts.py`). Which they are, their documents say."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from ...openai_contract.documents import DocumentError, read_json
from ..options import REPORT_DIR
from ..report.documents import tally_line, write_document_reports
from ..report.junit import write_junit
from ..engine.shards import MergeError
from ..report.merge import merge
from ..wire.redaction import Redactor
from .click_options import click_options
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, out, say

PART_FILES = ("results.json", "matrix.json")
"""The part a folder holds: a run's report folder, or the folder a matrix was written to."""
RUN, MATRIX, PROBES = "a run", "a matrix", "a probe run"

Part = tuple[Path, Any]


@click.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click_options(REPORT_DIR)
@click.option("--junitxml", type=click.Path(path_type=Path), default=None,
              help="Also write the merged run as JUnit XML here, shaped as pytest writes it (a run's parts).")
def merge_command(parts: tuple[Path, ...], report_dir: Path, junitxml: Path | None) -> None:
    """Put the parts of a split run, matrix or probe run back together: PARTS are what each
    `--shard I/N` wrote, all N of them: the report folders (or results.json files) of `parity
    run`, the folders of `parity matrix`'s matrix.md (or their matrix.json; of a job matrix of
    gateway x shard, every gateway's), the --json documents of `parity probe`.

    Writes to --report-dir what the command unsplit writes: a run's results.json, report.md,
    report.html, failing exchanges and, with --junitxml, JUnit XML; a matrix's matrix.md,
    matrix.html and matrix.json, its targets' report folders in matrix/ (the targets in the order
    the parts first name them); a probe run's probe.md (its --report) and probe.json (its
    --json). Exits as that command does, and 2 when the parts do not make one whole."""
    documents = [_read(given) for given in parts]
    kind = _kind(documents[0][1])
    if other := next(((path, _kind(document)) for path, document in documents if _kind(document) != kind), None):
        raise click.UsageError(f"{documents[0][0]} is a part of {kind} and {other[0]} of {other[1]}: merge the parts "
                               "of one at a time")
    if junitxml is not None and kind != RUN:
        raise click.UsageError(f"--junitxml: the parts are of {kind}, which has no JUnit XML; only a run's have")
    if kind == MATRIX:
        _merge_matrix(documents, report_dir)
    elif kind == PROBES:
        _merge_probes(documents, report_dir)
    else:
        _merge_run(documents, report_dir, junitxml)


def _read(given: Path) -> Part:
    """A part's file (a folder's `PART_FILES`) and its document; a usage error when there is none."""
    path = given
    if given.is_dir():
        found = [name for name in PART_FILES if (given / name).is_file()]
        if len(found) != 1:
            holds = " and ".join(found) if found else "no " + " or ".join(PART_FILES)
            raise click.BadParameter(f"{given} holds {holds}: name the file to merge", param_hint="PARTS")
        path = given / found[0]
    try:
        return path, read_json(path)
    except (OSError, DocumentError) as problem:
        raise click.BadParameter(f"{path}: {problem}", param_hint="PARTS") from problem


def _kind(document: Any) -> str:
    """Whose part a document is (what each checks of its own is checked when it is merged)."""
    if isinstance(document, dict) and "targets" in document:
        return MATRIX
    return PROBES if isinstance(document, dict) and "against" in document else RUN


def _write_run(folder: Path, document: dict[str, Any], shards: Sequence[Path], redactor: Redactor) -> None:
    """A merged run's report folder, with the failing exchanges its shards' report folders keep."""
    exchanges = write_document_reports(folder, document, redactor)
    for shard in shards:
        for exchange in (shard / "exchanges").glob("*.json"):
            shutil.copyfile(exchange, exchanges / exchange.name)


def _merge_run(documents: list[Part], report_dir: Path, junitxml: Path | None) -> NoReturn:
    try:
        document = merge([(str(path), part) for path, part in documents])
    except MergeError as problem:
        raise click.UsageError(str(problem)) from problem
    redactor = Redactor()
    _write_run(report_dir, document, [path.parent for path, _ in documents], redactor)
    if junitxml is not None:
        write_junit(junitxml, document, redactor)
    summary = document["summary"]
    out.print(f"{tally_line(summary)}; merged {len(documents)} shard(s): {report_dir / 'report.md'}")
    if summary["could_not_run"] or summary["file_errors"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if summary["fail"] else EXIT_OK)


def _merge_matrix(documents: list[Part], report_dir: Path) -> NoReturn:
    """The matrix as `parity matrix --output <report_dir>/matrix.md --report-dir <report_dir>/matrix` writes it."""
    from ..report.matrix import build_matrix
    from ..report.matrix_merge import merge_matrix
    from .executing import finish_matrix
    from .running import matrix_command_line

    try:
        merged = merge_matrix(documents)
    except MergeError as problem:
        raise click.UsageError(str(problem)) from problem
    redactor = Redactor()
    output, folders = report_dir / "matrix.md", report_dir / "matrix"
    for target in merged.targets:
        if target.run.document is not None:
            target.run.report_dir = folders / target.run.name
            _write_run(target.run.report_dir, target.run.document, target.folders, redactor)
    runs = [target.run for target in merged.targets]
    out.print(f"merged {len(documents)} shard(s) of a matrix of {len(runs)} target(s)", markup=False)
    finish_matrix(build_matrix(runs, matrix_command_line([run.target for run in runs], merged.selection, output,
                                                         folders)),
                  output, redactor, file_errors=any(run.document["file_errors"] for run in runs if run.document))


def _merge_probes(documents: list[Part], report_dir: Path) -> NoReturn:
    """The probe run's report and document as `--report <report_dir>/probe.md` and `--json` write them."""
    from ..probe.parts import merge_parts
    from ..probe.report import console_lines, document, markdown

    try:
        merged = merge_parts([(str(path), part) for path, part in documents])
    except MergeError as problem:
        raise click.UsageError(str(problem)) from problem
    comparison = merged.comparison
    redactor = Redactor()
    report_dir.mkdir(parents=True, exist_ok=True)
    redactor.write_text(report_dir / "probe.md", markdown(comparison, merged.selection, merged.command))
    redactor.write_json(report_dir / "probe.json", document(comparison, merged.selection, merged.command))
    for line in console_lines(comparison, merged.selection):
        say(line)
    say(f"merged {len(documents)} shard(s): {report_dir / 'probe.md'} and {report_dir / 'probe.json'}")
    sys.exit(EXIT_FAILED if comparison.divergences else EXIT_OK)
