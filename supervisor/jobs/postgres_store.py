"""The job store in PostgreSQL: many servers share one queue, each item done exactly once.

Tables (schema in `database.MIGRATIONS`): `jobs`, `items`, `results`, the encoded audio of each
done item as bytea (a few KB to a few MB here), and `beside`, the files kept with a result
(an item's captions.srt and captions.vtt), committed with it. Results live in the database
rather than a shared directory so that every server reaches them with no shared file system to
set up, and so that a result and its item's `done` commit in one transaction: there is no
window in which one exists without the other, and nothing to reconcile after a crash.

`PostgresQueue` (`postgres_queue`) holds the runner's side: leases, claims and moves. This
module adds the API's side and the callback sender's.
"""

from __future__ import annotations

import json
import time
import uuid

from psycopg.errors import UniqueViolation
from psycopg.rows import DictRow

from supervisor.database import Connection
from supervisor.jobs.postgres_queue import PostgresQueue
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.storage import (
    UNFINISHED,
    CallbackDue,
    NewItem,
    reused_key,
    scoped_key,
)
from supervisor.jobs.views import PROGRESS_SQL, ItemView, JobView, item_view, job_view
from supervisor.tenants import DEFAULT_OWNER

# How long a server's claim on sending a callback lasts: longer than an attempt may take
# (--callback-timeout-s, 10 s by default), so the callback is never sent by two at once.
CALLBACK_CLAIM_S = 120.0
OWNED = "(%s::text IS NULL OR owner = %s)"  # as sqlite_store.OWNED


class PostgresJobStore(PostgresQueue):
    def close(self) -> None:
        """The pool belongs to the app (voices use it too): nothing of our own to close."""

    # ------------------------------------------------------------ jobs

    def create(
        self,
        items: list[NewItem],
        body_sha256: str,
        idempotency_key: str | None = None,
        schedule: JobSchedule | None = None,
        owner: str = DEFAULT_OWNER,
    ) -> tuple[str, bool]:
        """As SqliteJobStore.create. Two servers given one new key at once: the second insert fails on
        the key's uniqueness and answers the first one's job."""
        stored_key = None if idempotency_key is None else scoped_key(owner, idempotency_key)

        def existing(conn: Connection) -> str | None:
            row = conn.execute(
                "SELECT id, body_sha256 FROM jobs WHERE idempotency_key = %s", (stored_key,)
            ).fetchone()
            if row is None:
                return None
            if row["body_sha256"] != body_sha256:
                raise reused_key(str(idempotency_key), row["id"])
            return str(row["id"])

        def insert(conn: Connection) -> tuple[str, bool]:
            if idempotency_key is not None and (found := existing(conn)) is not None:
                return found, False
            job_id = "job_" + uuid.uuid4().hex
            when = schedule or JobSchedule()
            conn.execute(
                "INSERT INTO jobs (id, idempotency_key, body_sha256, created_at, not_before, "
                "deadline, callback_url, callback_state, owner, callback_secret) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    job_id,
                    stored_key,
                    body_sha256,
                    time.time(),
                    when.not_before,
                    when.deadline,
                    when.callback_url,
                    None if when.callback_url is None else "pending",
                    owner,
                    when.callback_secret,
                ),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO items (job_id, n, client_id, request, format, state, "
                    "est_audio_s) VALUES (%s, %s, %s, %s, %s, 'queued', %s)",
                    [
                        (
                            job_id,
                            n,
                            item.client_id,
                            json.dumps(item.request),
                            item.format,
                            item.est_audio_s,
                        )
                        for n, item in enumerate(items)
                    ],
                )
            return job_id, True

        try:
            return self.db.run(insert, retry=idempotency_key is not None)
        except UniqueViolation:
            found = self.db.run(existing)
            assert found is not None  # the row that violated the key
            return found, False

    def job(self, job_id: str, with_items: bool = True, owner: str | None = None) -> JobView | None:
        def read(conn: Connection) -> JobView | None:
            row = conn.execute(
                f"SELECT * FROM jobs WHERE id = %s AND {OWNED}", (job_id, owner, owner)
            ).fetchone()
            if row is None:
                return None
            view = self._view(conn, row)
            if with_items:
                items = conn.execute(
                    "SELECT * FROM items WHERE job_id = %s ORDER BY n", (job_id,)
                ).fetchall()
                view["items"] = [item_view(job_id, item) for item in items]
            return view

        return self.db.run(read)

    def jobs_page(
        self, limit: int, after: str | None = None, owner: str | None = None
    ) -> tuple[list[JobView], bool]:
        def read(conn: Connection) -> tuple[list[JobView], bool]:
            seq = 2**63 - 1
            if after is not None:
                anchor = conn.execute(
                    f"SELECT seq FROM jobs WHERE id = %s AND {OWNED}", (after, owner, owner)
                ).fetchone()
                if anchor is None:
                    return [], False
                seq = anchor["seq"]
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE seq < %s AND {OWNED} ORDER BY seq DESC LIMIT %s",
                (seq, owner, owner, limit + 1),
            ).fetchall()
            return [self._view(conn, row) for row in rows[:limit]], len(rows) > limit

        return self.db.run(read)

    @staticmethod
    def _view(conn: Connection, row: DictRow) -> JobView:
        progress = conn.execute(PROGRESS_SQL, (row["id"],)).fetchall()
        return job_view(
            row, ([r["state"], r["count"], r["attempted"], r["last_end"]] for r in progress)
        )

    def cancel(self, job_id: str, owner: str | None = None) -> bool:
        def cancel(conn: Connection) -> bool:
            now = time.time()
            found = conn.execute(
                f"SELECT 1 FROM jobs WHERE id = %s AND {OWNED}", (job_id, owner, owner)
            ).fetchone()
            if found is None:
                return False
            # A job whose every item has ended is left as it is: there is nothing to cancel.
            conn.execute(
                "UPDATE jobs SET cancelled_at = COALESCE(cancelled_at, %s) WHERE id = %s AND "
                "EXISTS (SELECT 1 FROM items WHERE job_id = %s AND state IN ('queued', 'running'))",
                (now, job_id, job_id),
            )
            conn.execute(
                "UPDATE items SET state = 'cancelled', finished_at = %s "
                "WHERE job_id = %s AND state = 'queued'",
                (now, job_id),
            )
            return True

        return self.db.run(cancel)

    def item(self, job_id: str, n: int, owner: str | None = None) -> ItemView | None:
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT i.* FROM items i JOIN jobs j ON j.id = i.job_id "
                f"WHERE i.job_id = %s AND i.n = %s AND {OWNED}",
                (job_id, n, owner, owner),
            ).fetchone()
        )
        return None if row is None else item_view(job_id, row)

    def read_result(self, job_id: str, n: int, fmt: str) -> bytes | None:
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT data FROM results WHERE job_id = %s AND n = %s", (job_id, n)
            ).fetchone()
        )
        return None if row is None else bytes(row["data"])

    def read_beside(self, job_id: str, n: int, extension: str) -> bytes | None:
        """A file kept beside a done item's result (its captions), or None if it has none."""
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT data FROM beside WHERE job_id = %s AND n = %s AND extension = %s",
                (job_id, n, extension),
            ).fetchone()
        )
        return None if row is None else bytes(row["data"])

    # ------------------------------------------------------------ callbacks

    def callbacks_due(self, now: float) -> list[CallbackDue]:
        """Jobs that have ended (no item queued or running) whose callback is due by `now`,
        taken by this server: each is put off by CALLBACK_CLAIM_S, so another server's pass
        does not send it too. The attempt's record sets the next time; a server that died
        mid-attempt leaves it due again to every server once the claim has run out."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "UPDATE jobs SET callback_next_at = %(now)s + %(claim)s WHERE id IN "
                "(SELECT id FROM jobs j WHERE callback_state = 'pending' "
                "AND (callback_next_at IS NULL OR callback_next_at <= %(now)s) AND NOT EXISTS "
                f"(SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state IN {UNFINISHED}) "
                "FOR UPDATE SKIP LOCKED) RETURNING id, seq, callback_url, callback_attempts, owner, "
                "callback_secret",
                {"now": now, "claim": CALLBACK_CLAIM_S},
            ).fetchall()
        )
        rows.sort(key=lambda r: r["seq"])
        return [
            CallbackDue(
                r["id"], r["callback_url"], r["callback_attempts"], r["owner"], r["callback_secret"]
            )
            for r in rows
        ]

    def callbacks_release(self, job_ids: list[str], now: float) -> None:
        """Give back callbacks taken by `callbacks_due` but not started (no free slot): due
        again at `now`, to whichever server has a slot first."""
        self.db.run(
            lambda conn: conn.execute(
                "UPDATE jobs SET callback_next_at = %s "
                "WHERE id = ANY(%s) AND callback_state = 'pending'",
                (now, job_ids),
            )
        )

    def callback_attempted(
        self, job_id: str, status: int | None, error: str | None, state: str, next_at: float | None
    ) -> None:
        """Record one attempt (as SqliteJobStore.callback_attempted)."""
        self.db.run(
            lambda conn: conn.execute(
                "UPDATE jobs SET callback_attempts = callback_attempts + 1, callback_status = %s, "
                "callback_error = %s, callback_state = %s, callback_next_at = %s "
                "WHERE id = %s AND callback_state = 'pending'",
                (status, error, state, next_at, job_id),
            )
        )
