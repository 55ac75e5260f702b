"""A SQLite job store's data directory: its lock, its database connection, its result files.

`SqliteQueue` (`sqlite_queue`) adds the moves of items, `SqliteJobStore` (`sqlite_store`) the
jobs; this part holds the directory:

    <data dir>/jobs.lock               flock'ed while a server uses it (a second one is refused)
    <data dir>/jobs.sqlite3            jobs and items (`sqlite_schema`)
    <data dir>/jobs/<job id>/<n>.<fmt> the result of item n, once it is done, written atomically
    <data dir>/jobs.reserve            room kept for recording items' ends on a full disk (`full_disk`)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from supervisor.database import StoreCorrupt, StoreLocked
from supervisor.jobs import full_disk
from supervisor.jobs.sqlite_schema import DB_NAME, LOCK_NAME, lock_holder, prepare

RESULTS_DIR = "jobs"
TMP_SUFFIX = ".tmp"


class SqliteDataDir:
    def __init__(self, data_dir: Path | str, owner: str = "") -> None:
        """`owner` ("port 9194") goes into the lock file after our pid, for a second server to name."""
        self.data_dir = Path(data_dir)
        self.results = self.data_dir / RESULTS_DIR
        self.results.mkdir(parents=True, exist_ok=True)
        self._lock_file = (self.data_dir / LOCK_NAME).open("a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            holder = lock_holder(self.data_dir) or "unknown"
            raise StoreLocked(
                f"another server ({holder}) is using the job store in {self.data_dir}"
            ) from None
        self._lock_file.truncate(0)
        self._lock_file.write(", ".join(p for p in (f"pid {os.getpid()}", owner) if p) + "\n")
        self._lock_file.flush()
        self.lock = threading.Lock()
        self.db = sqlite3.connect(
            self.data_dir / DB_NAME, isolation_level=None, check_same_thread=False
        )
        try:
            prepare(self.db)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            self._lock_file.close()
            path = self.data_dir / DB_NAME
            raise StoreCorrupt(f"the job database {path} is damaged: {exc}") from None
        full_disk.keep_reserve(
            self.data_dir
        )  # none on a disk already full: made once there is room

    def close(self) -> None:
        with self.lock:
            self.db.close()
            self._lock_file.close()  # releases the flock

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT under the lock (ROLLBACK if anything raises)."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    # ------------------------------------------------------------ result files

    def result_path(self, job_id: str, n: int, fmt: str) -> Path:
        return self.results / job_id / f"{n}.{fmt}"

    def read_result(self, job_id: str, n: int, fmt: str) -> bytes | None:
        """A done item's result file, or None if it is gone from the data directory."""
        try:
            return self.result_path(job_id, n, fmt).read_bytes()
        except FileNotFoundError:
            return None

    def read_beside(self, job_id: str, n: int, extension: str) -> bytes | None:
        """A file written beside a done item's result (its captions), or None if it has none."""
        return self.read_result(job_id, n, extension)

    def _write_result(self, path: Path, data: bytes) -> None:
        """Temporary file, flushed, renamed over the final name, directory flushed."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        try:
            with open(tmp, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind
            raise
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def release_reserve(self) -> bool:
        """Free the reserve file (`full_disk`), so that SQLite can record items' ends on a full disk."""
        return full_disk.drop_reserve(self.data_dir)

    def room_for(self, nbytes: int) -> bool:
        """Whether the reserve and a result of nbytes fit in the data directory again."""
        return full_disk.room_in(self.data_dir, nbytes)
