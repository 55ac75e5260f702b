"""systemd's own checker, for the tests of the units `install-service` writes."""

from __future__ import annotations

import shutil
import sys

import pytest


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if not sys.platform.startswith("linux"):
            pytest.skip("systemd-analyze exists only on Linux")
        pytest.fail(
            "systemd-analyze is missing: install Debian's `systemd` package (.ci/run does: apt-get install -y systemd)"
        )
    return found
