"""sidecar.shared.duration against the reference fixtures, plus the edge cases the fixtures leave out."""

from __future__ import annotations

import math

import pytest

from sidecar.shared.duration import (
    DEFAULT_REF_TEXT,
    DEFAULT_REF_TOKENS,
    char_weight,
    estimate_duration,
    target_tokens,
    target_tokens_for_duration,
    text_weight,
)
from sidecar.shared.errors import InvalidInput


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)


# --- the reference fixtures -------------------------------------------------------------------


def test_duration_estimate_cases(cases: dict) -> None:
    section = cases["duration_estimates"]
    assert section
    for c in section:
        got = estimate_duration(c["text"], c["ref_text"], c["ref_tokens"])
        assert _close(got, c["estimate"]), (c["text"], c["ref_text"], got, c["estimate"])


def test_duration_estimate_cases_bit_exact(cases: dict) -> None:
    # Stricter than the contract (1e-6): the weight sums are compensated like the reference's
    # builtin sum() on Python >= 3.12, so the values agree to the last bit. A naive sum fails this.
    for c in cases["duration_estimates"]:
        assert estimate_duration(c["text"], c["ref_text"], c["ref_tokens"]) == c["estimate"]


def test_target_tokens_cases(cases: dict) -> None:
    section = cases["target_tokens"]
    assert section
    for c in section:
        got = target_tokens(c["text"], c["ref_text"], c["ref_tokens"], c["speed"])
        assert got == c["tokens"], (c["text"], c["speed"], got, c["tokens"])


# --- weights ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ch", "weight"),
    [
        ("a", 1.0),
        ("Z", 1.0),
        (" ", 0.2),
        ("\u3000", 0.2),  # ideographic space: category Zs
        ("7", 3.5),
        ("٣", 3.5),  # Arabic-Indic digit: category Nd
        (",", 0.5),
        ("😀", 0.5),  # a symbol (So)
        ("\u0301", 0.0),  # combining acute accent
        ("\u0640", 0.0),  # Arabic tatweel
        ("中", 3.0),
        ("한", 2.5),
        ("あ", 2.2),
        ("ア", 2.2),
        ("क", 1.8),
        ("ก", 1.5),
        ("ب", 1.5),
        ("א", 1.5),
        ("ж", 1.0),
        ("é", 1.0),
        ("ሀ", 3.0),  # Ethiopic
        ("ꀀ", 3.0),  # Yi
        ("\U00020001", 3.0),  # CJK Extension B
        ("\U00020000", 1.0),  # the first Extension B code point falls to the default, as upstream
        ("\U00010000", 1.0),  # Linear B: no table entry
    ],
)
def test_char_weight(ch: str, weight: float) -> None:
    assert char_weight(ch) == weight


def test_default_reference_weight() -> None:
    # The spec's worked example: 14.1 weight units in 25 frames.
    assert text_weight(DEFAULT_REF_TEXT) == 14.1
    assert DEFAULT_REF_TOKENS == 25


def test_text_weight_is_compensated() -> None:
    # A naive left-to-right float sum gives 1.9999999999999998 here.
    assert text_weight(" " * 10) == 2.0
    assert text_weight("") == 0.0


# --- estimate_duration ------------------------------------------------------------------------


def test_estimate_degenerate_reference() -> None:
    assert estimate_duration("hello", "", 25) == 0.0
    assert estimate_duration("hello", "ref", 0) == 0.0
    assert estimate_duration("hello", "ref", -5) == 0.0
    assert estimate_duration("hello", "\u0301\u0301", 25) == 0.0  # weightless reference


def test_estimate_empty_text() -> None:
    assert estimate_duration("", DEFAULT_REF_TEXT, 25) == 0.0


def test_estimate_short_boost_and_linear_region() -> None:
    # Reference "aaaa" (weight 4) in 4 frames: one frame per weight unit.
    assert estimate_duration("a" * 100, "aaaa", 4) == 100.0  # above 50: linear
    # 10 frames linear -> 50 * (10 / 50) ** (1/3), about 29.24.
    assert estimate_duration("a" * 10, "aaaa", 4) == pytest.approx(50 * 0.2 ** (1 / 3))


# --- target_tokens ----------------------------------------------------------------------------


def test_target_tokens_spec_example() -> None:
    assert target_tokens("Hi.") == 22


def test_target_tokens_empty_text_is_one_frame() -> None:
    assert target_tokens("") == 1


def test_target_tokens_default_reference_when_incomplete() -> None:
    text = "A sentence of moderate length for the estimator."
    default = target_tokens(text)
    # An empty ref_text, or a ref_text without a frame count, falls back to the default pair.
    assert target_tokens(text, "", 300) == default
    assert target_tokens(text, "Some reference.", None) == default
    # A real reference changes the estimate.
    assert target_tokens(text, "Some reference.", 300) != default


def test_target_tokens_speed() -> None:
    text = "a" * 200  # weight 200 -> 200 / 0.564 = 354.6 frames at speed 1
    base = target_tokens(text)
    assert base == 354
    assert target_tokens(text, speed=None) == base
    assert target_tokens(text, speed=2.0) == int((200 / (14.1 / 25)) / 2.0)
    # The reference ignores speeds that are not positive.
    assert target_tokens(text, speed=0.0) == base
    assert target_tokens(text, speed=-1.0) == base


def test_target_tokens_with_reference() -> None:
    # "aaaa" in 4 frames: one frame per Latin letter.
    assert target_tokens("a" * 80, "aaaa", 4) == 80


# --- target_tokens_for_duration ---------------------------------------------------------------


def test_duration_sets_length_and_speed() -> None:
    text = "a" * 200
    est = target_tokens(text)  # 354
    target_len, speed = target_tokens_for_duration(text, 4.0)
    assert target_len == 100
    assert speed == est / 100
    # Fractional frames truncate: 1.99 s -> 49 frames.
    assert target_tokens_for_duration(text, 1.99)[0] == 49


def test_duration_with_reference() -> None:
    target_len, speed = target_tokens_for_duration("a" * 80, 2.0, "aaaa", 4)
    assert (target_len, speed) == (50, 80 / 50)


def test_duration_never_below_one_frame() -> None:
    assert target_tokens_for_duration("hello", 0.0)[0] == 1
    assert target_tokens_for_duration("hello", 0.01)[0] == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_duration_must_be_finite(bad: float) -> None:
    with pytest.raises(InvalidInput, match="duration"):
        target_tokens_for_duration("hello", bad)
