"""Citations: the model's text, with what it cites of this response's searches, as OpenAI's
annotated `output_text`.

The hosted tools tell the model how to cite (`hosted_tools.py`): a web page as a markdown link
`[title](url)`, a file with Llama Stack's marker `<|file-ID|>`. `annotate` reads them back:

- a markdown link whose URL is one of the response's web results stays in the text and becomes
  `url_citation {start_index, end_index, title, url}` spanning the link, and the parentheses
  around it when it stands in them, as OpenAI cites `([domain](url))` (`title` is the result's);
- a marker naming one of the response's file results is removed and becomes `file_citation
  {file_id, filename, index}`, `index` being where it stood in the cleaned text (OpenAI: 30 in
  "The capital of France is Paris.", just before the period). Markers naming other files, and
  links to pages no search found, are left as the model wrote them.

Annotations are in the order their citation ends in the text. `StreamingCitations` does the
same delta by delta: once a search found something, it holds back what could still become a
marker, so no marker (or part of one) reaches a delta, and reports each annotation as soon as
its citation is complete, before the text that follows the citation (OpenAI streams
`annotation.added` there, between deltas).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_LINK = re.compile(r"(?P<open>\()?\[(?P<text>[^\[\]\n]*)\]\((?P<url>[^()\s]+)\)(?(open)\))")
"""A markdown link, with the parentheses around it when it has both (OpenAI's citation of
`([domain](url))` spans them: recorded)."""
_OPEN_LINK_END = re.compile(r"\(\[[^\[\]\n]*\]\([^()\s]+\)$")
"""A text end that is a link after an opening parenthesis: its citation grows by the closing
one if that comes next."""
_MARKER = re.compile(r"<\|(?P<file_id>file-[A-Za-z0-9_-]+)\|>")
_MARKER_START = re.compile(r"<(?:\|(?:f(?:i(?:l(?:e(?:-[A-Za-z0-9_-]*\|?)?)?)?)?)?)?$")
"""A text end that may still grow into a marker."""


@dataclass
class Citable:
    """What this response's searches found: web pages by URL (their titles), files by id (their
    names)."""

    pages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def learn(self, web: bool, results: Iterable[dict[str, Any]]) -> None:
        """Add a search's results: web pages (`url`, `title`), or file results (`file_id`, `filename`)."""
        if web:
            self.pages.update((page["url"], page["title"]) for page in results)
        else:
            self.files.update((result["file_id"], result["filename"]) for result in results)

    def __bool__(self) -> bool:
        """Whether anything can be cited: without it a text is shown as the model wrote it."""
        return bool(self.pages or self.files)


def annotate(text: str, citable: Citable) -> tuple[str, list[dict[str, Any]]]:
    """The text without file markers, and its annotations in OpenAI's Responses shapes."""
    if not citable:
        return text, []
    markers = [m for m in _MARKER.finditer(text) if m["file_id"] in citable.files]
    removed_before = _removal_offsets(markers)
    found: list[tuple[int, dict[str, Any]]] = []
    for marker in markers:
        index = marker.start() - removed_before(marker.start())
        found.append((marker.end(), {"type": "file_citation", "file_id": marker["file_id"],
                                     "filename": citable.files[marker["file_id"]], "index": index}))
    for link in _LINK.finditer(text):
        if link["url"] in citable.pages:
            start, end = link.start() - removed_before(link.start()), link.end() - removed_before(link.end())
            found.append((link.end(), {"type": "url_citation", "end_index": end, "start_index": start,
                                       "title": citable.pages[link["url"]], "url": link["url"]}))
    cleaned = text
    for marker in reversed(markers):
        cleaned = cleaned[:marker.start()] + cleaned[marker.end():]
    return cleaned, [annotation for _, annotation in sorted(found, key=lambda pair: pair[0])]


def _removal_offsets(markers: list[re.Match[str]]) -> Any:
    def removed_before(position: int) -> int:
        return sum(m.end() - m.start() for m in markers if m.end() <= position)
    return removed_before


Piece = tuple[str, list[dict[str, Any]]]
"""Cleaned text to show, then the annotations whose citations end where it ends."""


def cited_end(annotation: dict[str, Any]) -> int:
    """Where an annotation's citation ends in the cleaned text."""
    return annotation["end_index"] if annotation["type"] == "url_citation" else annotation["index"]


class StreamingCitations:
    """`annotate` applied to a text that arrives in deltas: `feed` returns what to show now,
    as pieces of cleaned text each followed by the annotations completed where it ends (so an
    annotation comes before the text after its citation, even within one delta); `finish`
    what was held back. The pieces add up to `annotate(text)`: its text and its annotations.

    No citation spans a line break (neither a marker nor a link may hold one), so the lines
    before the current one are settled for good: each delta reads only the current line."""

    def __init__(self, citable: Citable) -> None:
        self._citable = citable
        self._raw = ""
        """The raw text of the current line."""
        self._lines: list[str] = []
        """The cleaned text of the lines before it."""
        self._before = 0
        """Their length."""
        self._current = ""
        """The cleaned text shown of the current line."""
        self._annotated = 0
        """How many of the current line's annotations were reported."""

    @property
    def fed(self) -> bool:
        """Whether any text came."""
        return bool(self._lines or self._raw)

    @property
    def shown(self) -> str:
        """The cleaned text shown so far."""
        return "".join(self._lines) + self._current

    def feed(self, delta: str) -> list[Piece]:
        """What to show now; with nothing citable, all of it (no marker can be removed, no link
        cited)."""
        self._raw += delta
        if not self._citable:
            return self._advance(len(self._raw))
        held = _MARKER_START.search(self._raw)
        settled = held.start() if held else len(self._raw)
        # A link after "(" is not cited before the next character says whether ")" closes it:
        # its last character waits (it was never shown, as it ended the text until now).
        return self._advance(settled - 1 if _OPEN_LINK_END.search(self._raw, 0, settled) else settled)

    def finish(self) -> list[Piece]:
        return self._advance(len(self._raw))

    def _advance(self, settled: int) -> list[Piece]:
        """Show the current line's raw text up to `settled`; a line that ended is settled."""
        cleaned, annotations = annotate(self._raw[:settled], self._citable)
        pieces: list[Piece] = []
        start = len(self._current)
        for annotation in annotations[self._annotated:]:
            end = max(start, cited_end(annotation))
            pieces.append((cleaned[start:end], [_shifted(annotation, self._before)]))
            start = end
        pieces.append((cleaned[start:], []))
        self._current, self._annotated = cleaned, len(annotations)
        if (line_break := self._raw.rfind("\n", 0, settled)) >= 0:
            done = cleaned.rfind("\n") + 1  # removing markers removed no line break
            self._lines.append(cleaned[:done])
            self._before += done
            self._raw, self._current = self._raw[line_break + 1:], cleaned[done:]
            self._annotated = len(annotate(self._raw[:settled - line_break - 1], self._citable)[1])
        return pieces


def _shifted(annotation: dict[str, Any], by: int) -> dict[str, Any]:
    """An annotation of a line, placed in the whole text whose lines before it are `by` long."""
    if annotation["type"] == "url_citation":
        return annotation | {"start_index": annotation["start_index"] + by, "end_index": annotation["end_index"] + by}
    return annotation | {"index": annotation["index"] + by}
