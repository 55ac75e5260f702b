"""What the jobs routes and the job runner need of a job store, whichever database holds it.

Two stores implement it: `jobs.JobStore` (SQLite in the data directory, one server) and
`pg_store.PgJobStore` (PostgreSQL, shared by many servers). `--store` picks one (`open_store`).
Every method is synchronous (the server calls them through `asyncio.to_thread`), and every move
of an item is conditional on the state it expects, so no item is ever finished twice.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from supervisor.errors import ServerError
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.store import CallbackDue, Claimed, NewItem
from supervisor.jobs.timeline import Pending
from supervisor.tenants import DEFAULT_OWNER

Key = tuple[str, int]


class StoreUnavailable(RuntimeError):
    """The database cannot be reached now (stopped, or the network to it is down): a 503."""


class JobStorage(Protocol):
    # The API's side.
    def create(
        self,
        items: builtins.list[NewItem],
        body_sha256: str,
        idempotency_key: str | None = None,
        schedule: JobSchedule | None = None,
        owner: str = DEFAULT_OWNER,
    ) -> tuple[str, bool]: ...
    # `owner`: only that owner's jobs are found (None: every owner's, for an admin key)
    def job(
        self, job_id: str, with_items: bool = True, owner: str | None = None
    ) -> dict[str, Any] | None: ...
    def list(
        self, limit: int, after: str | None = None, owner: str | None = None
    ) -> tuple[builtins.list[dict[str, Any]], bool]: ...
    def cancel(self, job_id: str, owner: str | None = None) -> bool: ...
    def item(self, job_id: str, n: int, owner: str | None = None) -> dict[str, Any] | None: ...
    def read_result(self, job_id: str, n: int, fmt: str) -> bytes | None: ...
    def read_beside(self, job_id: str, n: int, extension: str) -> bytes | None: ...

    # The runner's side.
    def queued(self, limit: int, now: float | None = None) -> builtins.list[Claimed]: ...
    def backlog(self) -> builtins.list[Pending]: ...
    def next_start(self, now: float) -> float | None: ...
    def claim(self, keys: builtins.list[Key]) -> set[Key]: ...
    def renew(self, keys: builtins.list[Key]) -> set[Key]: ...
    def finish(
        self,
        key: Key,
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: dict[str, Any] | None = None,
    ) -> bool: ...
    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool: ...
    def release(self, key: Key, counted: bool = True) -> str | None: ...
    def recover(self) -> tuple[int, int]: ...
    def release_reserve(self) -> bool: ...
    def room_for(self, nbytes: int) -> bool: ...
    def expire(self) -> int: ...
    def sweep(self, retention_s: float, now: float | None = None) -> builtins.list[str]: ...
    def close(self) -> None: ...

    # The callback sender's side.
    def callbacks_due(self, now: float) -> builtins.list[CallbackDue]: ...
    def callback_attempted(
        self, job_id: str, status: int | None, error: str | None, state: str, next_at: float | None
    ) -> None: ...
