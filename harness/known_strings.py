"""A growing set of strings, each found wherever it occurs in a text, at a cost that does not
grow with how many there are: the secrets a run knows, looked for in all it writes
(`redaction.Redactor`).

The strings are found by Aho-Corasick automatons (`pyahocorasick`, in C): one pass over a text
finds every occurrence of every string an automaton holds. An automaton takes no new string
without being rebuilt whole, so the strings are kept in a few automatons of geometrically
growing capacity, as a log-structured merge tree keeps its runs: a new string goes into the
smallest, and one that overflows is merged into the next. Learning a string rebuilds at most
`LEVEL_BASE` others at once, plus `LEVEL_RATIO` others per level on average (the large levels
are rebuilt rarely); a search makes one pass per level in use (a handful for 100,000 strings),
and skips every level whose shortest string is longer than the text.

Searches read an immutable tuple of automatons, so a search in one thread never meets an
automaton another thread is building; `add` holds a lock while it rebuilds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import ahocorasick

LEVEL_BASE = 16
"""How many strings the smallest automaton holds (each new one rebuilds it)."""
LEVEL_RATIO = 8
"""How many times more strings each level holds than the one before."""


@dataclass(frozen=True)
class _Level:
    strings: frozenset[str]
    automaton: ahocorasick.Automaton
    shortest: int

    @classmethod
    def of(cls, strings: frozenset[str]) -> _Level:
        automaton = ahocorasick.Automaton()
        for string in strings:
            automaton.add_word(string, len(string))
        automaton.make_automaton()
        return cls(strings, automaton, min(map(len, strings)))


class KnownStrings:
    """Strings known so far, and where they occur in a text (`spans`)."""

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._levels: tuple[_Level | None, ...] = ()
        self.add(strings)

    def __contains__(self, string: str) -> bool:
        return string in self._known

    def add(self, strings: Iterable[str]) -> None:
        """Know these strings too (the empty string is never looked for)."""
        with self._lock:
            new = frozenset(string for string in strings if string and string not in self._known)
            if not new:
                return
            carried, levels = new, list(self._levels)
            for number in range(len(levels) + 1):
                if number == len(levels):
                    levels.append(None)
                level = levels[number]
                merged = carried | level.strings if level is not None else carried
                if len(merged) <= LEVEL_BASE * LEVEL_RATIO ** number:
                    levels[number] = _Level.of(merged)
                    break
                levels[number], carried = None, merged  # it overflows: all of it goes one level up
            self._known |= new
            self._levels = tuple(levels)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The `(start, end)` of every occurrence in `text` of a known string (they may overlap)."""
        found = []
        for level in self._levels:
            if level is not None and len(text) >= level.shortest:
                found += [(end + 1 - length, end + 1) for end, length in level.automaton.iter(text)]
        return found
