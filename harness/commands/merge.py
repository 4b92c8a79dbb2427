"""`parity merge`: the report of a run split over machines (`parity run --shard I/N`), from
its shards' report folders, as one machine would have written it (`report/merge.py`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from ...openai_contract.documents import DocumentError, read_json
from ..options import REPORT_DIR
from ..report.documents import tally_line, write_document_reports
from ..report.junit import write_junit
from ..report.merge import MergeError, merge
from ..wire.redaction import Redactor
from .click_options import click_options
from .console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, out


@click.command("merge")
@click.argument("shards", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click_options(REPORT_DIR)
@click.option("--junitxml", type=click.Path(path_type=Path), default=None,
              help="Also write the merged run as JUnit XML here, shaped as pytest writes it.")
def merge_command(shards: tuple[Path, ...], report_dir: Path, junitxml: Path | None) -> None:
    """Put the shards of a run back together: SHARDS are the report folders (or results.json
    files) that `parity run --shard I/N` wrote, all N of them; writes results.json, report.md,
    report.html, the failing exchanges and, with --junitxml, JUnit XML to --report-dir. Exit 1
    if a scenario run failed, 2 if the shards do not make one run or something could not run."""
    documents = []
    for given in shards:
        path = given / "results.json" if given.is_dir() else given
        try:
            documents.append((str(path), read_json(path)))
        except (OSError, DocumentError) as problem:
            raise click.BadParameter(f"{path}: {problem}", param_hint="SHARDS") from problem
    try:
        document = merge(documents)
    except MergeError as problem:
        raise click.UsageError(str(problem)) from problem
    redactor = Redactor()
    exchanges = write_document_reports(report_dir, document, redactor)
    for path, _ in documents:
        for exchange in (Path(path).parent / "exchanges").glob("*.json"):
            shutil.copyfile(exchange, exchanges / exchange.name)
    if junitxml is not None:
        write_junit(junitxml, document, redactor)
    summary = document["summary"]
    out.print(f"{tally_line(summary)}; merged {len(documents)} shard(s): {report_dir / 'report.md'}")
    if summary["could_not_run"] or summary["file_errors"]:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FAILED if summary["fail"] else EXIT_OK)
