"""EPUBs built with ebooklib, read back: order, titles from a nested table of contents, text
without notes, images or scripts, metadata and cover."""

from __future__ import annotations

from pathlib import Path

from ebooklib import epub as ebooklib_epub

from supervisor.books import read
from tests.helpers.books import build_epub, png


def test_a_nested_book_reads_in_spine_order_with_numbered_titles(tmp_path: Path) -> None:
    book = read.read(build_epub(tmp_path / "b.epub").read_bytes(), "b.epub")
    assert (book.title, book.author, book.language) == ("Harbour Days", "A. Writer", "en")
    assert [c.title for c in book.chapters] == [
        "1 Part One — 1.1 The Harbour",
        "1.2 The Market",
        "2 The Storm",
    ]
    first, second, third = (c.text for c in book.chapters)
    assert (
        first
        == "The Harbour.\n\nThe boats came in at dawn. Gulls followed them.\n\nThe nets were full."
    )
    assert second == "The Market.\n\nFish were sold by the pound.\n\nCod\n\nHerring"
    assert third == "The Storm.\n\nBy evening the wind had turned."
    assert book.cover == png(4, 4) and book.cover_type == "image/png"


def test_a_flat_table_keeps_its_titles_and_a_book_without_cover_has_none(tmp_path: Path) -> None:
    chapters = (
        ("One", "<p>First words.</p>"),
        ("Two", "<p>Second words.</p>"),
        ("Three", "<p>Third.</p>"),
    )
    path = build_epub(tmp_path / "flat.epub", chapters, cover=False)
    # build_epub nests the first two under "Part One": rebuild its toc flat
    book = ebooklib_epub.read_epub(str(path))
    book.toc = [
        ebooklib_epub.Link(f"chap{i}.xhtml", name, f"c{i}")
        for i, (name, _) in enumerate(chapters, 1)
    ]
    ebooklib_epub.write_epub(str(path), book)
    read_back = read.read(path.read_bytes(), "flat.epub")
    assert [c.title for c in read_back.chapters] == ["One", "Two", "Three"]
    assert read_back.cover is None


def test_the_language_and_title_come_from_the_metadata(tmp_path: Path) -> None:
    path = build_epub(tmp_path / "de.epub", title="Hafentage", language="de", author="B. Autorin")
    book = read.read(path.read_bytes(), "whatever.epub")
    assert (book.title, book.author, book.language) == ("Hafentage", "B. Autorin", "de")
