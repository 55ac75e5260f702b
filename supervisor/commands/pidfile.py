"""The pid file of a server run outside systemd: written atomically, removed at exit, read by `stop`."""

from __future__ import annotations

import contextlib
import os

import psutil


class PidFileError(RuntimeError):
    """The pid file names a server that is still running."""


def is_server(pid: int) -> bool:
    """Whether pid is a live `omnivoice-supervisor serve` (or `start`, or `python -m supervisor serve`)."""
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        alive = proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    command = [os.path.basename(arg) for arg in argv[:4]]
    serving = "serve" in argv or "start" in argv
    return alive and serving and ("omnivoice-supervisor" in command or "supervisor" in command)


def read(path: str) -> int | None:
    """The pid in the file, or None if there is no file or no number in it."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def write(path: str) -> None:
    """Write our pid: to a temporary file in the same directory, then renamed over `path`, so a
    reader never sees a half-written file. A file naming another live server is an error; a
    stale one (its process gone, or something else now) is replaced."""
    other = read(path)
    if other is not None and other != os.getpid() and is_server(other):
        raise PidFileError(f"{path} names pid {other}, a server that is still running")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        f.write(f"{os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def remove(path: str) -> None:
    """Remove the file if it still names us (a newer server may have written its own)."""
    if read(path) == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
