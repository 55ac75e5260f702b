"""The PostgreSQL job store against a real PostgreSQL server (tests/pg_cluster.py): the schema,
claims under leases, exactly-once finishing, and a stopped database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_cluster import Cluster

from supervisor.errors import InvalidRequest
from supervisor.job_storage import StoreUnavailable
from supervisor.jobs import NewItem
from supervisor.pg import MIGRATIONS, Database
from supervisor.pg_jobs import PgJobStore

LEASE_S = 3.0


def items(count: int) -> list[NewItem]:
    return [NewItem({"input": f"item {n}"}, f"i{n}", "wav") for n in range(count)]


@pytest.fixture
def stores(pg_url: str) -> Iterator[Callable[[str], PgJobStore]]:
    """Stores as servers named by the caller, on one fresh database; all closed afterwards."""
    opened: list[Database] = []

    def store(owner: str) -> PgJobStore:
        opened.append(Database.open(pg_url, owner))
        return PgJobStore(opened[-1], LEASE_S)

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


def test_the_api_side_matches_the_sqlite_store(stores: Callable[[str], PgJobStore]) -> None:
    store = stores("a")
    job_id, created = store.create(items(3), "digest", "key-1")
    assert created and store.create(items(3), "digest", "key-1") == (job_id, False)
    with pytest.raises(InvalidRequest) as refused:  # Conflict is an InvalidRequest (409)
        store.create(items(1), "other", "key-1")
    assert refused.value.code == "idempotency_key_reused"
    view = store.job(job_id)
    assert view is not None and view["state"] == "queued" and view["progress"]["total"] == 3
    assert [i["id"] for i in view["items"]] == ["i0", "i1", "i2"]
    page, more = store.list(10)
    assert [j["id"] for j in page] == [job_id] and not more and "items" not in page[0]
    assert store.job("job_nope") is None and store.item(job_id, 3) is None
    assert store.cancel(job_id) and not store.cancel("job_nope")
    cancelled = store.job(job_id, with_items=False)
    assert cancelled is not None and cancelled["state"] == "cancelled"
    assert cancelled["progress"]["cancelled"] == 3
    assert store.sweep(0.0, now=time.time() + 1) == [job_id] and store.job(job_id) is None


def test_two_servers_claiming_at_once_never_share_an_item(
    stores: Callable[[str], PgJobStore],
) -> None:
    a, b = stores("a"), stores("b")
    job_id, _ = a.create(items(200), "d")
    keys = [(job_id, n) for n in range(200)]
    got: dict[str, set[tuple[str, int]]] = {}
    barrier = threading.Barrier(2)

    def claim(name: str, store: PgJobStore) -> None:
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
    stores: Callable[[str], PgJobStore],
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
    stores: Callable[[str], PgJobStore],
) -> None:
    a = stores("a")
    job_id, _ = a.create(items(2), "d")
    assert a.claim([(job_id, 0)]) == {(job_id, 0)}
    assert a.cancel(job_id)
    until(lambda: a.expire() == 1)
    view = a.job(job_id)
    assert view is not None and [i["state"] for i in view["items"]] == ["cancelled"] * 2


def test_a_stopped_database_is_unavailable_and_the_store_recovers_by_itself(
    pg_cluster: Cluster, stores: Callable[[str], PgJobStore]
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
    pg_cluster: Cluster, stores: Callable[[str], PgJobStore]
) -> None:
    store = stores("cut-me")
    job_id, _ = store.create(items(1), "d")
    assert pg_cluster.terminate("omnivoice cut-me") >= 1
    view = store.job(job_id)
    assert view is not None and view["progress"]["total"] == 1


def test_a_job_cancelled_through_another_server_is_not_renewed_and_ends_cancelled(
    stores: Callable[[str], PgJobStore],
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
