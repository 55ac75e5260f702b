"""bench/device/: every script parses (`bash -n`), so a typo costs no device time; and
`wheels.sh`, which each of them runs first, installs a carried wheel where their PYTHONPATH
looks (a real pip, no network, a wheel made here), and fails on a folder without one."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

SCRIPTS = sorted((REPO_ROOT / "bench" / "device").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_device_script_parses(script: Path) -> None:
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def a_wheel(folder: Path) -> None:
    """A pure-Python wheel of one module, `carried`, as a build backend would write it."""
    folder.mkdir()
    info = "carried-1.0.dist-info"
    files = {
        "carried.py": "VALUE = 7\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: carried\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / "carried-1.0-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def test_wheels_installs_the_carried_wheels_into_the_site(tmp_path: Path) -> None:
    a_wheel(tmp_path / "carry")
    site = tmp_path / "site"
    script = REPO_ROOT / "bench" / "device" / "wheels.sh"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # python3: this interpreter's
    done = subprocess.run(
        ["bash", str(script), str(tmp_path / "carry"), str(site)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    imported = subprocess.run(
        [sys.executable, "-c", "import carried; print(carried.VALUE)"],
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert imported.stdout == "7\n", imported.stderr
    (tmp_path / "empty").mkdir()
    nothing = subprocess.run(
        ["bash", str(script), str(tmp_path / "empty"), str(site)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nothing.returncode != 0  # `|| exit 1` in each script then stops the run
