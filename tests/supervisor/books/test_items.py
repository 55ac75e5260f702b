"""Chapters cut into items that fit one request each, at the largest boundary that works."""

from __future__ import annotations

from supervisor.books import items
from supervisor.books.model import Book, Chapter


def test_a_short_chapter_is_one_item_and_a_long_one_parts_at_paragraphs() -> None:
    paragraph = "The boats came in at dawn and the gulls followed them home. " * 3
    long_text = "\n\n".join([paragraph.strip()] * 6)
    book = Book("B", [Chapter("One", "Short."), Chapter("Two", long_text)])
    out, spans = items.plan(book, {"voice": "alloy"}, max_chars=400, max_audio_s=600)
    assert [s.title for s in spans] == ["One", "Two"]
    assert spans[0].first == 0 and spans[0].count == 1
    assert out[0] == {
        "id": "ch001",
        "voice": "alloy",
        "input": "Short.",
        "response_format": "flac",
        "first_chunk_s": items.FIRST_CHUNK_S,  # its later chunks' prompt short
        "title": "One",
    }
    assert {p["title"] for p in out[1:]} == {"Two"}
    parts = out[1:]
    assert spans[1].count == len(parts) == 3
    assert [p["id"] for p in parts] == ["ch002-p1", "ch002-p2", "ch002-p3"]
    assert all(len(p["input"]) <= 400 for p in parts)
    assert "\n\n".join(p["input"] for p in parts) == long_text  # nothing lost, nothing added


def test_a_paragraph_too_long_is_cut_at_sentences_and_a_word_where_it_must() -> None:
    sentences = " ".join(f"Sentence number {i} is here." for i in range(40))
    cut = items.parts(sentences, 120, 600)
    assert all(len(p) <= 120 and p.endswith(".") for p in cut)
    assert " ".join(cut) == sentences
    word = "x" * 250
    assert "".join(items.parts(word, 100, 600)) == word
    assert all(len(p) <= 100 for p in items.parts(word, 100, 600))


def test_the_estimated_audio_bounds_a_part_too() -> None:
    text = " ".join(["word"] * 400)
    cut = items.parts(text, 10_000, 20.0)
    assert len(cut) > 1
    assert all(items.item_audio_s(p) <= 20.0 for p in cut)
