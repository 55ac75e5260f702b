"""Markdown cut at its top headings, plain text at its chapter lines, markup taken out."""

from __future__ import annotations

import pytest

from supervisor.books import read
from supervisor.books.model import BookError


def test_markdown_is_cut_at_its_highest_headings() -> None:
    text = (
        "# Harbour Days\n\nA foreword of some length, long enough to be read as a chapter of its own here.\n\n"
        "## The Harbour\n\nThe **boats** came in at [dawn](http://x).\n\n![gull](g.png)\n\n"
        "### A detail\n\n- cod\n- herring\n\n## The Storm\n\n```\ncode # not a heading\n```\nWind.\n"
    )
    book = read.read(text.encode(), "harbour.md")  # one `#` first: the title, over `##` chapters
    assert book.title == "Harbour Days"
    assert [c.title for c in book.chapters] == ["Harbour Days", "The Harbour", "The Storm"]
    assert book.chapters[0].text.startswith("Harbour Days.\n\nA foreword of some length")
    alone = read.read(b"# One\n\nFirst words.\n\n# Two\n\n## Detail\n\nMore words.", "x.md")
    assert [c.title for c in alone.chapters] == ["One", "Two"]  # two `#`: they cut
    two = read.read(text.replace("# Harbour Days\n", "").encode(), "harbour.md")
    assert [c.title for c in two.chapters] == ["harbour", "The Harbour", "The Storm"]
    assert (
        two.chapters[1].text
        == "The Harbour.\n\nThe boats came in at dawn.\n\nA detail.\n\ncod\n\nherring"
    )
    assert two.chapters[2].text == "The Storm.\n\nWind."


def test_plain_text_is_cut_at_chapter_lines() -> None:
    text = "CHAPTER I. The Harbour\n\nThe boats came in.\n\nChapter 2\n\nThe wind turned.\nIt rained.\n"
    book = read.read(text.encode(), "book.txt")
    assert [c.title for c in book.chapters] == ["CHAPTER I. The Harbour", "Chapter 2"]
    assert book.chapters[1].text == "Chapter 2.\n\nThe wind turned. It rained."
    whole = read.read(b"Just one text without chapters.", "note.txt")
    assert [(c.title, c.text) for c in whole.chapters] == [
        ("note", "Just one text without chapters.")
    ]


def test_text_that_is_not_utf8_or_has_no_words_is_refused() -> None:
    with pytest.raises(BookError, match="not UTF-8"):
        read.read("caf\u00e9".encode("latin-1") + b" and more", "book.txt")
    with pytest.raises(BookError, match="no text to read"):
        read.read(b"# Title\n\n# Another\n", "book.md")
