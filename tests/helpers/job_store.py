"""Jobs made straight in a real job store, for the store tests and the tests of what reads them."""

from __future__ import annotations

from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem


def new_items(count: int, fmt: str = "wav") -> list[NewItem]:
    """`count` items of one job, client ids id0, id1, ..."""
    return [
        NewItem({"input": f"item {i}", "response_format": fmt}, f"id{i}", fmt) for i in range(count)
    ]


def ended_job(store: SqliteJobStore, url: str) -> str:
    """A one-item job, finished, whose callback to `url` is due."""
    job_id, _ = store.create(
        [NewItem({"input": "x"}, None, "wav")], "sha", schedule=JobSchedule(callback_url=url)
    )
    store.claim([(job_id, 0)])
    store.finish((job_id, 0), "wav", b"RIFF", 1, 1.0)
    return job_id
