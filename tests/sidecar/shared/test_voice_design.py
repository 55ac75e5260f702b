"""sidecar.shared.voice_design against the reference fixtures, plus the errors a user can run into."""

from __future__ import annotations

import pytest

from sidecar.shared.errors import InvalidInput, InvalidInstruct
from sidecar.shared.voice_design import (
    INSTRUCT_CATEGORIES,
    VALID_INSTRUCT_ITEMS,
    VALID_INSTRUCT_ITEMS_EN,
    VALID_INSTRUCT_ITEMS_ZH,
    resolve_instruct,
)


def test_instruct_cases(cases: dict) -> None:
    section = cases["instructs"]
    assert section
    assert any(c.get("error") for c in section) and any(not c.get("error") for c in section)
    for c in section:
        if c.get("error"):
            with pytest.raises(InvalidInstruct):
                resolve_instruct(c["instruct"], c["use_zh"])
        else:
            assert resolve_instruct(c["instruct"], c["use_zh"]) == c["out"], c


def test_vocabulary_size() -> None:
    assert len(VALID_INSTRUCT_ITEMS) == 48
    assert len(VALID_INSTRUCT_ITEMS_EN) == 23
    assert len(VALID_INSTRUCT_ITEMS_ZH) == 25
    assert list(INSTRUCT_CATEGORIES) == ["gender", "age", "pitch", "style", "accent", "dialect"]


@pytest.mark.parametrize("empty", [None, "", "   "])
def test_no_instruct(empty: str | None) -> None:
    assert resolve_instruct(empty, use_zh=False) is None
    assert resolve_instruct(empty, use_zh=True) is None


@pytest.mark.parametrize(
    ("instruct", "use_zh", "out"),
    [
        # Separators: full-width comma in English, stray commas and spacing are fixed.
        ("male，elderly", False, "male, elderly"),
        (", male ,, low pitch,", False, "male, low pitch"),
        ("男, 老年", True, "男，老年"),
        ("男，老年", False, "male, elderly"),
        # The user's order is kept.
        ("high pitch, female", False, "high pitch, female"),
        # An accent forces English, a dialect forces Chinese, whatever the text says.
        ("女, british accent", True, "female, british accent"),
        ("male, 四川话", False, "男，四川话"),
        ("Whisper", True, "耳语"),
    ],
)
def test_normalisation(instruct: str, use_zh: bool, out: str) -> None:
    assert resolve_instruct(instruct, use_zh) == out


def test_unknown_item_message() -> None:
    with pytest.raises(InvalidInstruct) as info:
        resolve_instruct("femal, young adult", use_zh=False)
    msg = str(info.value)
    assert "'femal'" in msg
    assert "did you mean 'female'" in msg
    # It lists the vocabulary, in both languages.
    for item in ("american accent", "very high pitch", "四川话", "耳语"):
        assert item in msg
    assert "'young adult' is not" not in msg  # the valid item is not blamed


def test_unknown_item_without_suggestion() -> None:
    with pytest.raises(InvalidInstruct) as info:
        resolve_instruct("robot voice", use_zh=False)
    assert "'robot voice'" in str(info.value)
    assert "did you mean" not in str(info.value)


def test_invalid_instruct_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        resolve_instruct("old", use_zh=False)
    assert issubclass(InvalidInstruct, InvalidInput)


@pytest.mark.parametrize(
    ("instruct", "names"),
    [
        ("male, female", ["'male'", "'female'", "gender"]),
        ("male, 女", ["'male'", "'female'"]),  # caught after translation
        ("child, elderly, low pitch", ["'child'", "'elderly'", "age"]),
        ("low pitch, high pitch", ["'low pitch'", "'high pitch'", "pitch"]),
        ("male, male", ["'male' vs 'male'"]),  # a repeated item counts as a conflict
        ("british accent, indian accent", ["accent"]),
    ],
)
def test_conflicting_items(instruct: str, names: list[str]) -> None:
    with pytest.raises(InvalidInstruct, match="Conflicting") as info:
        resolve_instruct(instruct, use_zh=False)
    for name in names:
        assert name in str(info.value)


def test_dialect_with_accent() -> None:
    with pytest.raises(InvalidInstruct, match="dialect") as info:
        resolve_instruct("四川话, british accent", use_zh=True)
    assert "accent" in str(info.value)


def test_two_dialects_conflict() -> None:
    with pytest.raises(InvalidInstruct, match="dialect"):
        resolve_instruct("四川话，河南话", use_zh=True)
