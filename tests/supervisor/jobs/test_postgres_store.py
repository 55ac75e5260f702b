"""The PostgreSQL job store against a real PostgreSQL server (tests/helpers/pg_cluster.py): the schema,
claims under leases, exactly-once finishing, and a stopped database. What both stores promise
alike is in test_storage.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from supervisor.database import MIGRATIONS, Database, StoreUnavailable
from supervisor.jobs.postgres_store import CALLBACK_CLAIM_S, PostgresJobStore
from supervisor.jobs.schedule import JobSchedule
from tests.helpers.job_store import new_items
from tests.helpers.pg_cluster import Cluster
from tests.helpers.waits import wait_until

LEASE_S = 3.0


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


def test_two_servers_claiming_at_once_never_share_an_item(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(new_items(200), "d")
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


def test_an_expired_lease_lets_another_server_finish_the_item_exactly_once(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(new_items(2), "d")
    key = (job_id, 0)
    assert a.claim([key]) == {key} and b.claim([key]) == set()
    assert a.renew([key, (job_id, 1)]) == {key} and b.renew([key]) == set()  # only the owner's
    assert b.expire() == 0  # the lease holds while it is renewed
    wait_until(
        lambda: b.expire() == 1, 30, "a's lease to expire"
    )  # a stops renewing (it was SIGKILLed, say): back to queued
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
    job_id, _ = a.create(new_items(2), "d")
    assert a.claim([(job_id, 0)]) == {(job_id, 0)}
    assert a.cancel(job_id)
    wait_until(lambda: a.expire() == 1, 30, "b's lease to expire")
    view = a.job(job_id)
    assert view is not None and [i["state"] for i in view["items"]] == ["cancelled"] * 2


def test_a_stopped_database_is_unavailable_and_the_store_recovers_by_itself(
    pg_cluster: Cluster, stores: Callable[[str], PostgresJobStore]
) -> None:
    store = stores("a")
    job_id, _ = store.create(new_items(1), "d")
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
    job_id, _ = store.create(new_items(1), "d")
    assert pg_cluster.terminate("omnivoice cut-me") >= 1
    view = store.job(job_id)
    assert view is not None and view["progress"]["total"] == 1


def test_a_job_cancelled_through_another_server_is_not_renewed_and_ends_cancelled(
    stores: Callable[[str], PostgresJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(new_items(2), "d")
    key = (job_id, 0)
    assert a.claim([key]) == {key} and a.renew([key]) == {key}
    assert b.cancel(job_id)
    assert a.renew([key]) == set()  # a stops the item...
    assert a.release(key) == "cancelled"  # ...and its end is `cancelled`
    view = b.job(job_id)
    assert view is not None and [i["state"] for i in view["items"]] == ["cancelled"] * 2


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
    job_id, _ = a.create(
        new_items(1), "sha", schedule=JobSchedule(callback_url="http://127.0.0.1:9/")
    )
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
    job_id, _ = a.create(
        new_items(1), "sha", schedule=JobSchedule(callback_url="http://127.0.0.1:9/")
    )
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
