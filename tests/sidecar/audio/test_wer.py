"""The round-trip comparison (sidecar/audio/wer.py): word error rate and the longest diverging run."""

from __future__ import annotations

import pytest

from sidecar.audio.wer import compare, words

READ = "The harbour was quiet that morning, and nobody else was there."  # 11 words


def test_normalisation_ignores_case_punctuation_and_splits_unspaced_scripts() -> None:
    assert words("It's the 6:15 — to BRIGHTON!") == ["it's", "the", "6", "15", "to", "brighton"]
    assert words("今天天气很好。") == ["今", "天", "天", "气", "很", "好"]
    assert compare(READ, READ.upper().replace(",", "")) == (0.0, 0)


def test_one_wrong_word_is_one_error_and_a_run_of_one() -> None:
    rate, run = compare(READ, READ.replace("quiet", "quite"))
    assert rate == pytest.approx(1 / 11) and run == 1


def test_babble_in_the_middle_is_a_long_run() -> None:
    heard = "The harbour was ba da ga la ma na pa ta there."
    rate, run = compare(READ, heard)
    assert run == 8 and rate == pytest.approx(8 / 11)  # 7 words read as 8 others: 7 subs, 1 insert


def test_dropped_and_repeated_words() -> None:
    assert compare(READ, "The harbour was there.") == (pytest.approx(7 / 11), 7)
    doubled = READ.replace("quiet", "quiet quiet quiet quiet")
    assert compare(READ, doubled) == (pytest.approx(3 / 11), 3)


def test_empty_sides() -> None:
    assert compare("", "") == (0.0, 0)
    assert compare("", "something heard") == (1.0, 2)
    assert compare(READ, "") == (1.0, 11)
