"""Waiting for space: what the job runner does when a full disk refuses an item's result.

An item whose result cannot be written for want of space goes back to the queue (the attempt
its claim counted stays counted), or, once it has had `FULL_DISK_ATTEMPTS` attempts, fails with
`insufficient_storage`. From the first refusal the runner waits for space: no item starts,
the job objects of unfinished jobs show `waiting_for_space` and `/health` shows the jobs'
state `waiting_for_space`. Every `PROBE_EVERY_S` the store is asked whether the largest refused
result would fit now (`room_for`, a real write, removed again); when it does, the wait ends by
itself and the items run again.

So that an item's end can always be recorded, even on a disk filled to its last byte by
something else, the SQLite store keeps a small reserve file in the data directory: the first
refusal removes it (`release_reserve`), which gives SQLite room to put the items back; the
probe that ends the wait writes it again.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from supervisor.errors import InsufficientStorage

if TYPE_CHECKING:
    from supervisor.jobs.storage import JobStorage

log = logging.getLogger("omnivoice.jobs")

FULL_DISK_ATTEMPTS = 3  # an item that met a full disk on its third attempt fails
PROBE_EVERY_S = 1.0
RESERVE_NAME = "jobs.reserve"
RESERVE_BYTES = 256 * 1024  # room for SQLite to record a few hundred items' ends
PROBE_NAME = ".space-probe.tmp"
PROBE_MARGIN_BYTES = 64 * 1024  # beyond the result: the database's own pages for its `done`


class FullDiskReport(TypedDict):
    since: float  # when the disk was found full (Unix time)
    needed_bytes: int
    error: str


class FullDiskWait:
    """Whether the runner waits for space, since when, for how many bytes, and why."""

    def __init__(self) -> None:
        self.since: float | None = None  # Unix time of the first refusal of this wait
        self.needed_bytes = 0  # the largest result refused during this wait
        self.error = ""
        self._next_probe = 0.0

    @property
    def waiting(self) -> bool:
        return self.since is not None

    def refused(self, nbytes: int, exc: BaseException) -> None:
        """A write was refused for want of space: wait (logged once per wait)."""
        if self.since is None:
            self.since = time.time()
            log.error(
                "jobs: the disk is full (%s): waiting for space; no item starts until a "
                "result of %d bytes fits",
                exc,
                nbytes,
            )
        self.needed_bytes = max(self.needed_bytes, nbytes)
        self.error = str(exc)
        self._next_probe = time.monotonic() + PROBE_EVERY_S

    async def over(self, store: JobStorage) -> bool:
        """Whether items may start: not waiting, or the store has room again (probed at most
        every PROBE_EVERY_S; a probe that fails for another reason keeps the wait)."""
        if self.since is None:
            return True
        if time.monotonic() < self._next_probe:
            return False
        self._next_probe = time.monotonic() + PROBE_EVERY_S
        try:
            room = await asyncio.to_thread(store.room_for, self.needed_bytes)
        except Exception as exc:  # a stopped database, say: the runner reports that itself
            log.debug("jobs: probing for space failed: %s", exc)
            return False
        if room:
            log.info(
                "jobs: space is back after %.0f s: items start again", time.time() - self.since
            )
            self.since, self.needed_bytes, self.error = None, 0, ""
        return room

    def report(self) -> FullDiskReport | None:
        """The job object's and /health's `waiting_for_space`: null unless waiting."""
        if self.since is None:
            return None
        return {"since": self.since, "needed_bytes": self.needed_bytes, "error": self.error}


# ---------------------------------------------------------------- the SQLite store's data directory


def fill_file(path: Path, nbytes: int) -> None:
    """Write nbytes of zeros to path and flush them: on a full disk this raises ENOSPC (a sparse
    or merely allocated file would not take the room for real on every filesystem)."""
    block = b"\0" * 65536
    with open(path, "wb") as out:
        left = nbytes
        while left > 0:
            left -= out.write(block[: min(left, len(block))])
        out.flush()
        os.fsync(out.fileno())


def keep_reserve(data_dir: Path) -> bool:
    """Have the reserve file in place; False if the disk has no room for it."""
    path = data_dir / RESERVE_NAME
    if path.is_file() and path.stat().st_size >= RESERVE_BYTES:
        return True
    try:
        fill_file(path, RESERVE_BYTES)
    except OSError as exc:
        path.unlink(missing_ok=True)
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return False
    return True


def drop_reserve(data_dir: Path) -> bool:
    """Remove the reserve file; whether there was one to free."""
    path = data_dir / RESERVE_NAME
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def room_in(data_dir: Path, nbytes: int) -> bool:
    """Whether the reserve and then nbytes more (and a margin) fit in data_dir, tried by
    writing them."""
    if not keep_reserve(data_dir):
        return False
    probe = data_dir / PROBE_NAME
    try:
        fill_file(probe, nbytes + PROBE_MARGIN_BYTES)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def refused_item_end(attempts: int, exc: BaseException) -> InsufficientStorage | None:
    """How an item whose result a full disk refused ends: back to the queue (None), or failed
    once it has had FULL_DISK_ATTEMPTS attempts."""
    if attempts < FULL_DISK_ATTEMPTS:
        return None
    return InsufficientStorage(
        f"writing the result failed after {attempts} attempts, the disk full each time ({exc})"
    )
