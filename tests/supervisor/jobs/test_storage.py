"""What `JobStorage` promises, checked on both stores alike: SQLite in a data directory and
PostgreSQL on a real server (tests/helpers/pg_cluster.py). What only one store has (SQLite's file
lock and crash recovery, PostgreSQL's leases among servers, each one's migrations) is tested in
test_sqlite_store.py and test_postgres_store.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.database import Database
from supervisor.errors import Conflict, InvalidRequest, QualityFailed, TaskFailed
from supervisor.jobs.postgres_store import PostgresJobStore
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import JobStorage, body_digest
from tests.helpers.job_store import new_items


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStorage]:
    """A fresh store of either kind (PostgreSQL's on a fresh database of the session's server)."""
    if request.param == "sqlite":
        opened = SqliteJobStore(tmp_path)
        yield opened
        opened.close()
        return
    db = Database.open(request.getfixturevalue("pg_url"), "a")
    yield PostgresJobStore(db, lease_s=3.0)
    db.close()


def test_an_idempotency_key_never_makes_a_second_job_and_the_views_follow_the_job(
    store: JobStorage,
) -> None:
    body = {"items": [{"input": "a"}]}
    first, created = store.create(new_items(3), body_digest(body), "key-1")
    again, created_again = store.create(
        new_items(3), body_digest({"items": [{"input": "a"}]}), "key-1"
    )
    assert created and not created_again and again == first
    with pytest.raises(Conflict) as raised:
        store.create(new_items(1), body_digest({"items": [{"input": "b"}]}), "key-1")
    assert isinstance(raised.value, InvalidRequest)  # a Conflict is an InvalidRequest (409)
    assert raised.value.code == "idempotency_key_reused" and first in raised.value.message
    assert store.jobs_page(10)[0] == [store.job(first, with_items=False)]
    view = store.job(first)
    assert view is not None and view["state"] == "queued" and view["progress"]["total"] == 3
    assert [i["id"] for i in view["items"]] == ["id0", "id1", "id2"]
    page, more = store.jobs_page(10)
    assert [j["id"] for j in page] == [first] and not more and "items" not in page[0]
    assert store.job("job_nope") is None and store.item(first, 3) is None
    assert store.cancel(first) and not store.cancel("job_nope")
    cancelled = store.job(first, with_items=False)
    assert cancelled is not None and cancelled["state"] == "cancelled"
    assert cancelled["progress"]["cancelled"] == 3
    assert store.sweep(0.0, now=time.time() + 1) == [first] and store.job(first) is None


def test_an_item_a_drain_hands_back_keeps_its_attempts(store: JobStorage) -> None:
    """Issue 37.2: released uncounted (the server drains), the claim is taken back."""
    job_id, _ = store.create(new_items(1), "sha")
    key = (job_id, 0)
    store.claim([key])
    assert store.release(key) == "queued"  # counted: a sidecar lost it, say
    store.claim([key])
    assert store.release(key, counted=False) == "queued"
    item = store.item(job_id, 0)
    assert item is not None and item["attempts"] == 1
    job = store.job(job_id)
    assert job is not None and job["items"][0]["attempts"] == 1


def test_captions_and_qa_are_kept_with_the_result_whether_it_passed_or_failed(
    store: JobStorage,
) -> None:
    job_id, _ = store.create(new_items(3), "sha")
    keys = [c.key for c in store.queued(10)]
    assert store.claim(keys) == set(keys)
    passed = {"passed": True, "attempts": 2, "checks": {"rms": {"passed": True, "value": -20.0}}}
    failed = {
        "passed": False,
        "attempts": 3,
        "checks": {"finite": {"passed": False, "value": 7200.0}},
    }
    captions = {"srt": b"1\n00:00:00,000 --> 00:00:01,000\nHi.\n", "vtt": b"WEBVTT\n"}
    assert store.finish(keys[0], "wav", b"RIFF", 7, 1.5, beside=captions, qa=passed)
    assert store.finish(keys[1], "wav", b"RIFF2", 8, 1.0)
    assert store.fail(keys[2], QualityFailed("the audio failed its quality checks", failed))
    assert [store.read_beside(job_id, 0, ext) for ext in ("srt", "vtt")] == list(captions.values())
    assert store.read_beside(job_id, 1, "srt") is None and store.read_result(job_id, 1, "wav")
    # A finish that is refused (the item is done already) stores no second set of captions.
    assert not store.finish(keys[0], "wav", b"RIFF", 7, 1.5, beside=captions)
    job = store.job(job_id)
    assert job is not None and [i["qa"] for i in job["items"]] == [passed, None, failed]
    assert job["items"][2]["error"]["code"] == "qa_failed"
    assert store.sweep(0.0, now=time.time() + 1) == [job_id]
    assert store.read_beside(job_id, 0, "srt") is None  # removed with its job


def test_queued_items_wait_for_not_before_and_come_by_deadline(store: JobStorage) -> None:
    now = time.time()
    plain, _ = store.create(new_items(1), "a")
    late, _ = store.create(new_items(1), "b", schedule=JobSchedule(deadline=now + 900))
    later_start, _ = store.create(
        new_items(1), "c", schedule=JobSchedule(not_before=now + 60, deadline=now + 100)
    )
    early, _ = store.create(new_items(2), "d", schedule=JobSchedule(deadline=now + 300))
    order = [item.key for item in store.queued(10, now=now)]
    assert order == [(early, 0), (early, 1), (late, 0), (plain, 0)]
    assert store.queued(10, now=now + 60)[0].key == (later_start, 0)
    assert store.next_start(now) == pytest.approx(now + 60)
    assert store.next_start(now + 60) is None
    view = store.job(later_start)
    assert view is not None and view["not_before"].endswith("Z") and view["state"] == "queued"
    backlog = {pending.job_id: pending for pending in store.backlog()}
    assert set(backlog) == {plain, late, later_start, early}
    assert backlog[early].deadline == pytest.approx(now + 300)
    assert backlog[later_start].not_before == pytest.approx(now + 60)


def test_a_callback_is_due_once_its_job_ended_and_each_attempt_is_recorded(
    store: JobStorage,
) -> None:
    url = "http://127.0.0.1:9/done"
    job_id, _ = store.create(new_items(2), "sha", schedule=JobSchedule(callback_url=url))
    assert store.callbacks_due(time.time()) == []  # items still to run
    store.claim([(job_id, 0), (job_id, 1)])
    store.fail((job_id, 0), TaskFailed("boom"))
    store.finish((job_id, 1), "wav", b"RIFF", 1, 1.0)
    (due,) = store.callbacks_due(time.time())
    assert (due.job_id, due.url, due.attempts) == (job_id, url, 0)
    store.callback_attempted(job_id, 500, "HTTP 500", "pending", time.time() + 60)
    assert store.callbacks_due(time.time()) == []  # backing off
    (due,) = store.callbacks_due(time.time() + 61)
    assert due.attempts == 1
    store.callback_attempted(job_id, 200, None, "delivered", None)
    store.callback_attempted(job_id, 200, None, "delivered", None)  # no longer pending: no change
    view = store.job(job_id, with_items=False)
    assert view is not None and view["callback"] == {
        "state": "delivered",
        "attempts": 2,
        "last_status": 200,
        "last_error": None,
    }
    assert store.callbacks_due(time.time() + 3600) == [] and store.backlog() == []
