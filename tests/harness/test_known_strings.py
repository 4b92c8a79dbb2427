"""The strings a `KnownStrings` knows are found wherever they occur, however many were added
and in whatever order, while its automatons merge from level to level."""

from __future__ import annotations

import threading

from responses_parity.harness.wire.known_strings import KnownStrings


def _strings(count: int) -> list[str]:
    """`count` distinct strings of one length, none inside another."""
    return [f"secret-{n:05d}-{n * 7919 % 10007:05d}" for n in range(count)]


def test_every_string_added_one_at_a_time_is_found_across_the_levels() -> None:
    strings, known = _strings(3000), KnownStrings()
    for string in strings:
        known.add([string])
    text = "before " + " and ".join(strings[::97]) + " after"
    assert sorted(text[start:end] for start, end in known.spans(text)) == strings[::97]
    assert all(string in known for string in strings)
    assert known.spans("nothing known is here, though this is long enough") == []


def test_overlapping_and_repeated_occurrences_are_all_found() -> None:
    known = KnownStrings(["abcdef", "defghi", "abc"])
    assert sorted(known.spans("abcdefghi abc")) == [(0, 3), (0, 6), (3, 9), (10, 13)]


def test_a_search_meanwhile_another_thread_adds_sees_the_strings_known_before_it() -> None:
    known, strings = KnownStrings(["first-secret"]), _strings(2000)
    adding = threading.Thread(target=lambda: [known.add([string]) for string in strings])
    adding.start()
    while adding.is_alive():
        assert known.spans("the first-secret again") == [(4, 16)]
    adding.join()
    assert known.spans(strings[-1]) == [(0, len(strings[-1]))]


def test_merged_levels_find_what_they_found_before_and_take_new_strings() -> None:
    strings, known = _strings(1500), KnownStrings()
    for string in strings[:1000]:
        known.add([string])
    text = " ".join(strings[:1000:37])
    before = sorted(known.spans(text))
    known.compact()
    assert sorted(known.spans(text)) == before != []
    for string in strings[1000:]:
        known.add([string])
    every = " ".join(strings[::50])
    assert sorted(every[start:end] for start, end in known.spans(every)) == strings[::50]
