"""What the jobs routes and the job runner need of a job store, whichever database holds it.

Two stores implement `JobStorage`: `sqlite_store.SqliteJobStore` (SQLite in the data directory,
one server, the default) and `postgres_store.PostgresJobStore` (PostgreSQL, shared by many
servers); `--store` picks one. Both show jobs and items through `views`, so a field added to the
API is added once (and a column to each store's schema). Every method is synchronous: the routes
call them through `access.JobAccess`, the runner through `asyncio.to_thread`, tests and
tools directly.

An item's states, and who moves it:

    queued  --claim (runner)-->    running
    running --finish (runner)-->   done
    running --fail (runner)-->     failed
    running --release (runner)-->  queued, or cancelled if its job was cancelled meanwhile (an
                                   item a drain hands back: its attempt not counted)
    queued  --cancel (DELETE)-->   cancelled

Only the runner moves an item out of `running`, and every move is conditional on the state it
expects, so no item is ever finished twice.
"""

from __future__ import annotations

import errno
import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.errors import Conflict, ErrorObject, ServerError
from supervisor.jobs.finish_times import PendingJob
from supervisor.jobs.schedule import JobSchedule
from supervisor.qa_summary import QaSummary
from supervisor.tenants import DEFAULT_OWNER

if TYPE_CHECKING:
    from supervisor.jobs.views import ItemView, JobView

Key = tuple[str, int]
ITEM_STATES = ("queued", "running", "done", "failed", "cancelled")
ENDED = ("done", "failed", "cancelled")
UNFINISHED = "('queued', 'running')"  # in SQL, either dialect


@dataclass(frozen=True)
class NewItem:
    """An item as submitted: its speech fields (without "id"), the client's id, its format."""

    request: dict[str, object]
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
    request: dict[str, object]
    format: str
    attempts: int  # before this claim (which counts one more in the store)
    owner: str = DEFAULT_OWNER  # the job's: whose voices and cache entries it uses

    @classmethod
    def from_row(cls, row: Any) -> Claimed:
        """From a row of `job_id, n, request, format, attempts, owner` (either store's)."""
        return cls(
            row["job_id"],
            row["n"],
            json.loads(row["request"]),
            row["format"],
            row["attempts"],
            row["owner"],
        )

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


class ErrorRecord(ErrorObject):
    """What an item keeps of the error it failed with: OpenAI's error object and the status."""

    status: int


def error_record(error: ServerError) -> ErrorRecord:
    """What an item keeps of the error it failed with: OpenAI's error object plus the HTTP status."""
    return {**error.to_body()["error"], "status": error.status}


def reused_key(idempotency_key: str, job_id: str) -> Conflict:
    """The answer to a key already used by the same owner for a different body: 409."""
    error = Conflict(
        f"Idempotency-Key {idempotency_key!r} was already used for job {job_id} with a "
        "different body; use a new key for a different job.",
        param="Idempotency-Key",
    )
    error.code = "idempotency_key_reused"
    return error


class JobStorage(Protocol):
    # The API's side.
    def create(
        self,
        items: list[NewItem],
        body_sha256: str,
        idempotency_key: str | None = None,
        schedule: JobSchedule | None = None,
        owner: str = DEFAULT_OWNER,
    ) -> tuple[str, bool]: ...
    # `owner`: only that owner's jobs are found (None: every owner's, for an admin key)
    def job(
        self, job_id: str, with_items: bool = True, owner: str | None = None
    ) -> JobView | None: ...
    def jobs_page(
        self, limit: int, after: str | None = None, owner: str | None = None
    ) -> tuple[list[JobView], bool]: ...
    def cancel(self, job_id: str, owner: str | None = None) -> bool: ...
    def item(self, job_id: str, n: int, owner: str | None = None) -> ItemView | None: ...
    def read_result(self, job_id: str, n: int, fmt: str) -> bytes | None: ...
    def read_beside(self, job_id: str, n: int, extension: str) -> bytes | None: ...

    # The runner's side.
    def queued(self, limit: int, now: float | None = None) -> list[Claimed]: ...
    def backlog(self) -> list[PendingJob]: ...
    def next_start(self, now: float) -> float | None: ...
    def claim(self, keys: list[Key]) -> set[Key]: ...
    def renew(self, keys: list[Key]) -> set[Key]: ...
    def finish(  # noqa: PLR0913  one column each of the row it writes, in both stores
        self,
        key: Key,
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: QaSummary | None = None,
    ) -> bool: ...
    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool: ...
    def release(self, key: Key, counted: bool = True) -> str | None: ...
    def recover(self) -> tuple[int, int]: ...
    def release_reserve(self) -> bool: ...
    def room_for(self, nbytes: int) -> bool: ...
    def expire(self) -> int: ...
    def sweep(self, retention_s: float, now: float | None = None) -> list[str]: ...
    def close(self) -> None: ...

    # The callback sender's side.
    def callbacks_due(self, now: float) -> list[CallbackDue]: ...
    def callbacks_release(self, job_ids: list[str], now: float) -> None: ...
    def callback_attempted(
        self, job_id: str, status: int | None, error: str | None, state: str, next_at: float | None
    ) -> None: ...
