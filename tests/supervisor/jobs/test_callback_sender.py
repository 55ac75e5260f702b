"""The callback sender against a real job store and a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.jobs.callback_sender import HOLD_S, CallbackSender, backoff_s
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.settings import Settings
from tests.helpers.callback_receivers import Webhook, webhook
from tests.helpers.job_store import ended_job


@pytest.fixture
def receiver() -> Iterator[Webhook]:
    with webhook([503]) as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteJobStore]:
    opened = SqliteJobStore(tmp_path)
    yield opened
    opened.close()


def test_the_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(2.0, n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert backoff_s(2.0, 30) == 600.0


def test_a_failed_attempt_waits_its_backoff_and_the_next_delivers(
    store: SqliteJobStore, receiver: Webhook
) -> None:
    settings = Settings(
        engine="null", callback_allow=("127.0.0.1:*",), callback_secret="s", callback_backoff_s=0.5
    )
    job_id = ended_job(store, f"http://127.0.0.1:{receiver.server_address[1]}/")

    async def scenario() -> None:
        sender = CallbackSender(settings.jobs, settings.tenancy, store, lambda job: job)
        try:
            while not receiver.statuses or sender.sending:
                await sender.dispatch()
                await asyncio.sleep(0.05)  # runner passes, paced as the runner paces them
            await sender.dispatch()  # within the backoff: nothing is sent
            await asyncio.sleep(0.1)  # time for a wrong send to arrive, within the 0.5 s backoff
            assert receiver.statuses == [503]
            deadline = time.monotonic() + 30
            while store.job(job_id, False)["callback"]["state"] == "pending":  # type: ignore[index]
                assert time.monotonic() < deadline, "the second attempt was not delivered in 30 s"
                await sender.dispatch()
                await asyncio.sleep(0.05)  # runner passes, paced as the runner paces them
        finally:
            await sender.close()

    asyncio.run(scenario())
    assert receiver.statuses == [503, 200]
    view = store.job(job_id, False)
    assert view is not None and view["callback"]["attempts"] == 2


def test_an_attempt_the_store_cannot_record_is_held_back_not_repeated(
    store: SqliteJobStore, receiver: Webhook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's write fails as on a full disk (the real full disk, a tmpfs, is in
    tests/integration/test_hardening.py); here the failure is injected into the store method."""
    receiver.answers.clear()
    settings = Settings(engine="null", callback_allow=("127.0.0.1:*",), callback_secret="s")
    job_id = ended_job(store, f"http://127.0.0.1:{receiver.server_address[1]}/")

    def disk_full(*_args: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "callback_attempted", disk_full)

    async def scenario() -> None:
        sender = CallbackSender(settings.jobs, settings.tenancy, store, lambda job: job)
        try:
            for _ in range(20):  # ten runner passes' worth
                await sender.dispatch()
                await asyncio.sleep(0.05)  # the passes' pace is what the hold is measured against
            assert job_id in sender.held and sender.held[job_id] > time.monotonic() + HOLD_S / 2
        finally:
            await sender.close()

    asyncio.run(scenario())
    assert receiver.statuses == [200]  # sent once, not once per pass
