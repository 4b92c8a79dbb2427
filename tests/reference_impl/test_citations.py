"""Citations read back from the model's text: markdown links to this response's web results
become `url_citation`s spanning the link, `<|file-ID|>` markers of its file results are removed
and become `file_citation`s at their place in the cleaned text; streamed, no marker leaks into
a delta however the text is split, and the deltas and annotations add up to the whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from responses_parity.reference_impl.citations import Citable, StreamingCitations, annotate, cited_end

CITABLE = Citable(pages={"https://example.org/a": "Page A"}, files={"file-abc123": "paris.txt"})
TEXT = ("The capital of France is Paris<|file-abc123|>. More in [A](https://example.org/a). "
        "Also there ([A](https://example.org/a)).")


def test_the_recorded_file_citation_index() -> None:
    cleaned, annotations = annotate("The capital of France is Paris<|file-abc123|>.", CITABLE)
    assert cleaned == "The capital of France is Paris."
    assert annotations == [{"type": "file_citation", "file_id": "file-abc123", "filename": "paris.txt", "index": 30}]


def test_a_link_to_a_result_spans_the_link_in_the_cleaned_text() -> None:
    cleaned, annotations = annotate(TEXT, CITABLE)
    link = "[A](https://example.org/a)"
    start = cleaned.index(link)
    assert annotations[1] == {"type": "url_citation", "start_index": start, "end_index": start + len(link),
                              "title": "Page A", "url": "https://example.org/a"}


def test_a_link_in_parentheses_is_cited_with_them_as_openai_cites_it() -> None:
    """Recorded: `([justsecurity.org](https://...))` is one url_citation, parentheses included."""
    cleaned, [cited] = annotate("Read this ([A](https://example.org/a)).", CITABLE)
    assert cleaned[cited["start_index"]:cited["end_index"]] == "([A](https://example.org/a))"
    stream = StreamingCitations(CITABLE)
    assert stream.feed("Read this ([A](https://example.org/a)") == [("Read this ([A](https://example.org/a", [])]
    assert stream.feed(").") == [("))", [cited]), (".", [])]  # cited once it is known that ")" closes it
    _, [lone] = annotate("Read this ([A](https://example.org/a) and more).", CITABLE)
    assert "Read this ([A](https://example.org/a) and more)."[lone["start_index"]:lone["end_index"]] == \
        "[A](https://example.org/a)"


@pytest.mark.parametrize("text", ["See [B](https://example.org/b).", "Paris<|file-zzz|>.", "a <| b |> c"])
def test_what_no_search_found_is_left_as_written(text: str) -> None:
    assert annotate(text, CITABLE) == (text, [])


LINES = ("<|file-abc123|>Paris<|file-abc123|>\nSee [A](https://example.org/a)\n\n([A](https://example.org/a))\n"
         "([A](https://example.org/a)) and <|file-abc123|>\n[A](https://example.org/a).")
"""Citations at the start and the end of lines, and a line break right after a link in parentheses."""


@pytest.mark.parametrize("text", [TEXT, LINES])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES)), max_size=12))
def test_any_split_streams_the_cleaned_text_without_a_marker(text: str, cuts: list[int]) -> None:
    points = sorted({cut for cut in cuts if cut < len(text)})
    deltas = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    stream = StreamingCitations(CITABLE)
    shown, annotations = [], []
    for piece_text, new in [piece for delta in deltas for piece in stream.feed(delta)] + stream.finish():
        assert all(cited_end(annotation) == len("".join(shown)) + len(piece_text) for annotation in new)
        shown.append(piece_text)
        annotations += new
    assert (("".join(shown), annotations)) == annotate(text, CITABLE)
    assert stream.shown == "".join(shown)
    assert not any("<|" in piece or "|>" in piece for piece in shown)


def test_an_annotation_streams_before_the_text_after_its_citation_in_the_same_delta() -> None:
    """As OpenAI streams it: `Paris`, the annotation, then `.` (stream-file-search__pydantic-ai__1)."""
    stream = StreamingCitations(CITABLE)
    cited = {"type": "file_citation", "file_id": "file-abc123", "filename": "paris.txt", "index": 5}
    assert stream.feed("Paris<|file-abc123|>. See") == [("Paris", [cited]), (". See", [])]
    link = {"type": "url_citation", "start_index": 11, "end_index": 37, "title": "Page A",
            "url": "https://example.org/a"}
    assert stream.feed(" [A](https://example.org/a) too.") + stream.finish() == [
        (" [A](https://example.org/a)", [link]), (" too.", []), ("", [])]


def test_with_nothing_citable_the_text_streams_as_written_at_once() -> None:
    """No search found anything: a marker or a link is text like any other, so nothing is held
    back waiting to see whether it becomes one."""
    text = "See [B](https://example.org/b) and <|file-abc123|>."
    assert annotate(text, Citable()) == (text, [])
    stream = StreamingCitations(Citable())
    assert stream.feed("See ([B](https://example.org/b)") == [("See ([B](https://example.org/b)", [])]
    assert stream.feed(") and <|fi") == [(") and <|fi", [])]
    assert stream.feed("le-abc123|>.") + stream.finish() == [("le-abc123|>.", []), ("", [])]
    assert stream.shown == "See ([B](https://example.org/b)) and <|file-abc123|>."
