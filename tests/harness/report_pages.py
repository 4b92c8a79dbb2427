"""What the tests of the HTML reports share: a scenario that diverges on purpose, and what they
read out of a page (its element ids, its links, the matrix cells, every finding per scenario run
section, and per stream timeline its rows)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

MISSTATED = """\
id: text-misstated
title: A plain text answer, misstated on purpose for the reports' tests
tags: [text]
evidence:
  recordings: [stream-text__langchain__1]
  note: Made up for the tests of the reports; OpenAI completes this one (see text-basic).
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "What is the capital of France?"
    model:
      - text: "The capital of France is Paris."
    expect:
      status: incomplete
      events:
        - response.created
        - response.output_item.added
        - response.content_part.added
        - response.output_text.delta
        - response.output_text.done
        - response.refusal.done
        - response.output_item.done
        - response.completed
"""
"""text-basic with expectations no gateway meets, so that the reports show divergences of both
stream modes: a status (in JSON and streamed answers) and an event sequence with one event left
out (a row only the answer has) and one changed (a row where the two differ). Written where a
test runs it (a scenario file in tests/ would be collected by the pytest plugin)."""


def misstated_scenarios(folder: Path) -> Path:
    """A folder holding the `text-misstated` scenario (`MISSTATED`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "text-misstated.yaml").write_text(MISSTATED)
    return folder


class ReportPage(HTMLParser):
    """`matrix`: scenario -> cells (label, href); `findings`: section id -> the finding lines
    in it; `streams`: (scenario, mode, step) -> rows (tag, reference, actual); `links`: every
    href; `ids`: every element id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.matrix: dict[str, list[tuple[str, str | None]]] = {}
        self.findings: dict[str, list[str]] = {}
        self.streams: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._table: str | None = None
        self._section: str | None = None
        self._stream: tuple[str, str, str] | None = None
        self._row: list[tuple[str, str | None]] | None = None
        self._text: list[str] | None = None
        self._link: str | None = None
        self._in_findings = False
        self.feed(text)

    @classmethod
    def read(cls, path: Path) -> ReportPage:
        return cls(path.read_text())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
            self._link = attributes["href"]
        if tag == "table":
            self._table = attributes.get("id")
        elif tag == "section":
            self._section = attributes["id"]
            self.findings[self._section] = []
        elif tag == "ul" and "findings" in attributes.get("class", "").split():
            self._in_findings = True
        elif tag == "li" and self._in_findings:
            self._text = []
        elif tag == "figure":
            self._stream = (attributes["data-scenario"], attributes["data-mode"], attributes["data-step"])
        elif tag == "g" and self._stream is not None and attributes.get("class", "").startswith("row "):
            row = attributes["class"].split()[1], attributes["data-reference"], attributes["data-actual"]
            self.streams.setdefault(self._stream, []).append(row)
        elif tag == "tr" and self._table == "matrix":
            self._row = []
        elif tag == "td" and self._row is not None:
            self._text, self._link = [], None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = " ".join("".join(self._text or []).split())
        if tag == "td" and self._row is not None and self._text is not None:
            self._row.append((text, self._link))
            self._text = None
        elif tag == "li" and self._in_findings and self._section is not None:
            self.findings[self._section].append(text)
            self._text = None
        elif tag == "ul":
            self._in_findings = False
        elif tag == "tr" and self._row:
            self.matrix[self._row[0][0]] = self._row[1:]
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "figure":
            self._stream = None
        elif tag == "section":
            self._section = None
