"""sidecar.shared.languages against the reference fixtures and the upstream table."""

from __future__ import annotations

import logging

import pytest

from sidecar.shared.languages import language_ids, language_name, language_names, resolve_language


def test_language_cases(cases: dict) -> None:
    section = cases["languages"]
    assert section
    got = [resolve_language(c["in"]) for c in section]
    assert got == [c["out"] for c in section]


def test_table_shape() -> None:
    ids = language_ids()
    assert len(ids) == 646
    assert len(set(ids)) == 646
    assert list(ids) == sorted(ids)
    names = language_names()
    assert set(names) == set(ids)
    # Names are unique case-insensitively, so a name lookup is never ambiguous.
    assert len({n.lower() for n in names.values()}) == 646
    # "id" is Indonesian's id, so the header row must be skipped by content, not by id alone.
    assert names["id"] == "Indonesian"
    assert "name" not in {n.lower() for n in names.values()}


@pytest.mark.parametrize(
    ("lang_id", "name"),
    [
        ("en", "English"),
        ("zh", "Chinese"),
        ("yue", "Cantonese"),
        ("fmp", "Fe'fe'"),
        ("aom", "Ömie"),
        ("qus", "Santiago del Estero Quichua"),
    ],
)
def test_language_name(lang_id: str, name: str) -> None:
    assert language_name(lang_id) == name


def test_language_name_unknown_id() -> None:
    with pytest.raises(KeyError):
        language_name("xx")


def test_every_name_and_id_resolves() -> None:
    for lang_id, name in language_names().items():
        assert resolve_language(lang_id) == lang_id
        assert resolve_language(name) == lang_id
        assert resolve_language(name.upper()) == lang_id


@pytest.mark.parametrize("none", [None, "none", "None", "NONE"])
def test_none_means_no_language(none: str | None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sidecar.shared.languages"):
        assert resolve_language(none) is None
    assert not caplog.records  # asking for no language is not a mistake


@pytest.mark.parametrize("bad", ["Klingon", "EN", " en", "", "english "])
def test_unknown_language_falls_back_to_none(bad: str, caplog: pytest.LogCaptureFixture) -> None:
    # Ids are case-sensitive and nothing is stripped, as in the reference.
    with caplog.at_level(logging.WARNING, logger="sidecar.shared.languages"):
        assert resolve_language(bad) is None
    assert any(repr(bad) in r.getMessage() for r in caplog.records)
