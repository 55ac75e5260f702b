"""The PostgreSQL job store against a real PostgreSQL server (tests/helpers/pg_cluster.py): the schema,
claims under leases, exactly-once finishing, and a stopped database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from supervisor.database import MIGRATIONS, Database, StoreUnavailable
from supervisor.errors import InvalidRequest, QualityFailed, TaskFailed
from supervisor.jobs.postgres_store import CALLBACK_CLAIM_S, PostgresJobStore
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.storage import NewItem
from tests.helpers.pg_cluster import Cluster

LEASE_S = 3.0


def items(count: int) -> list[NewItem]:
    return [NewItem({"input": f"item {n}"}, f"i{n}", "wav") for n in range(count)]


@pytest.fixture
def stores(pg_url: str) -> Iterator[Callable[[str], PostgresJobStore]]:
    """Stores as servers named by the caller, on one fresh database; all closed afterwards."""
    opened: list[Database] = []

    def store(owner: str) -> PostgresJobStore:
        opened.append(Database.open(pg_url, owner))
        return PostgresJobStore(opened[-1], LEASE_S)

    yield store
    for db in opened:
        db.close()


def until(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_servers_starting_together_migrate_the_schema_once(pg_url: str) -> None:
    opened: list[Database] = []
    threads = [
        threading.Thread(target=lambda i=i: opened.append(Database.open(pg_url, f"s{i}")))
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(opened) == 4
        versions = opened[0].run(
            lambda c: [r["version"] for r in c.execute("SELECT version FROM schema_version")]
        )
        assert versions == list(range(1, len(MIGRATIONS) + 1))
    finally:
        for db in opened:
            db.close()


def test_a_database_newer_than_the_server_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(RuntimeError, match="newer than this server"):
        Database.open(pg_url, "old")


def test_the_api_side_matches_the_sqlite_store(stores: Callable[[str], PostgresJobStore]) -> None:
    store = stores("a")
    job_id, created = store.create(items(3), "digest", "key-1")
    assert created and store.create(items(3), "digest", "key-1") == (job_id, False)
    with pytest.raises(InvalidRequest) as refused:  # Conflict is an InvalidRequest (409)
        store.create(items(1), "other", "key-1")
    assert refused.value.code == "idempotency_key_reused"
    view = store.job(job_id)
    assert view is not None and view["state"] == "queued" and view["progress"]["total"] == 3
    assert [i["id"] for i in view["items"]] == ["i0", "i1", "i2"]
    page, more = store.jobs_page(10)
    assert [j["id"] for j in page] == [job_id] and not more and "items" not in page[0]
    assert store.job("job_nope") is None and store.item(job_id, 3) is None
    assert store.cancel(job_id) and not store.cancel("job_nope")
    cancelled = store.job(job_id, with_items=False)
    assert cancelled is not None and cancelled["state"] == "cancelled"
    assert cancelled["progress"]["cancelled"] == 3
    assert store.sweep(0.0, now=time.time() + 1) == [job_id] and store.job(job_id) is None


def test_two_servers_claiming_at_once_never_share_an_item(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(200), "d")
    keys = [(job_id, n) for n in range(200)]
    got: dict[str, set[tuple[str, int]]] = {}
    barrier = threading.Barrier(2)

    def claim(name: str, store: PostgresJobStore) -> None:
        barrier.wait()
        got[name] = set()
        for start in range(0, 200, 10):  # in small claims, racing each other
            got[name] |= store.claim(keys[start : start + 10])

    threads = [threading.Thread(target=claim, args=pair) for pair in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not got["a"] & got["b"] and got["a"] | got["b"] == set(keys)
    view = a.job(job_id)
    assert view is not None and all(i["attempts"] == 1 for i in view["items"])


def test_an_item_a_drain_hands_back_keeps_its_attempts(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    """Issue 37.2: released uncounted (the server drains), the claim is taken back."""
    a = stores("a")
    job_id, _ = a.create(items(1), "d")
    key = (job_id, 0)
    a.claim([key])
    assert a.release(key) == "queued"  # counted: a sidecar lost it, say
    a.claim([key])
    assert a.release(key, counted=False) == "queued"
    item = a.item(job_id, 0)
    assert item is not None and item["attempts"] == 1


def test_an_expired_lease_lets_another_server_finish_the_item_exactly_once(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(2), "d")
    key = (job_id, 0)
    assert a.claim([key]) == {key} and b.claim([key]) == set()
    assert a.renew([key, (job_id, 1)]) == {key} and b.renew([key]) == set()  # only the owner's
    assert b.expire() == 0  # the lease holds while it is renewed
    until(lambda: b.expire() == 1)  # a stops renewing (it was SIGKILLed, say): back to queued
    assert a.renew([key]) == set()  # a learns it lost the item
    assert b.claim([key]) == {key}
    assert not a.finish(key, "wav", b"late", 1, 1.0)  # a's late result is refused
    assert a.release(key) is None  # nor can a put it back
    assert b.finish(key, "wav", b"RIFF-b", 2, 1.0)
    assert not b.finish(key, "wav", b"RIFF-b", 2, 1.0)  # a retry after a lost answer: no-op
    assert b.read_result(job_id, 0, "wav") == b"RIFF-b"
    item = a.item(job_id, 0)
    assert item is not None and item["state"] == "done" and item["attempts"] == 2
    finished_by = a.db.run(
        lambda c: c.execute("SELECT finished_by FROM items WHERE n = 0").fetchone()
    )
    assert finished_by == {"finished_by": "b"}


def test_an_expired_item_of_a_cancelled_job_ends_cancelled(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a = stores("a")
    job_id, _ = a.create(items(2), "d")
    assert a.claim([(job_id, 0)]) == {(job_id, 0)}
    assert a.cancel(job_id)
    until(lambda: a.expire() == 1)
    view = a.job(job_id)
    assert view is not None and [i["state"] for i in view["items"]] == ["cancelled"] * 2


def test_a_stopped_database_is_unavailable_and_the_store_recovers_by_itself(
    pg_cluster: Cluster, stores: Callable[[str], PostgresJobStore]
) -> None:
    store = stores("a")
    job_id, _ = store.create(items(1), "d")
    pg_cluster.stop()
    try:
        with pytest.raises(StoreUnavailable, match="cannot be reached"):
            store.job(job_id)
    finally:
        pg_cluster.start_again()
    view = store.job(job_id)  # the same store object, no reopening
    assert view is not None and view["progress"]["queued"] == 1


def test_a_cut_connection_is_replaced_without_an_error(
    pg_cluster: Cluster, stores: Callable[[str], PostgresJobStore]
) -> None:
    store = stores("cut-me")
    job_id, _ = store.create(items(1), "d")
    assert pg_cluster.terminate("omnivoice cut-me") >= 1
    view = store.job(job_id)
    assert view is not None and view["progress"]["total"] == 1


def test_a_job_cancelled_through_another_server_is_not_renewed_and_ends_cancelled(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(2), "d")
    key = (job_id, 0)
    assert a.claim([key]) == {key} and a.renew([key]) == {key}
    assert b.cancel(job_id)
    assert a.renew([key]) == set()  # a stops the item...
    assert a.release(key) == "cancelled"  # ...and its end is `cancelled`
    view = b.job(job_id)
    assert view is not None and [i["state"] for i in view["items"]] == ["cancelled"] * 2


def test_queued_items_wait_for_not_before_and_come_by_deadline(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    store, now = stores("a"), time.time()
    plain, _ = store.create(items(1), "a")
    late, _ = store.create(items(1), "b", schedule=JobSchedule(deadline=now + 900))
    later_start, _ = store.create(
        items(1), "c", schedule=JobSchedule(not_before=now + 60, deadline=now + 100)
    )
    early, _ = store.create(items(2), "d", schedule=JobSchedule(deadline=now + 300))
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
    stores: Callable[[str], PostgresJobStore],
) -> None:
    store, url = stores("a"), "http://127.0.0.1:9/done"
    job_id, _ = store.create(items(2), "sha", schedule=JobSchedule(callback_url=url))
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
        "state": "delivered", "attempts": 2, "last_status": 200, "last_error": None}  # fmt: skip
    assert store.callbacks_due(time.time() + 3600) == [] and store.backlog() == []


def test_captions_and_qa_are_kept_with_the_result(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    store = stores("a")
    job_id, _ = store.create(items(3), "sha")
    keys = [c.key for c in store.queued(10)]
    assert store.claim(keys) == set(keys)
    passed = {"passed": True, "attempts": 2, "checks": {"rms": {"passed": True, "value": -20.0}}}
    failed = {"passed": False, "attempts": 3,
              "checks": {"finite": {"passed": False, "value": 7200.0}}}  # fmt: skip
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


def test_a_database_of_version_1_is_migrated_and_its_queued_items_estimated(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute(MIGRATIONS[0].encode())
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute("INSERT INTO jobs (id, body_sha256, created_at) VALUES ('job_old', 's', 1)")
        conn.execute(
            "INSERT INTO items (job_id, n, request, format, state) VALUES "
            "('job_old', 0, '{\"input\": \"An item queued before the upgrade.\"}', 'wav', 'queued')"
        )
    db = Database.open(pg_url, "new")
    try:
        store = PostgresJobStore(db, LEASE_S)
        job = store.job("job_old")
        assert job is not None and job["state"] == "queued" and job["progress"]["queued"] == 1
        assert (job["not_before"], job["deadline"], job["callback"]) == (None, None, None)
        (pending,) = store.backlog()
        assert pending.job_id == "job_old" and pending.audio_s > 0  # estimated at open
        assert [item.key for item in store.queued(10)] == [("job_old", 0)]
    finally:
        db.close()


def test_a_due_callback_is_taken_by_one_server_and_by_another_if_it_dies(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(1), "sha", schedule=JobSchedule(callback_url="http://127.0.0.1:9/"))
    a.cancel(job_id)
    now = time.time()
    assert [due.job_id for due in a.callbacks_due(now)] == [job_id]
    assert b.callbacks_due(now) == [] and a.callbacks_due(now) == []  # a is sending it
    # a died before recording its attempt: the claim runs out and b takes the callback.
    (due,) = b.callbacks_due(now + CALLBACK_CLAIM_S + 1)
    assert (due.job_id, due.attempts) == (job_id, 0)
    b.callback_attempted(job_id, 200, None, "delivered", None)
    assert a.callbacks_due(now + 3600) == [] and b.callbacks_due(now + 3600) == []


def test_a_due_callback_given_back_for_want_of_a_slot_is_due_at_once_to_every_server(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    """A server whose slots for the receiver's host are all busy gives the callback back
    (callbacks_release) rather than holding its claim: another server takes it in its next pass,
    and the attempt count is untouched (waiting is not an attempt)."""
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(1), "sha", schedule=JobSchedule(callback_url="http://127.0.0.1:9/"))
    a.cancel(job_id)
    now = time.time()
    assert [due.job_id for due in a.callbacks_due(now)] == [job_id]
    assert b.callbacks_due(now) == []  # a's claim
    a.callbacks_release([job_id], now)
    (due,) = b.callbacks_due(now)
    assert (due.job_id, due.attempts) == (job_id, 0)
    b.callback_attempted(job_id, 200, None, "delivered", None)
    a.callbacks_release([job_id], now)  # no longer pending: no change
    assert a.callbacks_due(now + 3600) == [] and b.callbacks_due(now + 3600) == []
