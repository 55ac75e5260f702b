"""sidecar.shared.text against the reference fixtures, plus the edge cases the fixtures leave out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tokenizers

from sidecar.shared.text import (
    ABBREVIATIONS,
    END_PUNCTUATION,
    NONVERBAL_TAGS,
    add_punctuation,
    chunk_char_len,
    chunk_text,
    combine_text,
    contains_cjk,
    tokenize_text,
)


@pytest.fixture(scope="module")
def tokenizer(checkpoint_dir: Path) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(checkpoint_dir / "tokenizer.json"))


# --- the reference fixtures -------------------------------------------------------------------


def test_combine_text_cases(cases: dict) -> None:
    section = cases["combine_text"]
    assert section
    got = [combine_text(c["text"], c["ref_text"]) for c in section]
    assert got == [c["out"] for c in section]


def test_add_punctuation_cases(cases: dict) -> None:
    section = cases["add_punctuation"]
    assert section
    got = [add_punctuation(c["text"]) for c in section]
    assert got == [c["out"] for c in section]


def test_chunk_cases(cases: dict) -> None:
    section = cases["chunks"]
    assert section
    for c in section:
        assert chunk_text(c["text"], c["chunk_len"], c["min_chunk_len"]) == c["chunks"], c


def test_tokenize_cases(cases: dict, tokenizer: tokenizers.Tokenizer) -> None:
    section = cases["tokenize"]
    assert section
    for c in section:
        assert tokenize_text(tokenizer, c["text"]) == c["ids"], c["text"]


# --- combine_text -----------------------------------------------------------------------------


def test_combine_text_empty_inputs() -> None:
    assert combine_text("", None) == ""
    assert combine_text("  \n\t ", None) == ""
    # An empty reference text counts as none: no leading space appears.
    assert combine_text(" hello ", "") == "hello"


def test_combine_text_deletes_line_breaks_without_spacing() -> None:
    assert combine_text("one\r\ntwo\nthree", None) == "onetwothree"
    assert combine_text("b", "a\n") == "a b"


def test_combine_text_spaces_next_to_ideographs() -> None:
    # Any whitespace touching a CJK ideograph goes, including tabs; between Latin words it stays.
    assert combine_text("Hello 世界 and\tyou", None) == "Hello世界and you"
    # Kana are not in the ideograph range, so the space before them stays.
    assert combine_text("ok こんにちは", None) == "ok こんにちは"


def test_combine_text_full_width_parentheses() -> None:
    assert combine_text("a（b）c", "x") == "x a(b)c"


# --- tokenize_text ----------------------------------------------------------------------------


def test_tokenize_empty_text(tokenizer: tokenizers.Tokenizer) -> None:
    assert tokenize_text(tokenizer, "") == []


def test_tokenize_markers_are_single_tokens(tokenizer: tokenizers.Tokenizer) -> None:
    ids = tokenize_text(tokenizer, "<|text_start|>a<|text_end|>")
    start = tokenizer.token_to_id("<|text_start|>")
    end = tokenizer.token_to_id("<|text_end|>")
    assert ids[0] == start and ids[-1] == end and len(ids) == 3


def _tokenizer_with_merge(checkpoint_dir: Path) -> tokenizers.Tokenizer:
    """The fixture tokenizer plus one merge, "Ġ" + "[", so that tag boundaries become visible."""
    spec = json.loads((checkpoint_dir / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    # Far above everything else: the tokenizer renumbers the added tokens after the model vocab,
    # so a nearby id could collide with one of them.
    vocab["Ġ["] = 10_000
    spec["model"]["merges"] = [["Ġ", "["]]
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def test_tags_are_tokenised_on_their_own(checkpoint_dir: Path) -> None:
    tok = _tokenizer_with_merge(checkpoint_dir)
    text = "<|text_start|>so funny [laughter] really<|text_end|>"
    whole = tok.encode(text, add_special_tokens=False).ids
    merged_id = tok.token_to_id("Ġ[")
    assert merged_id in whole  # whole-string tokenising merges the space into the bracket
    ids = tokenize_text(tok, text)
    assert merged_id not in ids
    expected = (
        tok.encode("<|text_start|>so funny ", add_special_tokens=False).ids
        + tok.encode("[laughter]", add_special_tokens=False).ids
        + tok.encode(" really<|text_end|>", add_special_tokens=False).ids
    )
    assert ids == expected


def test_unknown_bracket_text_is_not_a_tag(checkpoint_dir: Path) -> None:
    tok = _tokenizer_with_merge(checkpoint_dir)
    text = "<|text_start|>a [cough] b<|text_end|>"
    # Not one of the 13 tags: tokenised as ordinary text, so the merge applies.
    assert tokenize_text(tok, text) == tok.encode(text, add_special_tokens=False).ids


def test_every_tag_is_split_out(tokenizer: tokenizers.Tokenizer) -> None:
    assert len(NONVERBAL_TAGS) == 13
    for tag in NONVERBAL_TAGS:
        text = f"x[{tag}]y"
        expected = (
            tokenizer.encode("x", add_special_tokens=False).ids
            + tokenizer.encode(f"[{tag}]", add_special_tokens=False).ids
            + tokenizer.encode("y", add_special_tokens=False).ids
        )
        assert tokenize_text(tokenizer, text) == expected


# --- add_punctuation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("", ""),
        ("   ", ""),
        ("wait…", "wait…"),
        ("（好）", "（好）"),
        ("你好 world", "你好 world。"),
        # Kana are outside the ideograph range: Japanese without kanji gets an ASCII stop.
        ("こんにちは", "こんにちは."),
        ("quote'", "quote'"),
        ("a-", "a-."),
    ],
)
def test_add_punctuation_edges(text: str, out: str) -> None:
    assert add_punctuation(text) == out


def test_end_punctuation_table() -> None:
    assert len(END_PUNCTUATION) == 26
    assert len(ABBREVIATIONS) == 53


# --- chunk_text -------------------------------------------------------------------------------


def test_chunk_empty_text() -> None:
    assert chunk_text("", 10) == []
    assert chunk_text("   ", 10) == []


def test_chunk_abbreviation_does_not_split() -> None:
    text = "Mr. Smith went to Washington. Dr. Jones stayed."
    assert chunk_text(text, 0) == ["Mr. Smith went to Washington.", "Dr. Jones stayed."]


def test_chunk_closing_marks_attach_to_previous_sentence() -> None:
    text = 'He said "stop." Then?! Left.'
    assert chunk_text(text, 0) == ['He said "stop."', "Then?!", "Left."]


def test_chunk_zero_length_gives_one_chunk_per_sentence() -> None:
    assert chunk_text("a b, c d; e f.", 0) == ["a b,", "c d;", "e f."]


def test_chunk_greedy_merge_respects_length() -> None:
    text = "One two. Three four. Five six."
    # Lengths before stripping: 8, 12, 10 characters.
    assert chunk_text(text, 20) == ["One two. Three four.", "Five six."]
    assert chunk_text(text, 30) == ["One two. Three four. Five six."]


def test_chunk_long_sentence_is_not_cut() -> None:
    text = "A very long sentence without any break at all"
    assert chunk_text(text, 5) == [text]


def test_chunk_short_pieces_are_folded() -> None:
    # "Hi." is 3 chars, " A." is 3, " B." 3; with min 4 the short ones fold backwards, and the
    # short first chunk absorbs the second whatever its length.
    assert chunk_text("Hi. A. Bigger sentence here. C.", 0, 4) == [
        "Hi. A.",
        "Bigger sentence here. C.",
    ]
    # A short first chunk takes in a long second one too.
    assert chunk_text("Hi. Bigger sentence here. More text follows.", 0, 4) == [
        "Hi. Bigger sentence here.",
        "More text follows.",
    ]
    # Without a minimum nothing is folded.
    assert chunk_text("Hi. A. Bigger sentence here. C.", 0, None) == [
        "Hi.",
        "A.",
        "Bigger sentence here.",
        "C.",
    ]


def test_chunk_chinese_punctuation() -> None:
    assert chunk_text("你好。今天好吗？", 0) == ["你好。", "今天好吗？"]


def test_chunk_char_len() -> None:
    # 100 characters in 200 frames: 2 frames a character, so 15 s (375 frames) is 187.5 -> 187.
    assert chunk_char_len(200, "x" * 100, 15.0) == 187
    assert chunk_char_len(200, "x" * 100, 0.0) == 0


# --- contains_cjk -----------------------------------------------------------------------------


def test_contains_cjk() -> None:
    assert contains_cjk("abc中")
    assert not contains_cjk("abc")
    assert not contains_cjk("カタカナ")
    assert not contains_cjk("")
    assert not contains_cjk(None)
