"""A disk that really fills up: a small tmpfs mounted for one test, and a filler for it.

Mounting needs root (CI runs as root); elsewhere the test is skipped, saying why.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mount_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's `size=` option: "1m", "8m") at `mount`, made if missing, and
    unmounted (lazily: a server may still hold a file there) when the block ends."""
    mount.mkdir(exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill the filesystem to its last byte (a gap of even a few KiB would hold a short result);
    the filler file, for the test to delete when space should return."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for block in (65536, 4096, 1):
            try:
                while True:
                    out.write(b"\0" * block)
            except OSError:
                pass
    return filler
