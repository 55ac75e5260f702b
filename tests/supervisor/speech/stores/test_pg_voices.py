"""Saved voices in PostgreSQL (a real server, tests/helpers/pg_cluster.py): two stores as two servers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from supervisor.database import Database
from supervisor.errors import Conflict
from supervisor.speech.stores.pg_voices import PgVoiceStore
from supervisor.speech.stores.voices import SavedVoice
from tests.helpers.pg_cluster import Cluster
from tests.helpers.waits import wait_until


@pytest.fixture
def stores(pg_url: str) -> Iterator[Callable[[str], PgVoiceStore]]:
    opened: list[tuple[Database, PgVoiceStore]] = []

    def store(owner: str) -> PgVoiceStore:
        db = Database.open(pg_url, owner)
        opened.append((db, PgVoiceStore(db, pg_url)))
        return opened[-1][1]

    yield store
    for db, voices in opened:
        voices.close()
        db.close()


def designed(name: str) -> SavedVoice:
    return SavedVoice(name, int(time.time()), "prompt", prompt="female, low pitch", seed=7)


def test_a_voice_added_or_deleted_on_one_store_follows_on_the_other(
    stores: Callable[[str], PgVoiceStore],
) -> None:
    a, b = stores("va"), stores("vb")
    a.add(designed("narrator"))
    wait_until(lambda: b.get("narrator") is not None, 30, "b to see the new voice")
    assert b.get("narrator") == a.get("narrator")  # every field, seed included
    with pytest.raises(Conflict):
        b.add(designed("narrator"))
    assert b.delete("narrator")
    wait_until(lambda: a.get("narrator") is None, 30, "a to see it gone")
    assert not a.delete("narrator")


def test_a_new_store_loads_the_voices_already_saved(
    stores: Callable[[str], PgVoiceStore],
) -> None:
    stores("first").add(designed("kept"))
    assert [v.name for v in stores("later").list()] == ["kept"]


def test_a_lost_listener_reconnects_and_catches_up(
    pg_cluster: Cluster, stores: Callable[[str], PgVoiceStore]
) -> None:
    a, b = stores("va"), stores("vb-cut")
    wait_until(
        lambda: pg_cluster.terminate("omnivoice vb-cut") >= 1, 30, "b's connections"
    )  # the listener among them
    a.add(designed("while-b-was-away"))  # its NOTIFY may find nobody listening on b's side
    wait_until(lambda: b.get("while-b-was-away") is not None, 30, "b to catch up")
