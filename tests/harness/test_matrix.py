"""The cross-gateway matrix, built from real runs: the embedded reference gateway, the same
gateway started from a profile in a child process, and a target that cannot run at all."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_pages import ReportPage

from responses_parity.harness.engine.profile import find_profile
from responses_parity.harness.engine.session import TargetOptions
from responses_parity.harness.model.findings import Kind
from responses_parity.harness.report.matrix import (Cell, TargetRun, build_matrix, describe_target, latency_of,
                                                    render_matrix, run_matrix, summary_of, write_matrix)
from responses_parity.harness.scenario.capabilities import HOSTED_TOOLS
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.loader import units_of

PROFILE = Path(__file__).parent / "profiles" / "reference-process.yaml"
CLAIM = "OpenAI ends this one incomplete (a claim this test makes up, so that every target diverges)"


def _wrong_scenario(folder: Path) -> Path:
    """text-basic with an expectation no gateway meets, and evidence the matrix must cite."""
    text = (builtin_scenarios_dir() / "text-basic.yaml").read_text()
    text = text.replace("id: text-basic", "id: text-made-up").replace("status: completed\n      usage",
                                                                        "status: incomplete\n      usage")
    start = text.index("  note: >-")
    end = text.index("live:")
    text = text[:start] + f"  note: {CLAIM}\n" + text[end:]
    (folder / "text-made-up.yaml").write_text(text)
    return folder


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.classes: list[str] = []
        self._in_matrix = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "table":
            self._in_matrix = values.get("id") == "matrix"
        elif tag == "td" and self._in_matrix and values.get("class"):
            self.classes.append(values["class"] or "")


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("matrix")
    scenarios = load([builtin_scenarios_dir(), _wrong_scenario(root)])
    units = units_of(scenarios.select(("text-basic", "mcp-call", "background-poll", "text-made-up"), ()),
                     ("nonstream", "stream"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PARITY_CACHE_DIR", str(root / "cache"))
        runs = run_matrix(["reference", str(PROFILE), "no-such-gateway"], units, TargetOptions(timeout_s=20),
                          root / "reports", jobs=2)
    matrix = build_matrix(runs, "parity matrix --targets reference,reference-process.yaml,no-such-gateway")
    html = write_matrix(matrix, root / "matrix.md")
    return matrix, (root / "matrix.md").read_text(), html.read_text(), root


def test_each_target_gets_a_cell_per_scenario_and_mode(matrix_run) -> None:
    matrix, _, _, _ = matrix_run
    assert [run.name for run in matrix.runs] == ["reference", "reference-process", "no-such-gateway"]
    assert matrix.modes == ("nonstream", "stream")
    by_scenario = {row.scenario: [cell.status for cell in row.cells] for row in matrix.rows}
    assert by_scenario["text-basic"] == ["pass", "pass", "pass", "pass", "could_not_run", "could_not_run"]
    assert by_scenario["mcp-call"] == ["pass", "pass", "pass", "pass", "could_not_run", "could_not_run"]
    assert by_scenario["background-poll"][2:4] == ["unsupported", "unsupported"]
    assert by_scenario["text-made-up"][:4] == ["divergence"] * 4


def test_a_target_that_cannot_run_is_reported_and_the_rest_still_ran(matrix_run) -> None:
    matrix, markdown, _, root = matrix_run
    failed = matrix.runs[2]
    assert failed.document is None and "unknown target 'no-such-gateway'" in (failed.failure or "")
    assert "unknown target 'no-such-gateway'" in markdown
    assert (root / "reports" / "reference-process" / "report.md").exists()


def test_divergences_cite_what_openai_does(matrix_run) -> None:
    _, markdown, _, _ = matrix_run
    section = markdown[markdown.index("## Divergences, with what OpenAI does"):]
    assert "### text-made-up" in section and f"OpenAI: {CLAIM}" in section
    assert "- **reference** [nonstream]" in section and "- **reference-process** [stream]" in section
    assert "status is 'completed', expected 'incomplete'" in section


def test_the_summary_says_what_each_gets_right_and_wrong(matrix_run) -> None:
    matrix, markdown, _, _ = matrix_run
    summary = matrix.summaries()["reference-process"]
    assert summary.right == ["mcp-call", "text-basic"]
    assert summary.wrong and summary.wrong[0].runs == 2 and summary.wrong[0].rule == "expect.status"
    assert summary.aspect_runs == {"statuses (HTTP, and the Response's own)": 2}
    assert "output items" in summary.clean_aspects and "Response fields" in summary.clean_aspects
    assert "Lacks `background`" in markdown
    assert "Workarounds its profile applies: It is started by `parity serve reference`" in markdown


class _Table(HTMLParser):
    """The body rows of one table of a page (by its id): per row, each cell's text and link."""

    def __init__(self, html: str, table_id: str) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str | None]]] = []
        self._id, self._in_table, self._in_body = table_id, False, False
        self._cell: list[str] | None = None
        self._link: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "table":
            self._in_table = values.get("id") == self._id
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self.rows.append([])
        elif self._in_body and tag in ("td", "th"):
            self._cell, self._link = [], None
        elif tag == "a" and self._cell is not None:
            self._link = values.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append((" ".join("".join(self._cell).split()), self._link))
            self._cell = None
        elif tag == "table":
            self._in_table = self._in_body = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_what_each_gets_wrong_is_a_table_by_aspect_with_counts(matrix_run) -> None:
    _, _, html, _ = matrix_run
    section = html[html.index('id="right-and-wrong"'):html.index("<h2>Matrix</h2>")]
    for name in ("reference", "reference-process"):
        assert _Table(section, f"diverges-{name}").rows == [
            [("statuses (HTTP, and the Response's own)", None), ("2", None),
             ("status is 'completed', expected 'incomplete' expect.status", None), ("2", None),
             ("text-made-up [nonstream]", f"reports/{name}/report.html#unit-text-made-up-nonstream")]]
    folded = re.compile(r'<details class="right">.*?</details>', re.DOTALL)
    assert [("mcp-call, text-basic" in right) for right in folded.findall(section)] == [True, True]
    assert "mcp-call" not in folded.sub("", section)  # the passing scenarios' ids are folded away
    assert 'id="diverges-no-such-gateway"' not in section


def test_an_error_answer_counts_once_not_as_what_it_caused() -> None:
    def finding(kind: str, rule: str, message: str, consequence: bool) -> dict[str, Any]:
        return {"kind": kind, "rule": rule, "message": message, "severity": "error", "known": False,
                "consequence": consequence}

    cause = finding("status", "answer.error", 'the gateway answered HTTP 400 "no"', False)
    caused = finding("upstream_request", "expect.upstream.searches", "the gateway searched for []", True)
    document = {"summary": {"parity": {"pass": 0, "runs": 2}}, "results": [
        {"scenario": "s", "mode": mode, "outcome": "fail", "openai_counterpart": True,
         "steps": [{"findings": [cause, caused]}]} for mode in ("nonstream", "stream")]}
    summary = summary_of(document)
    assert summary.aspect_runs == {Kind.STATUS.aspect: 2}
    assert [(group.aspect, group.runs, [d.rule for d in group.divergences]) for group in summary.by_aspect] == [
        (Kind.STATUS.aspect, 2, ["answer.error"])]


def test_latency_is_measured_per_step_against_the_model_alone(matrix_run) -> None:
    matrix, markdown, _, _ = matrix_run
    for run in matrix.runs[:2]:
        latency = latency_of(run.document)
        assert latency is not None and latency.steps >= 6  # text-basic, mcp-call, text-made-up: both modes
        assert 0 < latency.upstream_median_ms < latency.gateway_median_ms
        assert latency.added_median_ms <= latency.added_p95_ms
    assert "| reference-process |" in markdown[markdown.index("## Latency"):]


def test_the_html_matrix_has_the_same_cells(matrix_run) -> None:
    matrix, _, html, _ = matrix_run
    parser = _Cells()
    parser.feed(html)
    assert parser.classes == [cell.status for row in matrix.rows for cell in row.cells]


def test_the_per_start_secret_reaches_no_report(matrix_run) -> None:
    _, markdown, html, root = matrix_run
    reports = [markdown, html, *(path.read_text() for path in (root / "reports").rglob("*") if path.is_file())]
    assert len(reports) > 4 and not any("sk-parity-" in text for text in reports)


def _resolves(link: str, page: Path) -> bool:
    """Whether a relative link from `page` reaches a file that exists and, with a fragment,
    an element (or a Markdown anchor) of that id in it."""
    target, _, fragment = link.partition("#")
    path = (page.parent / target).resolve() if target else page
    if not path.is_file():
        return False
    return not fragment or f'id="{fragment}"' in path.read_text()


def test_every_link_of_the_matrix_resolves(matrix_run) -> None:
    matrix, markdown, html, root = matrix_run
    page = ReportPage(html)
    markdown_links = re.findall(r"\]\(([^)]+)\)", markdown)
    assert not [link for link in page.links if not _resolves(link, root / "matrix.html")]
    assert not [link for link in markdown_links if not _resolves(link, root / "matrix.md")]
    places = [(run.name, mode) for run in matrix.runs for mode in matrix.modes]
    cells = {(row.scenario, *place): link for row in matrix.rows
             for place, (_, link) in zip(places, page.matrix[row.scenario], strict=True)}
    assert cells[("text-made-up", "reference-process", "stream")] == \
        "reports/reference-process/report.html#unit-text-made-up-stream"
    assert cells[("text-basic", "reference", "nonstream")] == "reports/reference/report.html#unit-text-basic-nonstream"
    assert cells[("text-basic", "no-such-gateway", "stream")] == "#target-no-such-gateway"
    assert all(cells.values())
    assert "reports/reference-process/report.md#unit-text-made-up-stream" in markdown_links
    assert "reports/reference/report.md" in markdown_links


def test_the_html_matrix_draws_the_latency_of_each_gateway(matrix_run) -> None:
    _, _, html, _ = matrix_run
    chart = html[html.index('<svg class="latency-chart"'):]
    assert [f'data-target="{name}"' in chart for name in ("reference", "reference-process", "no-such-gateway")] == [
        True, True, False]


def test_what_a_gateway_says_is_escaped_in_the_html_matrix() -> None:
    run = TargetRun("hostile", "hostile", failure='<script>alert("x")</script>')
    html = render_matrix(build_matrix([run], "parity matrix"), "html", Path("."))
    assert "<script>" not in html and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_cell_labels_name_the_severity() -> None:
    assert Cell("divergence", errors=3).label == "divergence (3 errors)"
    assert Cell("pass", warnings=1).short == "pass 1w"
    assert Cell("none").short == "-"


class _HostedToolCells(HTMLParser):
    """The hosted-tools table: per row, each cell's text, class and title."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[dict[str, str]]] = []
        self._in_table = self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._in_table = dict(attrs).get("id") == "hosted-tools"
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag == "td":
            self.rows[-1].append({"text": "", "class": dict(attrs).get("class") or "",
                                  "title": dict(attrs).get("title") or ""})
            self._in_cell = True

    def handle_endtag(self, tag: str) -> None:
        self._in_cell = self._in_cell and tag != "td"

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.rows[-1][-1]["text"] += data


def test_the_matrix_shows_which_hosted_tools_each_gateway_runs_from_its_profile() -> None:
    peers = ["smg", "llama-stack", "open-responses-server", "litellm"]
    runs = [describe_target(name) for name in ["reference", *peers, "http://127.0.0.1:9"]]
    for run in runs:
        run.failure = "not run: the table comes from the profiles alone"
    matrix = build_matrix(runs, "parity matrix")
    markdown = render_matrix(matrix, "md", Path("."))
    table = markdown[markdown.index("## Hosted tools"):markdown.index("## What each")]
    parser = _HostedToolCells()
    parser.feed(render_matrix(matrix, "html", Path(".")))
    html_rows = {cells[0]["text"]: cells[1:] for cells in parser.rows if cells}
    for run in runs:
        profile = find_profile(run.name) if run.name in peers else None
        lacks = profile.lacks if profile else {}
        expected = ["unknown (no profile)" if run.name.startswith("http") else "lacks" if tool in lacks else "runs"
                    for tool in HOSTED_TOOLS]
        line = next(line for line in table.splitlines() if line.startswith(f"| **{run.name}** |"))
        assert [cell.strip() for cell in line.split("|")[2:-1]] == expected, run.name
        assert [cell["text"] for cell in html_rows[run.name]] == expected, run.name
        assert [cell["class"] for cell in html_rows[run.name]] == [f"hosted-{text.split()[0]}" for text in expected]
        assert [" ".join(cell["title"].split()) for cell in html_rows[run.name]] == [
            " ".join(lacks.get(tool, "").split()) for tool in HOSTED_TOOLS]
    llama_stack = {hosted.tool: hosted.status for hosted in matrix.runs[2].hosted_tools()}
    assert llama_stack == {"web_search": "lacks", "file_search": "runs"}
    assert all(hosted.status == "lacks" for name in ("smg", "open-responses-server", "litellm")
               for hosted in describe_target(name).hosted_tools())
