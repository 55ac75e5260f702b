"""The job store in SQLite: one server's jobs, in its data directory (`--store sqlite`, the default).

    <data dir>/jobs.sqlite3            jobs and items (`sqlite_schema`)
    <data dir>/jobs/<job id>/<n>.<fmt> the result of item n, once it is done
    <data dir>/jobs.reserve            room kept for recording items' ends on a full disk (`space`)

Every move of an item is a conditional UPDATE on the state it expects (`storage`). `finish`
writes the result to a temporary file, flushes it, renames it to its final name, flushes the
directory, and only then commits `done`, all under one lock. A crash can therefore leave an item
`running` with its final file already in place; `recover` (at start) marks such an item done,
ends the `running` items of a cancelled job `cancelled`, puts every other `running` item back to
`queued`, and removes temporary files. So after a crash or a restart unfinished items run again,
finished ones are never redone, and a file under a final name is always whole.

Every method takes the store's lock. A commit is flushed to disk before it returns
(synchronous=FULL), so a job acknowledged to a client survives a power cut, not only a crash of
the process.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import uuid

from supervisor.errors import QualityFailed, ServerError
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.sqlite_data_dir import TMP_SUFFIX, SqliteDataDir
from supervisor.jobs.storage import (
    UNFINISHED,
    CallbackDue,
    Claimed,
    Key,
    NewItem,
    error_record,
    reused_key,
    scoped_key,
)
from supervisor.jobs.timeline import Pending
from supervisor.jobs.views import PROGRESS_SQL, ItemView, JobView, item_view, job_view
from supervisor.speech.quality import QaSummary
from supervisor.tenants import DEFAULT_OWNER

# A query limited to one owner's jobs, or (NULL: an admin) to none; takes the owner twice.
OWNED = "(? IS NULL OR owner = ?)"


class SqliteJobStore(SqliteDataDir):
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
                        raise reused_key(str(idempotency_key), row["id"])
                    return row["id"], False
            job_id = "job_" + uuid.uuid4().hex
            when = schedule or JobSchedule()
            db.execute(
                "INSERT INTO jobs (id, idempotency_key, body_sha256, created_at, not_before, "
                "deadline, callback_url, callback_state, owner, callback_secret) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    stored_key,
                    body_sha256,
                    now,
                    when.not_before,
                    when.deadline,
                    when.callback_url,
                    None if when.callback_url is None else "pending",
                    owner,
                    when.callback_secret,
                ),
            )
            db.executemany(
                "INSERT INTO items (job_id, n, client_id, request, format, state, est_audio_s) "
                "VALUES (?, ?, ?, ?, ?, 'queued', ?)",
                (
                    (
                        job_id,
                        n,
                        item.client_id,
                        json.dumps(item.request),
                        item.format,
                        item.est_audio_s,
                    )
                    for n, item in enumerate(items)
                ),
            )
        return job_id, True

    def job(self, job_id: str, with_items: bool = True, owner: str | None = None) -> JobView | None:
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

    def jobs_page(
        self, limit: int, after: str | None = None, owner: str | None = None
    ) -> tuple[list[JobView], bool]:
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

    def _view(self, row: sqlite3.Row) -> JobView:
        """A job's fields and progress (the lock is held)."""
        return job_view(row, self.db.execute(PROGRESS_SQL.replace("%s", "?"), (row["id"],)))

    def cancel(self, job_id: str, owner: str | None = None) -> bool:
        """Cancel a job: its queued items end `cancelled`; running ones are the runner's to stop.
        False: no such job (of `owner`'s, when given)."""
        now = time.time()
        with self.transaction() as db:
            found = db.execute(
                f"SELECT 1 FROM jobs WHERE id = ? AND {OWNED}", (job_id, owner, owner)
            ).fetchone()
            if found is None:
                return False
            # A job whose every item has ended is left as it is: there is nothing to cancel.
            db.execute(
                "UPDATE jobs SET cancelled_at = COALESCE(cancelled_at, ?) WHERE id = ? AND EXISTS "
                "(SELECT 1 FROM items WHERE job_id = ? AND state IN ('queued', 'running'))",
                (now, job_id, job_id),
            )
            db.execute(
                "UPDATE items SET state = 'cancelled', finished_at = ? WHERE job_id = ? AND state = 'queued'",
                (now, job_id),
            )
        return True

    def item(self, job_id: str, n: int, owner: str | None = None) -> ItemView | None:
        """Item n of a job (of `owner`'s, when given), or None."""
        with self.lock:
            row = self.db.execute(
                "SELECT i.* FROM items i JOIN jobs j ON j.id = i.job_id WHERE i.job_id = ? "
                f"AND i.n = ? AND {OWNED}",
                (job_id, n, owner, owner),
            ).fetchone()
        return None if row is None else item_view(job_id, row)

    # ------------------------------------------------------------ the runner's moves

    def queued(self, limit: int, now: float | None = None) -> list[Claimed]:
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

    def backlog(self) -> list[Pending]:
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

    def callbacks_due(self, now: float) -> list[CallbackDue]:
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

    def callbacks_release(self, job_ids: list[str], now: float) -> None:
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

    def claim(self, keys: list[Key]) -> set[Key]:
        """queued -> running, one attempt more; returns the keys that were still queued."""
        now, claimed = time.time(), set()
        with self.transaction() as db:
            for job_id, n in keys:
                changed = db.execute(
                    "UPDATE items SET state = 'running', attempts = attempts + 1, started_at = ? "
                    "WHERE job_id = ? AND n = ? AND state = 'queued'",
                    (now, job_id, n),
                ).rowcount
                if changed:
                    claimed.add((job_id, n))
        return claimed

    def renew(self, keys: list[Key]) -> set[Key]:
        """Every running item stays ours: one server holds the database (the flock)."""
        return set(keys)

    def expire(self) -> int:
        """No leases to expire: `recover` at start puts back what a crash left running."""
        return 0

    def finish(  # noqa: PLR0913  one column each of the row it writes: JobStorage.finish's signature
        self,
        key: Key,
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: QaSummary | None = None,
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
                    (
                        time.time(),
                        seed,
                        round(audio_s, 3),
                        json.dumps(qa) if qa else None,
                        job_id,
                        n,
                    ),
                )
            except BaseException:  # not done: its files would hold space (and `recover` finish it)
                for path in written:
                    path.unlink(missing_ok=True)
                raise
        return True

    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool:
        """running -> failed (or queued -> failed, claimed=False: invalid before it ran), with the
        error (and the quality checks, for audio that failed them)."""
        job_id, n = key
        qa = json.dumps(error.qa) if isinstance(error, QualityFailed) and error.qa else None
        with self.transaction() as db:
            return bool(
                db.execute(
                    "UPDATE items SET state = 'failed', finished_at = ?, error = ?, qa = ?, "
                    "attempts = attempts + ? WHERE job_id = ? AND n = ? AND state = ?",
                    (
                        time.time(),
                        json.dumps(error_record(error)),
                        qa,
                        0 if claimed else 1,
                        job_id,
                        n,
                        "running" if claimed else "queued",
                    ),
                ).rowcount
            )

    def release(self, key: Key, counted: bool = True) -> str | None:
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
                (state, now if state == "cancelled" else None, 0 if counted else 1, job_id, n),
            ).rowcount
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
                    db.execute(
                        "UPDATE items SET state = 'done', finished_at = ? WHERE job_id = ? AND n = ?",
                        (path.stat().st_mtime, row["job_id"], row["n"]),
                    )
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

    def sweep(self, retention_s: float, now: float | None = None) -> list[str]:
        """Remove jobs whose every item ended more than retention_s ago, with their results."""
        cutoff = (time.time() if now is None else now) - retention_s
        with self.transaction() as db:
            old = [
                row["job_id"]
                for row in db.execute(
                    "SELECT job_id FROM items GROUP BY job_id "
                    "HAVING SUM(state IN ('queued', 'running')) = 0 AND MAX(COALESCE(finished_at, 0)) < ?",
                    (cutoff,),
                )
            ]
            db.executemany("DELETE FROM jobs WHERE id = ?", ((job_id,) for job_id in old))
        for job_id in old:
            shutil.rmtree(self.results / job_id, ignore_errors=True)
        return old
