"""The 646 languages OmniVoice knows, and turning a user's language name or id into an id."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

__all__ = ["language_ids", "language_name", "language_names", "resolve_language"]

logger = logging.getLogger(__name__)

# id<TAB>name, one language a line; from k2-fsa/OmniVoice docs/lang_id_name_map.tsv (Apache-2.0).
_TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "languages.tsv"


class _Table:
    """The language table: ids in file order, id -> display name, lower-cased name -> id."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.ids: tuple[str, ...] = tuple(lang_id for lang_id, _ in rows)
        self.id_set: frozenset[str] = frozenset(self.ids)
        self.names: Mapping[str, str] = MappingProxyType(dict(rows))
        self.by_lower_name: dict[str, str] = {name.lower(): lang_id for lang_id, name in rows}


@lru_cache(maxsize=1)
def _table() -> _Table:
    # Loaded on first use: most requests name no language, and the import should stay cheap.
    rows: list[tuple[str, str]] = []
    with _TABLE_PATH.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            lang_id, name = line.split("\t")[:2]
            if lang_id == "id" and name == "name":  # the header
                continue
            rows.append((lang_id, name))
    return _Table(rows)


def language_ids() -> tuple[str, ...]:
    """All supported language ids, in table order (sorted by id)."""
    return _table().ids


def language_names() -> Mapping[str, str]:
    """Read-only map of language id to display name."""
    return _table().names


def language_name(lang_id: str) -> str:
    """Display name of a language id ("en" -> "English"); KeyError for an unknown id."""
    return _table().names[lang_id]


def resolve_language(name_or_id: str | None) -> str | None:
    """Language id for an id or a (case-insensitive) name; None for none/unknown, as the reference."""
    if name_or_id is None or name_or_id.lower() == "none":
        return None
    table = _table()
    # Ids are matched exactly: "EN" is not "en" (the reference does the same). Nothing is
    # stripped either, so " en" is unknown.
    if name_or_id in table.id_set:
        return name_or_id
    found = table.by_lower_name.get(name_or_id.lower())
    if found is not None:
        return found
    # Unknown languages are not an error upstream: the model runs language-agnostic instead.
    logger.warning(
        "Language %r is not recognised; use a language id such as 'en', 'zh', 'ja' or a name "
        "such as 'English'. Generating without a language (language-agnostic).",
        name_or_id,
    )
    return None
