"""The job store in PostgreSQL: many servers share one queue, each item done exactly once.

Tables (schema in `database.MIGRATIONS`): `jobs`, `items`, `results`, the encoded audio of each
done item as bytea (a few KB to a few MB here), and `beside`, the files kept with a result
(an item's captions.srt and captions.vtt), committed with it. Results live in the database rather than a shared
directory so that every server reaches them with no shared file system to set up, and so that a
result and its item's `done` commit in one transaction: there is no window in which one exists
without the other, and nothing to reconcile after a crash.

Leases: a server claims queued items with `FOR UPDATE SKIP LOCKED` (two servers claiming at once
skip each other's rows instead of waiting), stamping `lease_owner` (itself) and `lease_until`
(the database's clock plus `--lease-s`, so the servers' clocks need not agree). Its runner renews
the leases of the items it works on every third of a lease. Every later move of an item
(finish, fail, release, renew) is conditional on `state = 'running' AND lease_owner = us`, so
a server that lost an item (it was SIGKILLed, or cut from the database longer than a lease)
cannot finish it after another server took it over. `expire`, run by every server's runner each
pass, turns running items whose lease ran out back to `queued` (or `cancelled`, if their job
was cancelled meanwhile).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from psycopg.errors import UniqueViolation

from supervisor.database import Connection, Database
from supervisor.errors import QualityFailed, ServerError
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.storage import (
    UNFINISHED,
    CallbackDue,
    Claimed,
    Key,
    NewItem,
    error_record,
    out_of_space,
    reused_key,
    scoped_key,
)
from supervisor.jobs.timeline import Pending, item_audio_s
from supervisor.jobs.views import PROGRESS_SQL, item_view, job_view
from supervisor.tenants import DEFAULT_OWNER

NOW = "EXTRACT(EPOCH FROM clock_timestamp())"  # the database's clock, the one leases go by
# How long a server's claim on sending a callback lasts: longer than an attempt may take
# (--callback-timeout-s, 10 s by default), so the callback is never sent by two at once.
CALLBACK_CLAIM_S = 120.0
OWNED = "(%s::text IS NULL OR owner = %s)"  # as sqlite_store.OWNED
KEYS = "(job_id, n) IN (SELECT * FROM unnest(%(jobs)s::text[], %(ns)s::int[]))"


def key_params(keys: list[Key]) -> dict[str, Any]:
    return {"jobs": [job_id for job_id, _ in keys], "ns": [n for _, n in keys]}


class RolledBack(Exception):
    """Raised inside a transaction to roll back what it wrote (`room_for`'s probe)."""


class PostgresJobStore:
    def __init__(self, db: Database, lease_s: float) -> None:
        self.db = db
        self.lease_s = lease_s
        self.mine = {"owner": db.owner, "lease": lease_s}
        db.run(estimate_unfinished)

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
                (job_id, stored_key, body_sha256, time.time(), when.not_before,
                 when.deadline, when.callback_url,
                 None if when.callback_url is None else "pending", owner, when.callback_secret),
            )  # fmt: skip
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO items (job_id, n, client_id, request, format, state, "
                    "est_audio_s) VALUES (%s, %s, %s, %s, %s, 'queued', %s)",
                    [
                        (job_id, n, item.client_id, json.dumps(item.request), item.format,
                         item.est_audio_s)
                        for n, item in enumerate(items)
                    ],
                )  # fmt: skip
            return job_id, True

        try:
            return self.db.run(insert, retry=idempotency_key is not None)
        except UniqueViolation:
            found = self.db.run(existing)
            assert found is not None  # the row that violated the key
            return found, False

    def job(
        self, job_id: str, with_items: bool = True, owner: str | None = None
    ) -> dict[str, Any] | None:
        def read(conn: Connection) -> dict[str, Any] | None:
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
    ) -> tuple[list[dict[str, Any]], bool]:
        def read(conn: Connection) -> tuple[list[dict[str, Any]], bool]:
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
    def _view(conn: Connection, row: dict[str, Any]) -> dict[str, Any]:
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

    def item(self, job_id: str, n: int, owner: str | None = None) -> dict[str, Any] | None:
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

    # ------------------------------------------------------------ the runner's moves

    def queued(self, limit: int, now: float | None = None) -> list[Claimed]:
        """As SqliteJobStore.queued (jobs whose `not_before` has come, earliest deadline first, then
        the oldest job), skipping items another server is claiming right now (rows locked)."""
        now = time.time() if now is None else now
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT i.job_id, i.n, i.request, i.format, i.attempts, j.owner FROM items i "
                "JOIN jobs j ON j.id = i.job_id WHERE i.state = 'queued' "
                "AND (j.not_before IS NULL OR j.not_before <= %s) "
                "ORDER BY j.deadline IS NULL, j.deadline, j.seq, i.n "
                "LIMIT %s FOR UPDATE OF i SKIP LOCKED",
                (now, limit),
            ).fetchall()
        )
        return [Claimed.from_row(r) for r in rows]

    def backlog(self) -> list[Pending]:
        """Every job with items still to run (cancelled ones aside), with their estimated audio."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT j.id, j.seq, j.not_before, j.deadline, "
                "SUM(COALESCE(i.est_audio_s, 0)) AS audio_s "
                f"FROM jobs j JOIN items i ON i.job_id = j.id WHERE i.state IN {UNFINISHED} "
                "AND j.cancelled_at IS NULL GROUP BY j.id, j.seq"
            ).fetchall()
        )
        return [
            Pending(r["id"], r["seq"], r["not_before"], r["deadline"], r["audio_s"]) for r in rows
        ]

    def next_start(self, now: float) -> float | None:
        """The earliest `not_before` still ahead of a job with queued items, or None."""
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT MIN(j.not_before) AS start FROM jobs j "
                "WHERE j.not_before > %s AND j.cancelled_at IS NULL "
                "AND EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state = 'queued')",
                (now,),
            ).fetchone()
        )
        return None if row is None or row["start"] is None else float(row["start"])

    def claim(self, keys: list[Key]) -> set[Key]:
        """queued -> running under our lease; the keys we got (not those another server took)."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "UPDATE items SET state = 'running', attempts = attempts + 1, "
                f"started_at = %(now)s, lease_owner = %(owner)s, lease_until = {NOW} + %(lease)s "
                "WHERE (job_id, n) IN (SELECT job_id, n FROM items WHERE state = 'queued' "
                f"AND {KEYS} FOR UPDATE SKIP LOCKED) RETURNING job_id, n",
                {**self.mine, **key_params(keys), "now": time.time()},
            ).fetchall()
        )
        return {(r["job_id"], r["n"]) for r in rows}

    def renew(self, keys: list[Key]) -> set[Key]:
        """Extend our leases; the keys still ours to run. An item missing was taken over, or its
        job was cancelled (perhaps through another server): stop it."""
        if not keys:
            return set()
        rows = self.db.run(
            lambda conn: conn.execute(
                f"UPDATE items i SET lease_until = {NOW} + %(lease)s FROM jobs j "
                "WHERE j.id = i.job_id AND j.cancelled_at IS NULL AND i.state = 'running' "
                f"AND i.lease_owner = %(owner)s AND (i.job_id, i.n) IN (SELECT * FROM "
                "unnest(%(jobs)s::text[], %(ns)s::int[])) RETURNING i.job_id, i.n",
                {**self.mine, **key_params(keys)},
            ).fetchall()
        )
        return {(r["job_id"], r["n"]) for r in rows}

    def finish(
        self,
        key: Key,
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: dict[str, Any] | None = None,
    ) -> bool:
        """The result, the files `beside` it (captions, by extension) and running -> done in
        one transaction, with `qa`, its quality checks. False if the item is no longer ours; a
        retry after a lost answer finds it done and returns False too."""
        job_id, n = key

        def finish(conn: Connection) -> bool:
            done = conn.execute(
                "UPDATE items SET state = 'done', finished_at = %s, error = NULL, seed = %s, "
                "audio_s = %s, qa = %s, lease_owner = NULL, lease_until = NULL, "
                "finished_by = %s WHERE job_id = %s AND n = %s AND state = 'running' "
                "AND lease_owner = %s",
                (time.time(), seed, round(audio_s, 3), json.dumps(qa) if qa else None,
                 self.db.owner, job_id, n, self.db.owner),
            ).rowcount  # fmt: skip
            if done:
                conn.execute(
                    "INSERT INTO results (job_id, n, data) VALUES (%s, %s, %s)", (job_id, n, data)
                )
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO beside (job_id, n, extension, data) VALUES (%s, %s, %s, %s)",
                        [(job_id, n, ext, content) for ext, content in (beside or {}).items()],
                    )
            return bool(done)

        return self.db.run(finish)

    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool:
        """running -> failed (ours), or queued -> failed (claimed=False: invalid before it ran),
        with the error (and the quality checks, for audio that failed them)."""
        job_id, n = key
        qa = json.dumps(error.qa) if isinstance(error, QualityFailed) and error.qa else None
        # Ours and running; or, not claimed, still queued.
        which = "state = 'running' AND lease_owner = %s" if claimed else "state = 'queued'"
        params = (self.db.owner,) if claimed else ()
        record = json.dumps(error_record(error))
        return bool(
            self.db.run(
                lambda conn: (
                    conn.execute(
                        "UPDATE items SET state = 'failed', finished_at = %s, error = %s, qa = %s, "
                        "attempts = attempts + %s, lease_owner = NULL, lease_until = NULL "
                        f"WHERE job_id = %s AND n = %s AND {which}",
                        (time.time(), record, qa, 0 if claimed else 1, job_id, n, *params),
                    ).rowcount
                )
            )
        )

    def release(self, key: Key, counted: bool = True) -> str | None:
        """running (ours) -> queued, or -> cancelled if its job was cancelled. The new state.
        counted=False: its claim is not counted as an attempt (a drain handed it back)."""
        job_id, n = key
        row = self.db.run(
            lambda conn: conn.execute(
                "UPDATE items i SET state = CASE WHEN j.cancelled_at IS NULL THEN 'queued' "
                "ELSE 'cancelled' END, finished_at = CASE WHEN j.cancelled_at IS NULL THEN NULL "
                "ELSE %s END, attempts = GREATEST(i.attempts - %s, 0), lease_owner = NULL, "
                "lease_until = NULL FROM jobs j "
                "WHERE j.id = i.job_id AND i.job_id = %s AND i.n = %s AND i.state = 'running' "
                "AND i.lease_owner = %s RETURNING i.state",
                (time.time(), 0 if counted else 1, job_id, n, self.db.owner),
            ).fetchone()
        )
        return None if row is None else str(row["state"])

    def release_reserve(self) -> bool:
        """Nothing to free: the database server's disk is its own."""
        return False

    def room_for(self, nbytes: int) -> bool:
        """Whether a result of nbytes fits in `results` again: written for one queued item (whose
        row cannot have a result yet) and rolled back. True with no queued item: none to run."""
        probe = os.urandom(nbytes)  # random: neither compressed nor stored inline

        def write(conn: Connection) -> bool:
            row = conn.execute(
                "INSERT INTO results (job_id, n, data) SELECT job_id, n, %s FROM items "
                "WHERE state = 'queued' LIMIT 1 RETURNING job_id",
                (probe,),
            ).fetchone()
            raise RolledBack(row is not None)

        try:
            self.db.run(write)
        except RolledBack:
            return True
        except OSError as exc:  # Database.run: DiskFull is ENOSPC
            if not out_of_space(exc):
                raise
            return False
        raise AssertionError("unreachable")

    def expire(self) -> int:
        """Running items whose lease ran out -> queued (or cancelled); how many."""
        return int(
            self.db.run(
                lambda conn: (
                    conn.execute(
                        "UPDATE items i SET state = CASE WHEN j.cancelled_at IS NULL THEN 'queued' "
                        "ELSE 'cancelled' END, finished_at = CASE WHEN j.cancelled_at IS NULL "
                        "THEN NULL ELSE j.cancelled_at END, lease_owner = NULL, lease_until = NULL "
                        f"FROM jobs j WHERE j.id = i.job_id AND i.state = 'running' "
                        f"AND i.lease_until < {NOW}"
                    ).rowcount
                )
            )
        )

    def recover(self) -> tuple[int, int]:
        """At start: nothing of ours can be running (our owner name is new); what a dead server
        left expires with its leases. (0, items put back now)."""
        return 0, self.expire()

    def sweep(self, retention_s: float, now: float | None = None) -> list[str]:
        """Remove jobs whose every item ended more than retention_s ago, results and all."""
        cutoff = (time.time() if now is None else now) - retention_s
        rows = self.db.run(
            lambda conn: conn.execute(
                "DELETE FROM jobs WHERE id IN (SELECT job_id FROM items GROUP BY job_id "
                "HAVING SUM(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END) = 0 "
                "AND MAX(COALESCE(finished_at, 0)) < %s) RETURNING id",
                (cutoff,),
            ).fetchall()
        )
        return [str(r["id"]) for r in rows]

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


def estimate_unfinished(conn: Connection) -> None:
    """Estimate the audio of unfinished items stored before version 2 of the schema (their
    `est_audio_s` is NULL), as the API does for new ones; after that, none is left to do."""
    rows = conn.execute(
        f"SELECT job_id, n, request FROM items WHERE est_audio_s IS NULL AND state IN {UNFINISHED}"
    ).fetchall()
    for row in rows:
        request = json.loads(row["request"])
        estimate = item_audio_s(
            str(request.get("input", "")), request.get("speed"), request.get("duration")
        )
        conn.execute(
            "UPDATE items SET est_audio_s = %s WHERE job_id = %s AND n = %s",
            (estimate, row["job_id"], row["n"]),
        )
