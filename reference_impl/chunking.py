"""Cutting a file's text into the chunks a vector store indexes, a piece of the text at a time.

A word stands for a token (a run of non-space characters): a chunk is at most `size` words, and
consecutive chunks share `overlap` words; a chunk's text is the file's text from its first word
to its last. The words are found by the regular expression engine a chunk at a time (a pattern
that takes `size` words at once), so a file costs Python a few calls per chunk, never one per
word, and only the text of about one piece and one chunk is held at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache


_SPACE = re.compile(r"\s*+")


@cache
def _patterns(size: int, step: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A chunk of up to `size` words with the start of the word after it (if there is one), and
    `step` words with the space after them. Quantifiers are possessive: a run of characters is
    read once, never given back and read again."""
    return (re.compile(rf"(\S++(?:\s++\S++){{0,{size - 1}}})(\s++\S)?"), re.compile(rf"(?:\S++\s++){{{step}}}"))


def text_chunks(pieces: Iterable[str], size: int, overlap: int) -> Iterator[str]:
    """The chunks of the text `pieces` make up, in order: one starts at every `size - overlap`-th
    word, and the last is the first to reach the text's last word. When the text held does not
    show where the next chunk ends, pieces are added until it has doubled before it is looked at
    again, so a text with few spaces is not scanned over and over."""
    window, skip = _patterns(size, size - overlap)
    pending, buffer, at, more, tried = iter(pieces), "", 0, True, 0
    while True:
        at = _SPACE.match(buffer, at).end()  # type: ignore[union-attr]
        left = len(buffer) - at
        if not more or left >= 2 * tried:
            chunk = window.match(buffer, at)
            if chunk is not None and chunk.group(2):  # a word follows: `size` words, and not the last chunk
                yield chunk.group(1)
                at, tried = skip.match(buffer, at).end(), 0  # type: ignore[union-attr]
                continue
            if not more:
                if chunk is not None:
                    yield chunk.group(1)
                return
            tried = left
        piece = next(pending, None)
        more = piece is not None
        buffer, at = buffer[at:] + (piece or ""), 0


def chunks(text: str, size: int, overlap: int) -> list[str]:
    """`text` cut into chunks (see the module docstring)."""
    return list(text_chunks([text], size, overlap))
