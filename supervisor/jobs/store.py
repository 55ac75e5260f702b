"""Durable jobs: a SQLite store (write-ahead log) with exactly-once item states and atomic result files.

One server's store, the default (`--store sqlite`); `pg_store` is the one many servers share. Both
implement `storage.JobStorage` and show jobs and items through `job_view` and `item_view`
below, so a field added to the API is added once (and a column to each store's schema).

    <data dir>/jobs.sqlite3            jobs and items (WAL mode, synchronous=FULL)
    <data dir>/jobs/<job id>/<n>.<fmt> the result of item n, once it is done
    <data dir>/jobs.reserve            room kept for recording items' ends on a full disk (`space`)

An item's states, and who moves it:

    queued  --claim (runner)-->    running
    running --finish (runner)-->   done
    running --fail (runner)-->     failed
    running --release (runner)-->  queued, or cancelled if its job was cancelled meanwhile (an
                                   item a drain hands back: its attempt not counted)
    queued  --cancel (DELETE)-->   cancelled

Only the runner moves an item out of `running`, and every move is a conditional UPDATE on the
state it expects, so no item is ever finished twice. `finish` writes the result to a temporary
file, flushes it, renames it to its final name, flushes the directory, and only then commits
`done`, all under one lock. A crash can therefore leave an item `running` with its final file
already in place; `recover` (at start) marks such an item done, ends the `running` items of
a cancelled job `cancelled`, puts every other `running` item back to `queued`, and removes
temporary files. So after a crash or a restart unfinished
items run again, finished ones are never redone, and a file under a final name is always whole.

Every method is synchronous and takes the store's lock: the server calls them through
`asyncio.to_thread`, tests and tools call them directly. A commit is flushed to disk before it
returns (synchronous=FULL), so a job acknowledged to a client survives a power cut, not only a
crash of the process.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.errors import Conflict, QualityFailed, ServerError
from supervisor.jobs import space
from supervisor.jobs.schedule import JobSchedule, rfc3339
from supervisor.jobs.timeline import Pending, item_audio_s
from supervisor.tenants import DEFAULT_OWNER

DB_NAME = "jobs.sqlite3"
LOCK_NAME = "jobs.lock"
RESULTS_DIR = "jobs"
TMP_SUFFIX = ".tmp"
ITEM_STATES = ("queued", "running", "done", "failed", "cancelled")
ENDED = ("done", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    idempotency_key TEXT UNIQUE,
    body_sha256 TEXT NOT NULL,
    created_at REAL NOT NULL,
    cancelled_at REAL
);
CREATE TABLE IF NOT EXISTS items (
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    client_id TEXT,
    request TEXT NOT NULL,
    format TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    seed INTEGER,
    audio_s REAL,
    qa TEXT,
    PRIMARY KEY (job_id, n)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_by_state ON items (state);
"""
# Columns added since the first release, as (table, column, declaration): `_migrate` adds those
# a database lacks, so an existing data directory keeps its jobs.
ADDED_COLUMNS = (
    ("jobs", "not_before", "REAL"),  # Unix seconds; NULL: at once
    ("jobs", "deadline", "REAL"),
    ("jobs", "callback_url", "TEXT"),
    ("jobs", "callback_state", "TEXT"),  # pending, delivered, failed; NULL: no callback
    ("jobs", "callback_attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("jobs", "callback_status", "INTEGER"),  # the last attempt's HTTP status; NULL: no answer
    ("jobs", "callback_error", "TEXT"),  # why the last attempt failed
    ("jobs", "callback_next_at", "REAL"),  # no attempt before this (the backoff)
    ("items", "est_audio_s", "REAL"),  # estimated audio, for the job's estimated finish
    ("items", "qa", "TEXT"),  # the quality checks' verdict (JSON); NULL: none recorded
    ("jobs", "owner", f"TEXT NOT NULL DEFAULT '{DEFAULT_OWNER}'"),  # supervisor.tenants
    ("jobs", "callback_secret", "TEXT"),  # the job's own; NULL: its owner's (never shown)
)
UNFINISHED = "('queued', 'running')"
# A query limited to one owner's jobs, or (NULL: an admin) to none; takes the owner twice.
OWNED = "(? IS NULL OR owner = ?)"


class StoreLocked(RuntimeError):
    """Another server holds this data directory's job store."""


class StoreCorrupt(RuntimeError):
    """The job database fails SQLite's quick check (or is not a database at all)."""


@dataclass(frozen=True)
class NewItem:
    """An item as submitted: its speech fields (without "id"), the client's id, its format."""

    request: dict[str, Any]
    client_id: str | None
    format: str
    est_audio_s: float | None = None  # estimated seconds of audio


@dataclass(frozen=True)
class CallbackDue:
    """A finished job whose callback is to be sent now."""

    job_id: str
    url: str
    attempts: int  # made so far
    owner: str = DEFAULT_OWNER  # whose secret signs it
    secret: str | None = field(default=None, repr=False)  # the job's own, in place of the owner's


@dataclass(frozen=True)
class Claimed:
    """An item the runner has taken: queued -> running."""

    job_id: str
    n: int
    request: dict[str, Any]
    format: str
    attempts: int  # before this claim (which counts one more in the store)
    owner: str = DEFAULT_OWNER  # the job's: whose voices and cache entries it uses

    @classmethod
    def from_row(cls, row: Any) -> Claimed:
        """From a row of `job_id, n, request, format, attempts, owner` (either store's)."""
        return cls(row["job_id"], row["n"], json.loads(row["request"]), row["format"],
                   row["attempts"], row["owner"])  # fmt: skip

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_id, self.n)


def scoped_key(owner: str, idempotency_key: str) -> str:
    """An Idempotency-Key as stored: one owner's key never finds another owner's job. (An owner
    id has no space; the key follows the first one.)"""
    return f"{owner} {idempotency_key}"


def body_digest(body: Any) -> str:
    """The same JSON, however it was spaced or ordered, gives the same digest."""
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def out_of_space(exc: BaseException) -> bool:
    """Whether a failed write means the disk (or the quota) is full: SQLite says so in words."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)


def error_record(error: ServerError) -> dict[str, Any]:
    """What an item keeps of the error it failed with: OpenAI's error object plus the HTTP status."""
    return {**error.to_body()["error"], "status": error.status}


# A job's progress: per item state, how many, the most attempts, the last end (%s: the job id).
PROGRESS_SQL = (
    "SELECT state, COUNT(*) AS count, MAX(attempts) AS attempted, MAX(finished_at) AS last_end "
    "FROM items WHERE job_id = %s GROUP BY state"
)


def job_view(
    row: Mapping[str, Any] | sqlite3.Row, progress_rows: Iterable[Sequence[Any]]
) -> dict[str, Any]:
    """A job as the API shows it, from its row and PROGRESS_SQL's rows (both stores use it)."""
    progress = {state: 0 for state in ITEM_STATES}
    started, last_end = False, None
    for state, count, attempted, finished_at in progress_rows:
        progress[state] = count
        started = started or attempted > 0 or state != "queued"
        if finished_at is not None:
            last_end = max(last_end or 0.0, finished_at)
    unfinished = progress["queued"] + progress["running"]
    if row["cancelled_at"] is not None:
        state = "cancelled"
    elif unfinished:
        state = "running" if started else "queued"
    else:
        state = "failed" if progress["failed"] else "completed"
    return {
        "id": row["id"],
        "object": "job",
        "owner": row["owner"],  # whose job: an admin key's listing shows every owner's
        "state": state,
        "created_at": row["created_at"],
        "finished_at": None if unfinished else last_end,
        "cancelled_at": row["cancelled_at"],
        "progress": {"total": sum(progress.values()), **progress},
        "not_before": rfc3339(row["not_before"]),
        "deadline": rfc3339(row["deadline"]),
        "callback_url": row["callback_url"],
        "callback": None
        if row["callback_state"] is None
        else {
            "state": row["callback_state"],
            "attempts": row["callback_attempts"],
            "last_status": row["callback_status"],
            "last_error": row["callback_error"],
        },
    }


def item_view(job_id: str, item: Mapping[str, Any] | sqlite3.Row) -> dict[str, Any]:
    """An item as the API shows it, from its row (both stores use it)."""
    return {
        "index": item["n"],
        "id": item["client_id"],
        "state": item["state"],
        "attempts": item["attempts"],
        "format": item["format"],
        "started_at": item["started_at"],
        "finished_at": item["finished_at"],
        "error": json.loads(item["error"]) if item["error"] else None,
        "seed": item["seed"],
        "audio_seconds": item["audio_s"],
        "qa": json.loads(item["qa"]) if item["qa"] else None,
        "audio_url": f"/v1/jobs/{job_id}/items/{item['n']}/audio"
        if item["state"] == "done"
        else None,
    }


def lock_holder(data_dir: Path | str) -> str | None:
    """Who holds this data directory ("pid 123, port 9194"), or None when no server does."""
    path = Path(data_dir) / LOCK_NAME
    try:
        probe = path.open("r")
    except FileNotFoundError:
        return None
    with probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return probe.read().strip() or "another process"
        fcntl.flock(probe, fcntl.LOCK_UN)
    return None


class JobStore:
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
            self._open()
        except sqlite3.DatabaseError as exc:
            self.db.close()
            self._lock_file.close()
            path = self.data_dir / DB_NAME
            raise StoreCorrupt(f"the job database {path} is damaged: {exc}") from None
        space.keep_reserve(self.data_dir)  # none on a disk already full: made once there is room

    def _open(self) -> None:
        """Check the file, then set it up; a damaged one raises sqlite3.DatabaseError."""
        self.db.row_factory = sqlite3.Row
        # quick_check reads every page (O(size), no index cross-checks): a damaged file is found
        # at start, not by the first jobs request.
        verdict = [row[0] for row in self.db.execute("PRAGMA quick_check(5)")]
        if verdict != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(verdict))
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns an older database lacks, and estimate the unfinished items' audio.
        Jobs stored before owners existed are the default owner's, and so are their keys."""
        with self.transaction() as db:
            for table, column, declaration in ADDED_COLUMNS:
                have = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    if (table, column) == ("jobs", "owner"):
                        db.execute("UPDATE jobs SET idempotency_key = ? || idempotency_key "
                                   "WHERE idempotency_key IS NOT NULL", (scoped_key(DEFAULT_OWNER, ""),))  # fmt: skip
            db.execute("CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, seq)")
            rows = db.execute(
                "SELECT job_id, n, request FROM items "
                f"WHERE est_audio_s IS NULL AND state IN {UNFINISHED}"
            ).fetchall()
            for row in rows:
                request = json.loads(row["request"])
                estimate = item_audio_s(
                    str(request.get("input", "")), request.get("speed"), request.get("duration")
                )
                db.execute("UPDATE items SET est_audio_s = ? WHERE job_id = ? AND n = ?",
                           (estimate, row["job_id"], row["n"]))  # fmt: skip

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

    # ------------------------------------------------------------ jobs

    def create(
        self,
        items: list[NewItem],
        body_sha256: str,
        idempotency_key: str | None = None,
        schedule: JobSchedule | None = None,
        owner: str = DEFAULT_OWNER,
    ) -> tuple[str, bool]:
        """Store `owner`'s job; (its id, True). With a key the owner already used for the same
        body: (that job, False). The same key with a different body raises Conflict.
        """
        now = time.time()
        stored_key = None if idempotency_key is None else scoped_key(owner, idempotency_key)
        with self.transaction() as db:
            if stored_key is not None:
                row = db.execute(
                    "SELECT id, body_sha256 FROM jobs WHERE idempotency_key = ?", (stored_key,)
                ).fetchone()
                if row is not None:
                    if row["body_sha256"] != body_sha256:
                        error = Conflict(
                            f"Idempotency-Key {idempotency_key!r} was already used for job {row['id']} with a different "
                            "body; use a new key for a different job.", param="Idempotency-Key")  # fmt: skip
                        error.code = "idempotency_key_reused"
                        raise error
                    return row["id"], False
            job_id = "job_" + uuid.uuid4().hex
            when = schedule or JobSchedule()
            db.execute(
                "INSERT INTO jobs (id, idempotency_key, body_sha256, created_at, not_before, "
                "deadline, callback_url, callback_state, owner, callback_secret) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, stored_key, body_sha256, now, when.not_before, when.deadline,
                 when.callback_url, None if when.callback_url is None else "pending", owner,
                 when.callback_secret),
            )  # fmt: skip
            db.executemany(
                "INSERT INTO items (job_id, n, client_id, request, format, state, est_audio_s) "
                "VALUES (?, ?, ?, ?, ?, 'queued', ?)",
                (
                    (job_id, n, item.client_id, json.dumps(item.request), item.format,
                     item.est_audio_s)
                    for n, item in enumerate(items)
                ),
            )  # fmt: skip
        return job_id, True

    def job(
        self, job_id: str, with_items: bool = True, owner: str | None = None
    ) -> dict[str, Any] | None:
        """The job as the API shows it, or None (also when `owner` is given and not its own)."""
        with self.lock:
            row = self.db.execute(
                f"SELECT * FROM jobs WHERE id = ? AND {OWNED}",
                (job_id, owner, owner),
            ).fetchone()
            if row is None:
                return None
            view = self._view(row)
            if with_items:
                items = self.db.execute(
                    "SELECT * FROM items WHERE job_id = ? ORDER BY n", (job_id,)
                ).fetchall()
                view["items"] = [item_view(job_id, item) for item in items]
        return view

    def list(
        self, limit: int, after: str | None = None, owner: str | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Jobs newest first, without their items: (a page of at most `limit`, whether more
        follow); only `owner`'s, when given."""
        with self.lock:
            seq = 2**63 - 1
            if after is not None:
                anchor = self.db.execute(
                    f"SELECT seq FROM jobs WHERE id = ? AND {OWNED}", (after, owner, owner)
                ).fetchone()
                if anchor is None:
                    return [], False
                seq = anchor["seq"]
            rows = self.db.execute(
                f"SELECT * FROM jobs WHERE seq < ? AND {OWNED} ORDER BY seq DESC LIMIT ?",
                (seq, owner, owner, limit + 1),
            ).fetchall()
            return [self._view(row) for row in rows[:limit]], len(rows) > limit

    def _view(self, row: sqlite3.Row) -> dict[str, Any]:
        """A job's fields and progress (the lock is held)."""
        return job_view(row, self.db.execute(PROGRESS_SQL.replace("%s", "?"), (row["id"],)))

    def cancel(self, job_id: str, owner: str | None = None) -> bool:
        """Cancel a job: its queued items end `cancelled`; running ones are the runner's to stop.
        False: no such job (of `owner`'s, when given)."""
        now = time.time()
        with self.transaction() as db:
            found = db.execute(f"SELECT 1 FROM jobs WHERE id = ? AND {OWNED}",
                               (job_id, owner, owner)).fetchone()  # fmt: skip
            if found is None:
                return False
            # A job whose every item has ended is left as it is: there is nothing to cancel.
            db.execute("UPDATE jobs SET cancelled_at = COALESCE(cancelled_at, ?) WHERE id = ? AND EXISTS "
                       "(SELECT 1 FROM items WHERE job_id = ? AND state IN ('queued', 'running'))", (now, job_id, job_id))  # fmt: skip
            db.execute(
                "UPDATE items SET state = 'cancelled', finished_at = ? WHERE job_id = ? AND state = 'queued'",
                (now, job_id),
            )
        return True

    def item(self, job_id: str, n: int, owner: str | None = None) -> dict[str, Any] | None:
        """Item n of a job (of `owner`'s, when given), or None."""
        with self.lock:
            row = self.db.execute(
                "SELECT i.* FROM items i JOIN jobs j ON j.id = i.job_id WHERE i.job_id = ? "
                f"AND i.n = ? AND {OWNED}",
                (job_id, n, owner, owner),
            ).fetchone()
        return None if row is None else item_view(job_id, row)

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
        """Free the reserve file (`space`), so that SQLite can record items' ends on a full disk."""
        return space.drop_reserve(self.data_dir)

    def room_for(self, nbytes: int) -> bool:
        """Whether the reserve and a result of nbytes fit in the data directory again."""
        return space.room_in(self.data_dir, nbytes)

    # ------------------------------------------------------------ the runner's moves
    # (`list` below is the builtin: in this class the name is the method above)

    def queued(self, limit: int, now: float | None = None) -> builtins.list[Claimed]:
        """Up to `limit` queued items of jobs whose `not_before` has come (not claimed yet): the
        earliest deadline first, jobs without one last, then the oldest job, in item order."""
        now = time.time() if now is None else now
        with self.lock:
            rows = self.db.execute(
                "SELECT i.job_id, i.n, i.request, i.format, i.attempts, j.owner "
                "FROM items i JOIN jobs j ON j.id = i.job_id "
                "WHERE i.state = 'queued' AND (j.not_before IS NULL OR j.not_before <= ?) "
                "ORDER BY j.deadline IS NULL, j.deadline, j.seq, i.n LIMIT ?",
                (now, limit),
            ).fetchall()
        return [Claimed.from_row(r) for r in rows]

    def backlog(self) -> builtins.list[Pending]:
        """Every job with items still to run (cancelled ones aside), with their estimated audio."""
        with self.lock:
            rows = self.db.execute(
                "SELECT j.id, j.seq, j.not_before, j.deadline, "
                "SUM(COALESCE(i.est_audio_s, 0)) AS audio_s "
                f"FROM jobs j JOIN items i ON i.job_id = j.id WHERE i.state IN {UNFINISHED} "
                "AND j.cancelled_at IS NULL GROUP BY j.id"
            ).fetchall()
        return [
            Pending(r["id"], r["seq"], r["not_before"], r["deadline"], r["audio_s"]) for r in rows
        ]

    def next_start(self, now: float) -> float | None:
        """The earliest `not_before` still ahead of a job with queued items, or None."""
        with self.lock:
            row = self.db.execute(
                "SELECT MIN(j.not_before) FROM jobs j "
                "WHERE j.not_before > ? AND j.cancelled_at IS NULL "
                "AND EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state = 'queued')",
                (now,),
            ).fetchone()
        return None if row[0] is None else float(row[0])

    # ------------------------------------------------------------ callbacks

    def callbacks_due(self, now: float) -> builtins.list[CallbackDue]:
        """Jobs that have ended (no item queued or running) whose callback is due by `now`."""
        with self.lock:
            rows = self.db.execute(
                "SELECT id, callback_url, callback_attempts, owner, callback_secret FROM jobs j "
                "WHERE callback_state = 'pending' "
                "AND (callback_next_at IS NULL OR callback_next_at <= ?) AND NOT EXISTS "
                f"(SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state IN {UNFINISHED}) "
                "ORDER BY seq",
                (now,),
            ).fetchall()
        return [
            CallbackDue(
                r["id"], r["callback_url"], r["callback_attempts"], r["owner"], r["callback_secret"]
            )
            for r in rows
        ]

    def callbacks_release(self, job_ids: builtins.list[str], now: float) -> None:
        """Nothing to give back: with one server, `callbacks_due` takes nothing."""

    def callback_attempted(
        self, job_id: str, status: int | None, error: str | None, state: str, next_at: float | None
    ) -> None:
        """Record one attempt: its HTTP status (None: no answer), why it failed, and the callback's
        new state (pending: try again at next_at; delivered; failed: no more attempts)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE jobs SET callback_attempts = callback_attempts + 1, callback_status = ?, "
                "callback_error = ?, callback_state = ?, callback_next_at = ? "
                "WHERE id = ? AND callback_state = 'pending'",
                (status, error, state, next_at, job_id),
            )

    def claim(self, keys: builtins.list[tuple[str, int]]) -> set[tuple[str, int]]:
        """queued -> running, one attempt more; returns the keys that were still queued."""
        now, claimed = time.time(), set()
        with self.transaction() as db:
            for job_id, n in keys:
                changed = db.execute(
                    "UPDATE items SET state = 'running', attempts = attempts + 1, started_at = ? "
                    "WHERE job_id = ? AND n = ? AND state = 'queued'", (now, job_id, n)).rowcount  # fmt: skip
                if changed:
                    claimed.add((job_id, n))
        return claimed

    def renew(self, keys: builtins.list[tuple[str, int]]) -> set[tuple[str, int]]:
        """Every running item stays ours: one server holds the database (the flock)."""
        return set(keys)

    def expire(self) -> int:
        """No leases to expire: `recover` at start puts back what a crash left running."""
        return 0

    def finish(
        self,
        key: tuple[str, int],
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: dict[str, Any] | None = None,
    ) -> bool:
        """Write the result atomically, then running -> done. False if the item was not running.
        `beside`: more files by extension (captions), written before the audio, so that an item
        whose audio exists after a crash (`recover`) has them too. `qa`: its quality checks."""
        job_id, n = key
        with self.lock:
            row = self.db.execute(
                "SELECT state FROM items WHERE job_id = ? AND n = ?", (job_id, n)
            ).fetchone()
            if row is None or row["state"] != "running":
                return False
            written = [self.result_path(job_id, n, ext) for ext in [*(beside or {}), fmt]]
            try:
                for path, content in zip(written, [*(beside or {}).values(), data]):
                    self._write_result(path, content)
                self.db.execute(
                    "UPDATE items SET state = 'done', finished_at = ?, error = NULL, seed = ?, audio_s = ?, "
                    "qa = ? WHERE job_id = ? AND n = ? AND state = 'running'",
                    (time.time(), seed, round(audio_s, 3), json.dumps(qa) if qa else None, job_id, n))  # fmt: skip
            except BaseException:  # not done: its files would hold space (and `recover` finish it)
                for path in written:
                    path.unlink(missing_ok=True)
                raise
        return True

    def fail(self, key: tuple[str, int], error: ServerError, claimed: bool = True) -> bool:
        """running -> failed (or queued -> failed, claimed=False: invalid before it ran), with the
        error (and the quality checks, for audio that failed them)."""
        job_id, n = key
        qa = json.dumps(error.qa) if isinstance(error, QualityFailed) and error.qa else None
        with self.transaction() as db:
            return bool(db.execute(
                "UPDATE items SET state = 'failed', finished_at = ?, error = ?, qa = ?, "
                "attempts = attempts + ? WHERE job_id = ? AND n = ? AND state = ?",
                (time.time(), json.dumps(error_record(error)), qa, 0 if claimed else 1, job_id, n, "running" if claimed else "queued"),
            ).rowcount)  # fmt: skip

    def release(self, key: tuple[str, int], counted: bool = True) -> str | None:
        """running -> queued (it will run again), or -> cancelled if its job was cancelled. The new
        state. counted=False: its claim is not counted as an attempt (a drain handed it back)."""
        job_id, n = key
        now = time.time()
        with self.transaction() as db:
            cancelled = db.execute(
                "SELECT cancelled_at FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            state = (
                "cancelled"
                if cancelled is not None and cancelled["cancelled_at"] is not None
                else "queued"
            )
            changed = db.execute(
                "UPDATE items SET state = ?, finished_at = ?, attempts = MAX(attempts - ?, 0) "
                "WHERE job_id = ? AND n = ? AND state = 'running'",
                (state, now if state == "cancelled" else None, 0 if counted else 1, job_id, n)).rowcount  # fmt: skip
        return state if changed else None

    def recover(self) -> tuple[int, int]:
        """After a crash or a restart: running items whose final file exists -> done, those of a
        cancelled job -> cancelled, others -> queued.

            Also removes temporary files and result folders no job owns. Returns (done, queued).
        """
        num_done = num_queued = 0
        with self.transaction() as db:
            rows = db.execute(
                "SELECT i.job_id, i.n, i.format, j.cancelled_at FROM items i "
                "JOIN jobs j ON j.id = i.job_id WHERE i.state = 'running'"
            ).fetchall()
            for row in rows:
                path = self.result_path(row["job_id"], row["n"], row["format"])
                if path.is_file():  # renamed into place; the commit of `done` did not happen
                    db.execute("UPDATE items SET state = 'done', finished_at = ? WHERE job_id = ? AND n = ?",
                               (path.stat().st_mtime, row["job_id"], row["n"]))  # fmt: skip
                    num_done += 1
                elif (
                    row["cancelled_at"] is not None
                ):  # cancelled just before the stop: not run again
                    db.execute(
                        "UPDATE items SET state = 'cancelled', finished_at = ? "
                        "WHERE job_id = ? AND n = ?",
                        (row["cancelled_at"], row["job_id"], row["n"]),
                    )
                else:
                    db.execute(
                        "UPDATE items SET state = 'queued' WHERE job_id = ? AND n = ?",
                        (row["job_id"], row["n"]),
                    )
                    num_queued += 1
            known = {row["id"] for row in db.execute("SELECT id FROM jobs")}
        for folder in self.results.iterdir():
            if folder.name not in known:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for tmp in folder.glob(f".*{TMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)
        return num_done, num_queued

    def sweep(self, retention_s: float, now: float | None = None) -> builtins.list[str]:
        """Remove jobs whose every item ended more than retention_s ago, with their results."""
        cutoff = (time.time() if now is None else now) - retention_s
        with self.transaction() as db:
            old = [row["job_id"] for row in db.execute(
                "SELECT job_id FROM items GROUP BY job_id "
                "HAVING SUM(state IN ('queued', 'running')) = 0 AND MAX(COALESCE(finished_at, 0)) < ?", (cutoff,))]  # fmt: skip
            db.executemany("DELETE FROM jobs WHERE id = ?", ((job_id,) for job_id in old))
        for job_id in old:
            shutil.rmtree(self.results / job_id, ignore_errors=True)
        return old
