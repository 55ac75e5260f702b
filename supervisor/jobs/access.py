"""The jobs routes' way to the job store: the same calls, awaited, each off the event loop.

Every `JobStorage` method blocks (a SQLite lock and fsync, or a PostgreSQL round trip), so a
handler must not call one on the event loop. `JobAccess` runs each in a worker thread
(`asyncio.to_thread`), in one place, so that no route can forget to.
"""

from __future__ import annotations

import asyncio

from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.storage import JobStorage, NewItem
from supervisor.jobs.views import ItemView, JobView


class JobAccess:
    def __init__(self, store: JobStorage) -> None:
        self.store = store

    async def create(
        self,
        items: list[NewItem],
        body_sha256: str,
        idempotency_key: str | None,
        schedule: JobSchedule | None,
        owner: str,
    ) -> tuple[str, bool]:
        """(the job's id, True), or (the job the owner's key made before, False)."""
        return await asyncio.to_thread(
            self.store.create, items, body_sha256, idempotency_key, schedule, owner
        )

    async def job(
        self, job_id: str, with_items: bool = True, owner: str | None = None
    ) -> JobView | None:
        return await asyncio.to_thread(self.store.job, job_id, with_items, owner)

    async def jobs_page(
        self, limit: int, after: str | None, owner: str | None
    ) -> tuple[list[JobView], bool]:
        return await asyncio.to_thread(self.store.jobs_page, limit, after, owner)

    async def cancel(self, job_id: str, owner: str | None) -> bool:
        return await asyncio.to_thread(self.store.cancel, job_id, owner)

    async def item(self, job_id: str, n: int, owner: str | None) -> ItemView | None:
        return await asyncio.to_thread(self.store.item, job_id, n, owner)

    async def read_result(self, job_id: str, n: int, fmt: str) -> bytes | None:
        return await asyncio.to_thread(self.store.read_result, job_id, n, fmt)

    async def read_beside(self, job_id: str, n: int, extension: str) -> bytes | None:
        return await asyncio.to_thread(self.store.read_beside, job_id, n, extension)
