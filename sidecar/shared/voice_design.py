"""Voice-design instructs: validating the items and normalising them to one language."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType

from sidecar.shared.errors import InvalidInstruct
from sidecar.shared.text import contains_cjk

__all__ = [
    "INSTRUCT_CATEGORIES",
    "VALID_INSTRUCT_ITEMS",
    "VALID_INSTRUCT_ITEMS_EN",
    "VALID_INSTRUCT_ITEMS_ZH",
    "resolve_instruct",
]

# --- Data tables: from k2-fsa/OmniVoice (omnivoice/utils/voice_design.py), Apache-2.0.

# Items with both an English and a Chinese form, per category (English -> Chinese).
_PAIRED: dict[str, dict[str, str]] = {
    "gender": {"male": "男", "female": "女"},
    "age": {
        "child": "儿童",
        "teenager": "少年",
        "young adult": "青年",
        "middle-aged": "中年",
        "elderly": "老年",
    },
    "pitch": {
        "very low pitch": "极低音调",
        "low pitch": "低音调",
        "moderate pitch": "中音调",
        "high pitch": "高音调",
        "very high pitch": "极高音调",
    },
    "style": {"whisper": "耳语"},
}
# Accents exist in English only, dialects in Chinese only.
_ACCENTS: tuple[str, ...] = (
    "american accent",
    "british accent",
    "australian accent",
    "chinese accent",
    "canadian accent",
    "indian accent",
    "korean accent",
    "portuguese accent",
    "russian accent",
    "japanese accent",
)
_DIALECTS: tuple[str, ...] = (
    "河南话",
    "陕西话",
    "四川话",
    "贵州话",
    "云南话",
    "桂林话",
    "济南话",
    "石家庄话",
    "甘肃话",
    "宁夏话",
    "青岛话",
    "东北话",
)

# --- end of the upstream tables.

_EN_TO_ZH: dict[str, str] = {en: zh for pairs in _PAIRED.values() for en, zh in pairs.items()}
_ZH_TO_EN: dict[str, str] = {zh: en for en, zh in _EN_TO_ZH.items()}

# Category -> every item in it (both languages). At most one item per category is allowed.
INSTRUCT_CATEGORIES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        **{cat: frozenset(pairs) | frozenset(pairs.values()) for cat, pairs in _PAIRED.items()},
        "accent": frozenset(_ACCENTS),
        "dialect": frozenset(_DIALECTS),
    }
)
VALID_INSTRUCT_ITEMS: frozenset[str] = frozenset().union(*INSTRUCT_CATEGORIES.values())
VALID_INSTRUCT_ITEMS_EN: frozenset[str] = frozenset(
    i for i in VALID_INSTRUCT_ITEMS if not contains_cjk(i)
)
VALID_INSTRUCT_ITEMS_ZH: frozenset[str] = VALID_INSTRUCT_ITEMS - VALID_INSTRUCT_ITEMS_EN

# Items are separated by an ASCII or full-width comma, with any whitespace around it.
_ITEM_SEP_RE = re.compile(r"\s*[,，]\s*")

# Sorted once, so that close-match suggestions never depend on set iteration order.
_SUGGESTION_POOL: tuple[str, ...] = tuple(sorted(VALID_INSTRUCT_ITEMS))


def resolve_instruct(instruct: str | None, use_zh: bool) -> str | None:
    """Validate an instruct and write it in one language; use_zh = the target text is Chinese."""
    if instruct is None:
        return None
    stripped = instruct.strip()
    if not stripped:
        return None

    items = [raw for raw in _ITEM_SEP_RE.split(stripped) if raw]
    normalised = [raw.strip().lower() for raw in items]

    unknown = [(raw, n) for raw, n in zip(items, normalised) if n not in VALID_INSTRUCT_ITEMS]
    if unknown:
        raise InvalidInstruct(_unknown_items_message(stripped, unknown))

    # A dialect only makes sense for Chinese speech and an accent only for English speech, so
    # either one overrides what the target text suggested.
    has_dialect = any(n.endswith("话") for n in normalised)
    has_accent = any(" accent" in n for n in normalised)
    if has_dialect and has_accent:
        raise InvalidInstruct(
            f"Instruct {stripped!r} mixes a Chinese dialect with an English accent: dialects are "
            "for Chinese speech, accents for English speech; use one or the other."
        )
    if has_dialect:
        use_zh = True
    elif has_accent:
        use_zh = False

    # Items without a counterpart in the other language (accents, dialects) stay as they are.
    table = _EN_TO_ZH if use_zh else _ZH_TO_EN
    normalised = [table.get(n, n) for n in normalised]

    # Checked after translation, so "male, 女" is caught as a gender conflict too.
    conflicts = []
    for category, members in INSTRUCT_CATEGORIES.items():
        hits = [n for n in normalised if n in members]
        if len(hits) > 1:
            conflicts.append(f"{category}: " + " vs ".join(repr(h) for h in hits))
    if conflicts:
        raise InvalidInstruct(
            f"Conflicting instruct items in {stripped!r} ("
            + "; ".join(conflicts)
            + "). Each category (gender, age, pitch, style, accent, dialect) allows at most one item."
        )

    # The user's item order is kept; the separator follows the language of the result.
    separator = "，" if any(contains_cjk(n) for n in normalised) else ", "
    return separator.join(normalised)


def _unknown_items_message(instruct: str, unknown: list[tuple[str, str]]) -> str:
    lines = []
    for raw, n in unknown:
        match = difflib.get_close_matches(n, _SUGGESTION_POOL, n=1, cutoff=0.6)
        hint = f"; did you mean {match[0]!r}?" if match else ""
        lines.append(f"  {raw!r} is not a supported item{hint}")
    return (
        f"Unsupported voice-design instruct item(s) in {instruct!r}:\n"
        + "\n".join(lines)
        + "\nValid English items: "
        + ", ".join(sorted(VALID_INSTRUCT_ITEMS_EN))
        + "\nValid Chinese items: "
        + "，".join(sorted(VALID_INSTRUCT_ITEMS_ZH))
        + "\nUse English items separated by ', ' (e.g. 'male, indian accent') or Chinese items "
        "separated by '，' (e.g. '男，河南话')."
    )
