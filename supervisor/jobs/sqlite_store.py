"""The job store in SQLite: one server's jobs, in its data directory (`--store sqlite`, the default).

    <data dir>/jobs.sqlite3            jobs and items (`sqlite_schema`)
    <data dir>/jobs/<job id>/<n>.<fmt> the result of item n, once it is done
    <data dir>/jobs.reserve            room kept for recording items' ends on a full disk (`full_disk`)

The jobs, their items' views and their callbacks are here; the moves of an item and recovery at
start are the queue's (`sqlite_queue`), the directory, its lock and its files `sqlite_data_dir`'s.

Every method takes the store's lock. A commit is flushed to disk before it returns
(synchronous=FULL), so a job acknowledged to a client survives a power cut, not only a crash of
the process.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid

from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.sqlite_queue import SqliteQueue
from supervisor.jobs.storage import (
    UNFINISHED,
    CallbackDue,
    NewItem,
    reused_key,
    scoped_key,
)
from supervisor.jobs.views import PROGRESS_SQL, ItemView, JobView, item_view, job_view
from supervisor.tenants import DEFAULT_OWNER

# A query limited to one owner's jobs, or (NULL: an admin) to none; takes the owner twice.
OWNED = "(? IS NULL OR owner = ?)"


class SqliteJobStore(SqliteQueue):
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
