"""`serve --help` is short and grouped; `serve --help-all` has every flag (issue 37.5: 288 lines
with no short form). The real command line runs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from supervisor.commands.serve_help import ESSENTIAL
from supervisor.settings import Settings, flag_of


def serve_help(flag: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "serve", flag],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_help_is_short_and_names_where_the_rest_is() -> None:
    short = serve_help("--help")
    assert len(short.splitlines()) < 60, short
    for title, _ in ESSENTIAL:
        assert f"\n{title}:\n" in short
    assert all(flag in short for flag in ("--model", "--port", "--api-key ", "--data-dir"))
    assert "--qa-retries" not in short and "serve --help-all" in short


def test_help_all_lists_every_setting_and_every_short_one_is_a_setting() -> None:
    full = serve_help("--help-all")
    fields = {f.name: flag_of(f) for f in dataclasses.fields(Settings)}
    assert [name for name, flag in fields.items() if flag not in full] == []
    assert [name for _, names in ESSENTIAL for name in names if name not in fields] == []
