"""supervisor/speech/synthesis/runner.py: chunk modes, continuity prompts, seeds, reservations and cancellation.

The scheduler is real; the test plays the pool: it takes batches and answers their tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from sidecar.shared.protocol import TokenArray
from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor import metrics
from supervisor.errors import InvalidRequest, Overloaded, ServerError, TaskFailed, Unavailable
from supervisor.settings import Settings
from supervisor.speech.checks import quality
from supervisor.speech.checks.asr_round_trip import AsrRoundTrip
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.supervision.scheduler import Scheduler
from supervisor.supervision.work import Batch
from tests.helpers.waits import async_wait_until

LONG = (
    "The harbour was quiet that morning. Mr. Smith walked down to the pier, carrying a basket of bread. "
    * 6
)
PROMPT = {
    "tokens": {"shape": [8, 30], "data": bytes(8 * 30 * 2)},
    "ref_text": "A saved voice.",
    "ref_rms": 0.1,
}  # ~1.2 s


SPEECH = Settings(engine="null", chunk_s=5.0).speech  # the speech settings of most tests
STALL_S = 30.0  # generous: each step here is microseconds of work, but the machine is shared


def request(**fields: Any) -> schemas.SpeechRequest:
    return schemas.speech_request(
        {"input": LONG, "seed": 7, **fields}, Settings(engine="null").speech
    )


def tokens_of(item: dict[str, Any]) -> TokenArray:
    """Tokens that name the chunk they came from, so a prompt can be traced to its source."""
    marker = chunk_of(item["id"])
    return {"shape": [1, 1], "data": bytes([marker, 0])}


def chunk_of(task_id: str) -> int:
    """The chunk index in a task id: `<synthesis>-<chunk>`, `.<attempt>` after it for a retry."""
    return int(task_id.rsplit("-", 1)[1].split(".")[0])


def answer(batch: Batch) -> list[dict[str, Any]]:
    results = []
    for task in batch.tasks:
        item = task.payload
        results.append(
            {
                "op": "result",
                "id": item["id"],
                "audio": b"\0\0" * 2400,
                "sample_rate": 24000,
                "seed": item["seed"],
                "tokens": [tokens_of(item)] if item.get("return_tokens") else [],
                "timings": {},
            }
        )
    return results


async def run(
    synthesis: SynthesisRun,
    scheduler: Scheduler,
    fail: int | None = None,
    judge: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> tuple[list[Batch], list[Any]]:
    """Drive the synthesis to its end; returns the batches it made and its pieces (or its error).
    `judge(item)` gives each result the `qa` checks a sidecar would have sent."""
    pieces: list[Any] = []

    async def consume() -> None:
        try:
            async for piece in synthesis.pieces():
                pieces.append(piece)
        except ServerError as exc:
            pieces.append(exc)

    consumer = asyncio.ensure_future(consume())
    woken = asyncio.Event()  # the scheduler wakes its pool (here: us) when work is queued
    scheduler.wake = woken.set
    batches: list[Batch] = []
    while not consumer.done():
        woken.clear()
        batch = scheduler.next_batch()
        if batch is None:
            waker = asyncio.ensure_future(woken.wait())
            done, _ = await asyncio.wait(
                {consumer, waker}, timeout=STALL_S, return_when=asyncio.FIRST_COMPLETED
            )
            waker.cancel()
            assert done, f"the synthesis neither ended nor queued work within {STALL_S:g} s"
            continue
        batches.append(batch)
        for task, result in zip(batch.tasks, answer(batch)):
            if fail is not None and task.id.endswith(f"-{fail}"):
                scheduler.reject(task, TaskFailed("boom"))
            else:
                if judge is not None:
                    result["qa"] = judge(task.payload)
                scheduler.resolve(task, result)
    return batches, pieces


def ids(batch: Batch) -> list[int]:
    return [chunk_of(t.id) for t in batch.tasks]


def test_concurrent_runs_chunk_zero_then_the_rest_prompted_with_it() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(), Voice(), SPEECH)
        count = len(synthesis.chunks)
        assert count >= 3
        batches, pieces = await run(synthesis, scheduler)
        assert [ids(b) for b in batches] == [[0], list(range(1, count))]
        first = batches[0].tasks[0].payload
        assert first["return_tokens"] and "voice" not in first
        for task in batches[1].tasks:
            assert task.payload["voice"] == {
                "tokens": tokens_of(first),
                "ref_text": synthesis.chunks[0],
                "ref_rms": None,
            }
            assert "return_tokens" not in task.payload
        assert [p.id for p in pieces] == [f"{synthesis.id}-{i}" for i in range(count)]
        assert [p.seed for p in pieces] == [
            (7 + i * CHUNK_SEED_STRIDE) % 2**63 for i in range(count)
        ]
        assert (
            scheduler.admitted_audio_s == 0
            and not scheduler.reservations
            and scheduler._idle.is_set()
        )

    asyncio.run(scenario())


def test_sequential_prompts_each_chunk_with_the_one_before() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(
            scheduler, request(chunk_mode="sequential"), Voice(instruct="male"), SPEECH
        )
        count = len(synthesis.chunks)
        batches, pieces = await run(synthesis, scheduler)
        assert [ids(b) for b in batches] == [[i] for i in range(count)]
        for i, batch in enumerate(batches):
            payload = batch.tasks[0].payload
            assert payload["instruct"] == "male" and payload.get("return_tokens", False) == (
                i < count - 1
            )
            if i:
                assert payload["voice"]["tokens"] == tokens_of(batches[i - 1].tasks[0].payload)
                assert payload["voice"]["ref_text"] == synthesis.chunks[i - 1]
        assert len(pieces) == count

    asyncio.run(scenario())


def test_a_voice_prompt_goes_with_every_chunk_and_all_run_at_once() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(), Voice(prompt=PROMPT), SPEECH)
        batches, _pieces = await run(synthesis, scheduler)
        assert len(synthesis.chunks) >= 3 and [ids(b) for b in batches] == [
            list(range(len(synthesis.chunks)))
        ]
        assert all(
            t.payload["voice"] == PROMPT and "return_tokens" not in t.payload
            for t in batches[0].tasks
        )

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "fields", [{"chunk_mode": "none"}, {"duration": 30.0}, {"input": "Short."}]
)
def test_one_task_for_none_a_duration_or_short_input(fields: dict[str, Any]) -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(**fields), Voice(), SPEECH)
        batches, pieces = await run(synthesis, scheduler)
        assert [ids(b) for b in batches] == [[0]] and len(pieces) == 1
        assert batches[0].tasks[0].payload["text"] == synthesis.request.input
        assert "return_tokens" not in batches[0].tasks[0].payload

    asyncio.run(scenario())


def test_a_failed_chunk_ends_the_request_and_cancels_the_rest() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(), Voice(prompt=PROMPT), SPEECH)
        _batches, pieces = await run(synthesis, scheduler, fail=1)
        assert len(pieces) == 2 and isinstance(pieces[1], TaskFailed)
        assert all(f.done() for f in synthesis.futures)
        assert (
            scheduler.admitted_audio_s == 0
            and not scheduler.unfinished
            and not scheduler.reservations
        )

    asyncio.run(scenario())


def test_closing_early_cancels_queued_chunks_and_frees_the_queue() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(), Voice(prompt=PROMPT), SPEECH)
        pieces = synthesis.pieces()
        waiting = asyncio.ensure_future(pieces.__anext__())
        await async_wait_until(
            lambda: len(scheduler.unfinished) == len(synthesis.chunks), 10, "every chunk queued"
        )
        waiting.cancel()  # what a client disconnect does
        await asyncio.gather(waiting, return_exceptions=True)
        assert (
            not scheduler.unfinished
            and not scheduler.reservations
            and scheduler.admitted_audio_s == 0
        )
        assert scheduler.next_batch() is None

    asyncio.run(scenario())


def test_the_whole_request_is_admitted_or_refused_at_once() -> None:
    async def scenario() -> None:
        small = Settings(engine="null", max_queue_audio_s=60, chunk_s=5.0)
        scheduler = Scheduler(small.scheduling)
        # ~70 s: more than the whole queue admits, so never admitted, even into an empty queue
        with pytest.raises(InvalidRequest) as refused:
            SynthesisRun(scheduler, request(input=LONG * 2), Voice(), small.speech)
        assert refused.value.code == "audio_too_long" and scheduler.admitted_audio_s == 0
        held = [
            SynthesisRun(scheduler, request(), Voice(), small.speech) for _ in range(2)
        ]  # ~35 s each
        before = scheduler.admitted_audio_s
        with pytest.raises(Overloaded):
            SynthesisRun(scheduler, request(), Voice(), small.speech)  # the queue is full
        assert (
            scheduler.admitted_audio_s == before
        )  # none of the refused one's chunks were admitted
        for synthesis in held:
            synthesis.close()
        assert scheduler.admitted_audio_s == 0
        reserved = SynthesisRun(scheduler, request(), Voice(), small.speech)
        assert (
            scheduler.admitted_audio_s > 30 and not scheduler._idle.is_set()
        )  # a drain waits for it
        scheduler.close(Overloaded("draining"))
        await run(reserved, scheduler)  # admitted before the drain: its later chunks still run
        assert scheduler._idle.is_set()

    asyncio.run(scenario())


def spoiled_until(chunk: int, attempts: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Checks as a sidecar sends them: chunk `chunk` has a runaway tail in its first `attempts`."""

    def judge(item: dict[str, Any]) -> dict[str, Any]:
        bad = chunk_of(item["id"]) == chunk and item.get("attempt", 1) <= attempts
        return {
            "rms": {"passed": True, "value": -20.0},
            "internal_silence": {"passed": not bad, "value": 2.5 if bad else 0.1},
        }

    return judge


def counter(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


def test_a_chunk_that_fails_a_check_is_generated_again_with_a_derived_seed() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(), Voice(prompt=PROMPT), SPEECH)
        before = (
            counter(metrics.qa_retries),
            counter(metrics.qa_check_failures, "internal_silence"),
        )
        batches, pieces = await run(synthesis, scheduler, judge=spoiled_until(1, 1))
        retried = [t.payload for b in batches for t in b.tasks if t.payload.get("attempt")]
        assert [(chunk_of(p["id"]), p["attempt"]) for p in retried] == [(1, 2)]
        chunk_seed = (7 + CHUNK_SEED_STRIDE) % 2**63
        assert retried[0]["seed"] == quality.retry_seed(chunk_seed, 2) != chunk_seed
        assert retried[0]["text"] == synthesis.chunks[1]
        assert [p.attempts for p in pieces] == [1, 2] + [1] * (len(synthesis.chunks) - 2)
        assert synthesis.verdict.passed and synthesis.verdict.header() == "passed; attempts=2"
        after = (
            counter(metrics.qa_retries),
            counter(metrics.qa_check_failures, "internal_silence"),
        )
        assert after == (before[0] + 1, before[1] + 1)
        assert not scheduler.unfinished and not scheduler.reservations

    asyncio.run(scenario())


@pytest.mark.parametrize("retries", [0, 2])
def test_a_chunk_that_fails_every_attempt_is_reported_failed_after_the_last(retries: int) -> None:
    async def scenario() -> None:
        settings = Settings(engine="null", qa_retries=retries, chunk_s=5.0)
        scheduler = Scheduler(settings.scheduling)
        synthesis = SynthesisRun(
            scheduler, request(input="Short text to say."), Voice(), settings.speech
        )
        failed_before = counter(metrics.qa_failed)
        batches, pieces = await run(synthesis, scheduler, judge=spoiled_until(0, 99))
        assert len(batches) == retries + 1 and len(pieces) == 1
        assert [t.payload.get("attempt", 1) for b in batches for t in b.tasks] == list(
            range(1, retries + 2)
        )
        verdict = synthesis.verdict
        assert not verdict.passed and verdict.header() == f"failed; attempts={retries + 1}"
        assert verdict.summary() == {
            "passed": False,
            "attempts": retries + 1,
            "checks": {
                "rms": {"passed": True, "value": -20.0},
                "internal_silence": {"passed": False, "value": 2.5},
            },
        }
        assert "internal_silence (2.5)" in verdict.reason()
        assert counter(metrics.qa_failed) == failed_before + 1

    asyncio.run(scenario())


def test_a_chunk_whose_words_came_out_wrong_is_retried_after_the_round_trip() -> None:
    async def scenario() -> None:
        scheduler, asr = (
            Scheduler(Settings(engine="null").scheduling),
            Scheduler(Settings(engine="null").scheduling),
        )
        ready = [{"state": "ready", "restarts": 0}]
        synthesis = SynthesisRun(
            scheduler,
            request(input="Short text to say."),
            Voice(),
            SPEECH,
            asr=AsrRoundTrip(asr, lambda: ready, 60.0, 60.0),
        )
        heard: list[dict[str, Any]] = []

        async def listen() -> None:  # the ASR sidecar: the first attempt's words diverge
            while True:
                await asyncio.sleep(0)  # a turn of the loop: the synthesis runs, then this ASR
                batch = asr.next_batch()
                if batch is None:
                    continue
                (task,) = batch.tasks
                heard.append(task.payload)
                bad = len(heard) == 1
                checks = {
                    "wer": {"passed": not bad, "value": 0.9 if bad else 0.0},
                    "divergent_run": {"passed": not bad, "value": 9.0 if bad else 0.0},
                }
                asr.resolve(task, {"op": "transcript", "text": "", "qa": checks})

        listener = asyncio.ensure_future(listen())
        batches, pieces = await run(synthesis, scheduler, judge=spoiled_until(0, 0))
        listener.cancel()
        assert len(batches) == 2 and [p.attempts for p in pieces] == [2]
        assert [h["text"] for h in heard] == [synthesis.chunks[0]] * 2
        assert heard[0]["encoding"] == "s16le" and heard[0]["sample_rate"] == 24000
        summary = synthesis.verdict.summary()
        assert summary["passed"] and summary["checks"]["wer"] == {"passed": True, "value": 0.0}

    asyncio.run(scenario())


def test_no_retry_starts_once_the_server_drains() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        synthesis = SynthesisRun(scheduler, request(input="Short text to say."), Voice(), SPEECH)
        spoiled = spoiled_until(0, 99)

        def judge(item: dict[str, Any]) -> dict[str, Any]:
            scheduler.close(Unavailable("the server is shutting down"))  # SIGTERM meanwhile
            return spoiled(item)

        batches, pieces = await run(synthesis, scheduler, judge=judge)
        assert len(batches) == 1 and isinstance(pieces[0], Unavailable)
        assert not scheduler.unfinished and not scheduler.reservations

    asyncio.run(scenario())


def test_a_streamed_answer_starts_with_a_short_chunk_and_a_whole_file_does_not() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        plain = SynthesisRun(scheduler, request(), Voice(), SPEECH)
        streamed = SynthesisRun(scheduler, request(), Voice(), SPEECH, first_short=True)
        assert streamed.chunks[0] == "The harbour was quiet that morning."
        assert len(plain.chunks[0]) > 2 * len(streamed.chunks[0])
        assert " ".join(streamed.chunks) == " ".join(plain.chunks) == LONG.strip()
        # A mode that keeps the text whole stays whole, streamed or not.
        whole = SynthesisRun(
            scheduler, request(chunk_mode="none"), Voice(), SPEECH, first_short=True
        )
        assert whole.chunks == [LONG]
        for synthesis in (plain, streamed, whole):
            synthesis.close()

    asyncio.run(scenario())
