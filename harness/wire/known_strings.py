"""A growing set of strings, each found wherever it occurs in a text, at a cost that does not
grow with how many there are: the secrets a run knows, looked for in all it writes
(`redaction.Redactor`).

The strings are found by Aho-Corasick automatons (`pyahocorasick`, in C): one pass over a text
finds every occurrence of every string an automaton holds. An automaton takes no new string
without being rebuilt whole, so the strings are kept in a few automatons of geometrically
growing capacity, as a log-structured merge tree keeps its runs: a new string goes into the
smallest, and one that overflows is merged into the next. Learning a string rebuilds at most
`LEVEL_BASE` others at once, plus about `LEVEL_RATIO` others per level on average (the large
levels are rebuilt rarely), however many are known.

A search makes one pass per level in use, skipping a level whose shortest string is longer
than the text; a pass costs about the same per character whatever the automaton's size. Once
the passes beyond the first have read `COMPACT_AFTER` times as many characters as the known
strings hold, all levels are merged into one (`compact`, in a thread of its own): a run that
stopped learning soon makes one pass a text, and one that keeps learning never pays much more
for merges than the passes they save would have cost.

Searches read an immutable tuple of automatons, so a search in one thread never meets an
automaton another thread is building; `add` and `compact` hold a lock while they rebuild.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import ahocorasick

LEVEL_BASE = 16
"""How many strings the smallest automaton holds (each new one rebuilds it)."""
LEVEL_RATIO = 8
"""How many times more strings each level holds than the one before."""
COMPACT_AFTER = 16
"""Merge the levels once the passes beyond the first read this many times as many characters
as the known strings hold. A pass reads a character in some 10 ns, a rebuild takes some 40
times that per character it holds: so a run that keeps learning pays for merges at most about
as much as for the passes they save, and one that stopped soon makes one pass a text."""


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
        self._merging = threading.Lock()
        self._known: set[str] = set()
        self._characters = 0
        self._surplus = 0
        """Characters read by passes beyond the first since the levels were last merged."""
        self._levels: tuple[_Level | None, ...] = ()
        self.add(strings)

    def __contains__(self, string: str) -> bool:
        return string in self._known

    def snapshot(self) -> frozenset[str]:
        """Every string known now."""
        with self._lock:
            return frozenset(self._known)

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
                if len(merged) <= _capacity(number):
                    levels[number] = _Level.of(merged)
                    break
                levels[number], carried = None, merged  # it overflows: all of it goes one level up
            self._known |= new
            self._characters += sum(map(len, new))
            self._levels = tuple(levels)

    def compact(self) -> None:
        """Merge every level into one."""
        with self._lock:
            levels = [level for level in self._levels if level is not None]
            if len(levels) > 1:
                merged = frozenset().union(*(level.strings for level in levels))
                number = next(number for number in itertools.count() if len(merged) <= _capacity(number))
                self._levels = (None,) * number + (_Level.of(merged),)
            self._surplus = 0

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The `(start, end)` of every occurrence in `text` of a known string (they may overlap)."""
        levels = [level for level in self._levels if level is not None and len(text) >= level.shortest]
        found = [(end + 1 - length, end + 1) for level in levels for end, length in level.automaton.iter(text)]
        if len(levels) > 1:
            self._surplus += len(text) * (len(levels) - 1)
            if self._surplus > COMPACT_AFTER * self._characters and self._merging.acquire(blocking=False):
                threading.Thread(target=self._compact_in_the_background, name="known-strings-compact",
                                 daemon=True).start()
        return found

    def _compact_in_the_background(self) -> None:
        try:
            self.compact()
        finally:
            self._merging.release()


def _capacity(level: int) -> int:
    return LEVEL_BASE * LEVEL_RATIO ** level
