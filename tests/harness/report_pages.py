"""What the tests of the HTML reports share: scenarios that fail on purpose, and what they read
out of a page (its element ids, its links, the matrix cells, the order of its headings and
scenario runs, every finding per scenario run section, the cause a failing one is led by and the
steps it skipped, which runs are collapsed, and per stream timeline its rows)."""

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
out (a row only the answer has) and one changed (a row where the two differ)."""

CHAIN_REFUSED = """\
id: chain-refused
title: A chain whose first request the gateway refuses, for the reports' tests
tags: [previous_response_id]
evidence:
  recordings: [stream-text__langchain__1]
  note: Made up for the tests of the reports; OpenAI refuses a temperature above 2 too.
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "What is the capital of France?"
      temperature: 7
    model:
      - text: "The capital of France is Paris."
    expect:
      status: completed
      output: [message]
  - id: follow_up
    request:
      model: "{{model}}"
      previous_response_id: "{{ask.response.id}}"
      input: "And of Italy?"
    model:
      - text: "Rome."
    expect:
      status: completed
      output: [message]
"""
"""A two-step chain whose first request every gateway refuses (its own message is the root cause
of what fails after it) and whose second step, which needs the first one's answer, is skipped."""


def scenarios_for_reports(folder: Path) -> Path:
    """A folder holding the scenarios made up for the reports' tests (`MISSTATED`,
    `CHAIN_REFUSED`), written where a test runs them: a scenario file in tests/ would be
    collected by the pytest plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "text-misstated.yaml").write_text(MISSTATED)
    (folder / "chain-refused.yaml").write_text(CHAIN_REFUSED)
    return folder


class ReportPage(HTMLParser):
    """`matrix`: scenario -> cells (label, href); `findings`: scenario run's section id -> the
    finding lines in it; `causes`: the same -> the cause it is led by, for a run that failed;
    `skipped`: the same -> the steps marked skipped; `order`: the ids of the headings and of
    the scenario runs' sections, in the page's order; `collapsed`: the ids of the runs shown
    collapsed (in a `details` element); `streams`: (scenario, mode, step) -> rows
    (tag, reference, actual); `links`: every href; `ids`: every element id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.matrix: dict[str, list[tuple[str, str | None]]] = {}
        self.findings: dict[str, list[str]] = {}
        self.causes: dict[str, str] = {}
        self.skipped: dict[str, list[str]] = {}
        self.order: list[str] = []
        self.collapsed: set[str] = set()
        self.streams: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._table: str | None = None
        self._section: str | None = None
        self._depth = 0
        """How deep in `section`, `details` and `div` elements the parser is (`_section_depth`: where the run's
        section opened)."""
        self._section_depth = 0
        self._fold = False
        """Whether the parser is in a collapsed run (`details.unit`: the run's section is its `div.run`)."""
        self._collecting: str | None = None
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
        classes = attributes.get("class", "").split()
        if tag in ("section", "details", "div"):
            self._depth += 1
            self._fold = self._fold or ("unit" in classes and tag == "details")
        if tag == "h2" and "id" in attributes:
            self.order.append(attributes["id"])
        if tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
            self._link = attributes["href"]
        if tag == "table":
            self._table = attributes.get("id")
        elif (tag == "section" and "unit" in classes) or (tag == "div" and "run" in classes):
            self._section, self._section_depth = attributes["id"], self._depth
            self.findings[self._section] = []
            self.order.append(self._section)
            if self._fold:
                self.collapsed.add(self._section)
        elif tag == "p" and self._section is not None and {"cause", "skipped"} & set(classes):
            self._collecting, self._text = classes[0], []
        elif tag == "ul" and "findings" in classes:
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
        elif tag == "p" and self._collecting is not None and self._section is not None:
            if self._collecting == "cause":
                self.causes[self._section] = text
            else:
                self.skipped.setdefault(self._section, []).append(text)
            self._collecting = self._text = None
        if tag in ("section", "details", "div"):
            if self._depth == self._section_depth:
                self._section = None
            self._fold = self._fold and tag != "details"
            self._depth -= 1
