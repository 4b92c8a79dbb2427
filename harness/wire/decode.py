"""Reading a target's bytes as they are meant to be: UTF-8, JSON as specified, bounded.

`read_json` reads strictly and bounded as the reference gateway reads a request
(`openai_contract.strict_json`: no `NaN`, no number too large for a double, no lone surrogate,
at most `MAX_DEPTH` levels), and `read_utf8` decodes strictly, so a malformed answer is a
`Defect` of the target, reported as a finding, never an error of the harness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...openai_contract.strict_json import NotStrictJson, loads

_DATA_LINE = re.compile(r"^data", re.MULTILINE)


@dataclass(frozen=True)
class Defect:
    """What is wrong with the bytes of an answer; `rule` names the aspect (encoding, json,
    number, depth, content_type, framing). The readers of one value (`read_json`,
    `read_utf8`) say what is wrong without a subject ("is not JSON (...)"); `of` gives it one
    ("the body", "event 3"), as an exchange's defects have."""

    rule: str
    message: str

    def of(self, subject: str) -> Defect:
        """The defect said of `subject` ("the body"), from a message that names none."""
        return Defect(self.rule, f"{subject} {self.message}")

    def to_file(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}

    @classmethod
    def from_file(cls, data: dict[str, str]) -> Defect:
        return cls(data["rule"], data["message"])


class Unreadable(ValueError):
    """Text that is not the JSON it should be; `defect` says why."""

    def __init__(self, defect: Defect) -> None:
        super().__init__(defect.message)
        self.defect = defect


def read_json(text: str) -> Any:
    """The JSON value of `text`; `Unreadable` when it is not strict JSON (`strict_json.loads`),
    its defect saying what is wrong and where, of no subject ("is not JSON (...)")."""
    try:
        return loads(text)
    except NotStrictJson as problem:
        raise Unreadable(Defect(problem.rule, problem.message)) from None


def read_utf8(raw: bytes, cut_short: bool = False) -> tuple[str, Defect | None]:
    """The text of `raw`, with U+FFFD where it is not UTF-8, and the defect when it is not.
    `cut_short`: the capture stopped mid-answer, so a character cut at the very end is no defect."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as error:
        text = raw.decode("utf-8", errors="replace")
        if cut_short and error.reason == "unexpected end of data" and error.end == len(raw):
            return text, None
        return text, Defect("encoding", f"is not UTF-8: byte 0x{raw[error.start]:02x} at offset {error.start} "
                                        f"({error.reason})")


def _is_json_media_type(content_type: str | None) -> bool:
    media_type = (content_type or "").split(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def read_body(raw: bytes, content_type: str | None, cut_short: bool = False) -> tuple[Any, list[Defect]]:
    """A body that is not an event stream: its JSON value, else its text, and its defects. A
    body labelled or looking like JSON must be JSON; a JSON body must say so in its
    content-type. A JSON `null` stays the text `null`, so it is not taken for a body that was
    never captured; a body cut short stays text."""
    text, encoding = read_utf8(raw, cut_short)
    defects = [encoding.of("the body")] if encoding else []
    if cut_short or not text.strip():
        return text, defects
    try:
        value = read_json(text)
    except Unreadable as unreadable:
        if _is_json_media_type(content_type) or not content_type or text.lstrip()[:1] in ("{", "["):
            defect = unreadable.defect.of("the body")
            defects.append(Defect(defect.rule, f"{defect.message}; it begins {text[:60]!r}")
                           if defect.rule == "json" else defect)
        return text, defects
    if not _is_json_media_type(content_type):
        label = f"its content-type is {content_type}" if content_type else "it has no content-type"
        defects.append(Defect("content_type", f"the body is JSON, but {label}"))
    return (text if value is None else value), defects


def read_stream(raw: bytes, cut_short: bool = False) -> tuple[str, list[Defect]]:
    """A `text/event-stream` body: its text and its defects (not UTF-8; no event at all; a
    last event never ended by a blank line, which a client drops). Each event's JSON is read
    with the stream's events (`sse.parse_sse`)."""
    text, encoding = read_utf8(raw, cut_short)
    defects = [encoding.of("the stream")] if encoding else []
    if not text.strip() or cut_short:
        return text, defects
    if not _DATA_LINE.search(text):
        defects.append(Defect("content_type", f"the body is labelled text/event-stream but holds no event; "
                                              f"it begins {text[:60]!r}"))
    elif not text.endswith(("\n\n", "\r\n\r\n", "\r\r")):
        defects.append(Defect("framing", "the stream ends inside an event: its last line is not followed by a "
                                         "blank line, so a client never sees that event"))
    return text, defects
