"""The ASR round trip's deadline and skips (supervisor/speech/checks/asr_round_trip.py), on a real Scheduler
that no ASR sidecar answers: the transcript comes back, or the chunk goes out unheard."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sidecar.shared.tiers import Tier
from supervisor.settings import Settings
from supervisor.speech.checks.asr_round_trip import AsrRoundTrip
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.waits import async_wait_until

FIELDS = {
    "audio": b"\0\0" * 240,
    "encoding": "s16le",
    "sample_rate": 24000,
    "text": "hi",
    "language": None,
}


def hearing(sidecars: list[dict[str, Any]], now: list[float]) -> tuple[AsrRoundTrip, Scheduler]:
    asr = Scheduler(Settings(engine="null").scheduling)
    return AsrRoundTrip(asr, lambda: sidecars, 0.05, 60.0, clock=lambda: now[0]), asr


def test_a_missed_deadline_skips_at_once_until_the_quiet_ends_or_a_restart() -> None:
    async def scenario() -> None:
        sidecars, now = [{"state": "ready", "restarts": 0}], [0.0]
        ears, asr = hearing(sidecars, now)
        assert await ears.transcript(FIELDS, Tier.INTERACTIVE) is None  # nobody answers
        assert not ears.can_hear()
        start = time.monotonic()
        assert await ears.transcript(FIELDS, Tier.INTERACTIVE) is None
        assert time.monotonic() - start < ears.deadline_s  # not waited out again
        now[0] = 59.0
        assert not ears.can_hear()
        sidecars[0]["restarts"] = 1  # the pool replaced the stalled sidecar
        assert ears.can_hear()
        sidecars[0]["restarts"] = 0
        now[0] = 60.0  # or the quiet is over
        assert ears.can_hear()

        async def answer() -> None:
            batch = await async_wait_until(asr.next_batch, 10, "the transcript's batch")
            for task in batch.tasks:
                asr.resolve(task, {"op": "transcript", "text": "hi", "qa": {}})

        answering = asyncio.ensure_future(answer())
        heard = await ears.transcript(FIELDS, Tier.INTERACTIVE)
        await answering
        assert heard is not None and heard["text"] == "hi"

    asyncio.run(scenario())


def test_no_asr_sidecar_able_to_take_work_means_no_task_at_all() -> None:
    async def scenario() -> None:
        for state in ("starting", "backoff", "failed", "stopping"):
            ears, asr = hearing([{"state": state, "restarts": 2}], [0.0])
            assert await ears.transcript(FIELDS, Tier.BULK) is None
            assert asr.next_batch() is None and not asr.has_work()

    asyncio.run(scenario())


def test_an_asr_pool_that_refuses_the_task_is_a_skip_not_an_error() -> None:
    async def scenario() -> None:
        ears, asr = hearing([{"state": "ready", "restarts": 0}], [0.0])
        asr.capacity = 0  # the pool failed between the look and the submit
        assert await ears.transcript(FIELDS, Tier.INTERACTIVE) is None

    asyncio.run(scenario())
