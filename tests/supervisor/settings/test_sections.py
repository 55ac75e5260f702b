"""supervisor/settings/sections.py: each subsystem's section, cut from the one Settings."""

from __future__ import annotations

import dataclasses

import pytest

from supervisor.settings import Settings
from supervisor.settings.sections import SECTIONS, SchedulingSettings, SupervisionSettings

# The properties of Settings that give each section, by the section's class.
PROPERTY = {
    "HttpSettings": "http",
    "SidecarSettings": "sidecar",
    "SupervisionSettings": "supervision",
    "SchedulingSettings": "scheduling",
    "SpeechSettings": "speech",
    "JobSettings": "jobs",
    "ServerSettings": "server",
}


def names(section: type[object]) -> set[str]:
    return {f.name for f in dataclasses.fields(section)}  # type: ignore[arg-type]


def test_every_setting_belongs_to_a_section() -> None:
    declared = {f.name for f in dataclasses.fields(Settings)}
    placed = set().union(*(names(section) for section in SECTIONS))
    assert declared - placed == set()


def test_a_section_has_no_name_that_is_not_a_setting_but_its_derived_ones() -> None:
    declared = {f.name for f in dataclasses.fields(Settings)}
    derived = {"sidecar", "several_owners", "cache_dir", "data_dir"}
    for section in SECTIONS:
        assert names(section) - declared - derived == set(), section.__name__


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_each_section_carries_the_values_in_effect_and_is_frozen(section: type[object]) -> None:
    settings = Settings(model="m", port=9300, max_batch_size=7, lease_s=9.0, chunk_s=8.0)
    cut = getattr(settings, PROPERTY[section.__name__])
    assert isinstance(cut, section)
    for name in names(section) & {f.name for f in dataclasses.fields(Settings)}:
        if name not in ("data_dir", "cache_dir"):
            assert getattr(cut, name) == getattr(settings, name), name
    first = dataclasses.fields(section)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cut, first, None)
    assert getattr(settings, PROPERTY[section.__name__]) is cut  # cut once


def test_derived_values_are_those_in_effect(tmp_path: object) -> None:
    settings = Settings(model="m", data_dir=str(tmp_path), max_frame_mb=2)
    assert settings.sidecar.data_dir == str(tmp_path)
    assert settings.sidecar.max_frame_bytes == 2 * 1024 * 1024
    assert settings.speech.cache_dir == settings.resolved_cache_dir()
    supervision: SupervisionSettings = settings.supervision
    assert supervision.sidecar is settings.sidecar


def test_several_owners_follows_the_keys() -> None:
    one: SchedulingSettings = Settings(model="m", api_keys=("a",)).scheduling
    two: SchedulingSettings = Settings(model="m", api_keys=("a", "b")).scheduling
    assert (one.several_owners, two.several_owners) == (False, True)
