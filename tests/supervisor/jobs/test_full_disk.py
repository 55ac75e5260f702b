"""Waiting for space (supervisor/jobs/full_disk.py): the SQLite store's reserve and probe on a real,
full tmpfs, and how an item whose result a full disk refused ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.errors import InsufficientStorage
from supervisor.jobs import full_disk
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem
from tests.helpers.tmpfs import fill, mount_tmpfs


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with mount_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


def test_the_reserve_records_ends_on_a_full_disk_and_the_probe_sees_space_return(
    disk: Path,
) -> None:
    store = SqliteJobStore(disk)
    try:
        assert (disk / full_disk.RESERVE_NAME).stat().st_size == full_disk.RESERVE_BYTES
        job_id, _ = store.create(
            [NewItem({"input": f"item {i}"}, None, "wav") for i in range(3)], "sha"
        )
        claimed = store.claim([item.key for item in store.queued(3)])
        filler = fill(disk)
        assert not store.room_for(1024)
        assert store.release_reserve() and not store.release_reserve()
        # With the reserve's room, both ends are recorded on the otherwise full disk.
        store.release((job_id, 0))
        store.fail((job_id, 1), InsufficientStorage("full"))
        states = [item["state"] for item in store.job(job_id)["items"]]  # type: ignore[index]
        assert len(claimed) == 3 and states == ["queued", "failed", "running"]
        assert not store.room_for(1024)  # the reserve cannot be made again yet
        filler.unlink()
        assert store.room_for(100 * 1024)
        assert (disk / full_disk.RESERVE_NAME).stat().st_size == full_disk.RESERVE_BYTES
        assert not list(disk.glob("*.tmp"))
    finally:
        store.close()


def test_an_item_refused_for_space_goes_back_until_its_last_attempt() -> None:
    full = OSError(28, "No space left on device")
    assert full_disk.refused_item_end(1, full) is None
    assert full_disk.refused_item_end(full_disk.FULL_DISK_ATTEMPTS - 1, full) is None
    end = full_disk.refused_item_end(full_disk.FULL_DISK_ATTEMPTS, full)
    assert isinstance(end, InsufficientStorage) and end.code == "insufficient_storage"
    assert f"after {full_disk.FULL_DISK_ATTEMPTS} attempts" in end.message
