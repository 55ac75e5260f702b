"""The callback exchange's bounds against real receivers on the loopback: a receiver trickling
its answer, a gzip answer inflating to 1 GiB, many slow receivers on one host beside a healthy
one on another, and URLs stored before they were checked. A real job store (SQLite) and real
sockets; the receivers (tests/helpers/callback_receivers.py) misbehave on purpose."""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from supervisor.jobs.callback_sender import CallbackSender
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.settings import Settings
from tests.helpers.callback_receivers import OK, Receiver, close, gzip_answer, serve
from tests.helpers.job_store import ended_job


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    started: list[Receiver] = []
    yield started
    for receiver in started:
        close(receiver)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteJobStore]:
    opened = SqliteJobStore(tmp_path)
    yield opened
    opened.close()


def callback(store: SqliteJobStore, job_id: str) -> dict[str, Any]:
    job = store.job(job_id, False)
    assert job is not None
    return dict(job["callback"])


async def run_until(sender: CallbackSender, settled: Any, within_s: float, what: str) -> None:
    """Runner passes until `settled()` holds."""
    deadline = time.monotonic() + within_s
    while not settled():
        assert time.monotonic() < deadline, f"{what}: not within {within_s} s"
        await sender.dispatch()
        await asyncio.sleep(0.05)  # runner passes, paced as the runner paces them


def settings(**values: Any) -> Settings:
    return Settings(
        engine="null",
        callback_allow=("127.0.0.1:*", "127.0.0.2:*"),
        callback_secret="s",
        callback_backoff_s=0.1,
        **values,
    )


def test_a_trickling_receiver_fails_each_attempt_at_the_deadline(
    store: SqliteJobStore, receivers: list[Receiver]
) -> None:
    """A byte every 0.2 s never lets a read wait 1 s: only a deadline on the whole exchange ends
    it. Both attempts are counted, and the callback ends `failed`."""
    slow = serve(Receiver("127.0.0.1", OK, every_s=0.2, endless=True))
    receivers.append(slow)
    job_id = ended_job(store, slow.url())
    config = settings(callback_timeout_s=1.0, callback_attempts=2)

    async def scenario() -> float:
        sender = CallbackSender(config.jobs, config.tenancy, store, lambda job: job)
        started = time.monotonic()
        try:
            await run_until(
                sender,
                lambda: callback(store, job_id)["state"] != "pending",
                60,
                "the trickled callback",
            )
        finally:
            await sender.close()
        return time.monotonic() - started

    took_s = asyncio.run(scenario())
    record = callback(store, job_id)
    assert record["state"] == "failed" and record["attempts"] == 2, record
    assert record["last_status"] is None
    assert record["last_error"] == "no answer within --callback-timeout-s (1 s)"
    assert slow.requests == 2 and took_s >= 2.0


def test_a_gzip_answer_inflating_to_a_gibibyte_is_neither_read_nor_inflated(
    store: SqliteJobStore, receivers: list[Receiver]
) -> None:
    """The status decides; the body (1 MiB of gzip, 1 GiB inflated) is left unread. The
    process's resident memory, sampled every 10 ms through the exchange, stays within 32 MiB of
    where it began (reading it whole and inflating it, as httpx's `post` does, takes 1 GiB)."""
    answer = gzip_answer()
    bomb = answer[answer.index(b"\r\n\r\n") + 4 :]
    assert len(bomb) < 1.1 * 2**20 and struct.unpack("<I", bomb[-4:]) == (2**30,)
    assert zlib.decompressobj(31).decompress(bomb, 2**20) == bytes(2**20)  # its first MiB
    receiver = serve(Receiver("127.0.0.1", answer))
    receivers.append(receiver)
    job_id = ended_job(store, receiver.url())
    process, peak, done = psutil.Process(), [0], threading.Event()
    before = process.memory_info().rss

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], process.memory_info().rss)

    async def scenario() -> None:
        config = settings()
        sender = CallbackSender(config.jobs, config.tenancy, store, lambda job: job)
        try:
            await run_until(
                sender,
                lambda: callback(store, job_id)["state"] != "pending",
                60,
                "the gzip-answered callback",
            )
        finally:
            await sender.close()

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        asyncio.run(scenario())
    finally:
        done.set()
        sampler.join()
    assert callback(store, job_id) == {
        "state": "delivered",
        "attempts": 1,
        "last_status": 200,
        "last_error": None,
    }
    print(f"resident memory grew {(peak[0] - before) / 2**20:.1f} MiB at most")
    assert peak[0] - before < 32 * 2**20, f"grew {(peak[0] - before) / 2**20:.1f} MiB"


def test_slow_receivers_on_one_host_leave_slots_for_another_host(
    store: SqliteJobStore, receivers: list[Receiver]
) -> None:
    """Six callbacks to a trickling host, two slots per host, three in all: the healthy host's
    callback is delivered while most of the slow ones still wait for their host's slots (without
    the per-host bound they would hold all three). Waiting is no attempt: each slow callback
    ends `failed` after its one attempt, at the deadline, not at a pool's timeout."""
    slow = serve(Receiver("127.0.0.1", OK, every_s=0.2, endless=True))
    healthy = serve(Receiver("127.0.0.2", OK))
    receivers.extend([slow, healthy])
    slow_jobs = [ended_job(store, slow.url()) for _ in range(6)]
    healthy_job = ended_job(store, healthy.url())
    config = settings(
        callback_timeout_s=1.0,
        callback_attempts=1,
        callback_host_concurrency=2,
        callback_concurrency=3,
    )
    waiting: list[int] = []

    def delivered() -> bool:
        if callback(store, healthy_job)["state"] != "delivered":
            return False
        waiting.append(sum(callback(store, job)["attempts"] == 0 for job in slow_jobs))
        return True

    async def scenario() -> None:
        sender = CallbackSender(config.jobs, config.tenancy, store, lambda job: job)
        try:
            await run_until(sender, delivered, 30, "the healthy host's callback")
            await run_until(
                sender,
                lambda: all(callback(store, job)["state"] == "failed" for job in slow_jobs),
                60,
                "the slow callbacks",
            )
        finally:
            await sender.close()

    asyncio.run(scenario())
    assert waiting[0] >= 4, f"only {waiting[0]} slow callbacks still waiting"
    for job in slow_jobs:
        assert callback(store, job) == {
            "state": "failed",
            "attempts": 1,
            "last_status": None,
            "last_error": "no answer within --callback-timeout-s (1 s)",
        }
    assert slow.requests == 6 and healthy.requests == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/a\tb",
        "http://[127.0.0.1]:9/",
        "http://127.0.0.1:9/\r\nX: 1",
        "http://10.0.0.1/",
    ],
)
def test_a_stored_url_the_sender_refuses_is_a_counted_attempt_then_failed(
    store: SqliteJobStore, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A URL stored before submissions were checked this strictly (or off today's allow-list):
    every attempt is counted, one log line each, no traceback, and the callback ends `failed`."""
    job_id = ended_job(store, url)

    async def scenario() -> None:
        config = settings(callback_attempts=2)
        sender = CallbackSender(config.jobs, config.tenancy, store, lambda job: job)
        try:
            await run_until(
                sender,
                lambda: callback(store, job_id)["state"] != "pending",
                30,
                "the refused callback",
            )
        finally:
            await sender.close()

    with caplog.at_level(logging.INFO, logger="omnivoice.callbacks"):
        asyncio.run(scenario())
    record = callback(store, job_id)
    assert record["state"] == "failed" and record["attempts"] == 2, record
    assert "callback_url" in record["last_error"] or "may not go" in record["last_error"]
    lines = [r for r in caplog.records if r.name == "omnivoice.callbacks"]
    assert len(lines) == 2 and not any(r.exc_info for r in lines)


def test_a_summary_that_cannot_be_made_is_a_counted_attempt_then_failed(
    store: SqliteJobStore, receivers: list[Receiver], caplog: pytest.LogCaptureFixture
) -> None:
    """An error of no family the sender expects (here the summary raising) is an attempt like
    any other: the receiver gets nothing, and the callback ends `failed`, one line per attempt."""
    receiver = serve(Receiver("127.0.0.1", OK))
    receivers.append(receiver)
    job_id = ended_job(store, receiver.url())

    def broken(_job: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("no summary today")

    async def scenario() -> None:
        config = settings(callback_attempts=2)
        sender = CallbackSender(config.jobs, config.tenancy, store, broken)
        try:
            await run_until(
                sender,
                lambda: callback(store, job_id)["state"] != "pending",
                30,
                "the unsummarised callback",
            )
        finally:
            await sender.close()

    with caplog.at_level(logging.INFO, logger="omnivoice.callbacks"):
        asyncio.run(scenario())
    assert callback(store, job_id) == {
        "state": "failed",
        "attempts": 2,
        "last_status": None,
        "last_error": "ValueError: no summary today",
    }
    lines = [r for r in caplog.records if r.name == "omnivoice.callbacks"]
    assert len(lines) == 2 and not any(r.exc_info for r in lines) and receiver.requests == 0
