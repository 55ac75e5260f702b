"""supervisor/settings/callback_allow.py: what a `--callback-allow` entry may be."""

from __future__ import annotations

import pytest

from supervisor.settings import Settings, SettingsError
from supervisor.settings.callback_allow import Allowed, allowed_entry


def test_allow_list_entries_are_host_host_port_or_host_any_port() -> None:
    assert allowed_entry("Hooks.Example.com") == Allowed("hooks.example.com", None)
    assert allowed_entry("hooks.example.com:80") == Allowed("hooks.example.com", 80)
    assert allowed_entry("127.0.0.1:*") == Allowed("127.0.0.1", None, any_port=True)
    assert allowed_entry("[::1]:8080") == Allowed("::1", 8080)
    for bad in (
        "",
        "http://a.example",
        "a.example/x",
        "a.example:99999",
        "a.example:1:*",
        "u@a.example",
        "[127.0.0.1]",
        "a.example:x",
    ):
        with pytest.raises(ValueError):
            allowed_entry(bad)
    with pytest.raises(SettingsError, match="--callback-allow"):
        Settings(engine="null", callback_allow=("a.example:x",), callback_secret="s")
