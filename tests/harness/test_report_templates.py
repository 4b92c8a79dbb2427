"""The report templates' compiled code is kept in the cache folder (`report/templates.py`): a
report rendered from it is the report compiled afresh, and a cache folder that cannot be
written, or an entry that cannot be read, only makes the render slower."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from responses_parity.harness.cli import main
from responses_parity.harness.report.html import render_html


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("report")
    result = CliRunner().invoke(main, ["run", "-s", "text-basic", "--report-dir", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((folder / "results.json").read_text())


def kept(cache: Path) -> list[Path]:
    return sorted((cache / "templates").glob("*/*.cache"))


def test_a_report_from_the_kept_code_is_the_report_compiled_afresh(document: dict[str, Any], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path))
    compiled = render_html(document)
    assert len(kept(tmp_path)) == 2  # report.html.j2 and the charts it imports
    written = {path: path.stat().st_mtime_ns for path in kept(tmp_path)}
    assert render_html(document) == compiled
    assert {path: path.stat().st_mtime_ns for path in kept(tmp_path)} == written  # read, not compiled again


def test_a_cache_that_cannot_be_written_or_read_only_makes_it_slower(document: dict[str, Any], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "fresh"))
    compiled = render_html(document)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("PARITY_CACHE_DIR", str(not_a_folder))
    assert render_html(document) == compiled
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "fresh"))
    for path in kept(tmp_path / "fresh"):
        path.write_bytes(path.read_bytes()[:40])  # cut short past Jinja2's header
    assert render_html(document) == compiled
