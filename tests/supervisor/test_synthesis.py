"""supervisor/synthesis.py: chunk modes, continuity prompts, seeds, reservations and cancellation.

The scheduler is real; the test plays the pool: it takes batches and answers their tasks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sidecar.protocol import TokenArray
from sidecar.text import CHUNK_SEED_STRIDE
from supervisor import schemas
from supervisor.errors import Overloaded, TaskFailed
from supervisor.scheduler import Batch, Scheduler
from supervisor.settings import Settings
from supervisor.synthesis import Synthesis, Voice

LONG = (
    "The harbour was quiet that morning. Mr. Smith walked down to the pier, carrying a basket of bread. "
    * 6
)
PROMPT = {
    "tokens": {"shape": [8, 30], "data": bytes(8 * 30 * 2)},
    "ref_text": "A saved voice.",
    "ref_rms": 0.1,
}  # ~1.2 s


def request(**fields: Any) -> schemas.SpeechRequest:
    return schemas.speech_request({"input": LONG, "seed": 7, **fields}, Settings(engine="null"))


def tokens_of(item: dict[str, Any]) -> TokenArray:
    """Tokens that name the chunk they came from, so a prompt can be traced to its source."""
    marker = int(item["id"].rsplit("-", 1)[1])
    return {"shape": [1, 1], "data": bytes([marker, 0])}


def answer(batch: Batch) -> list[dict[str, Any]]:
    results = []
    for task in batch.tasks:
        item = task.payload
        results.append({"op": "result", "id": item["id"], "audio": b"\0\0" * 2400, "sample_rate": 24000, "seed": item["seed"],
                        "tokens": [tokens_of(item)] if item.get("return_tokens") else [], "timings": {}})  # fmt: skip
    return results


async def run(
    synthesis: Synthesis, scheduler: Scheduler, fail: int | None = None
) -> tuple[list[Batch], list[Any]]:
    """Drive the synthesis to its end; returns the batches it made and its pieces (or its error)."""
    pieces: list[Any] = []

    async def consume() -> None:
        try:
            async for piece in synthesis.pieces():
                pieces.append(piece)
        except TaskFailed as exc:
            pieces.append(exc)

    consumer = asyncio.ensure_future(consume())
    batches: list[Batch] = []
    while not consumer.done():
        await asyncio.sleep(0)
        batch = scheduler.next_batch()
        if batch is None:
            continue
        batches.append(batch)
        for task, result in zip(batch.tasks, answer(batch)):
            if fail is not None and task.id.endswith(f"-{fail}"):
                scheduler.reject(task, TaskFailed("boom"))
            else:
                scheduler.resolve(task, result)
    return batches, pieces


def ids(batch: Batch) -> list[int]:
    return [int(t.id.rsplit("-", 1)[1]) for t in batch.tasks]


def test_concurrent_runs_chunk_zero_then_the_rest_prompted_with_it() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(scheduler, request(), Voice(), chunk_s=5.0)
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
        assert [p["id"] for p in pieces] == [f"{synthesis.id}-{i}" for i in range(count)]
        assert [p["seed"] for p in pieces] == [
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
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(
            scheduler, request(chunk_mode="sequential"), Voice(instruct="male"), chunk_s=5.0
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
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(scheduler, request(), Voice(prompt=PROMPT), chunk_s=5.0)
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
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(scheduler, request(**fields), Voice(), chunk_s=5.0)
        batches, pieces = await run(synthesis, scheduler)
        assert [ids(b) for b in batches] == [[0]] and len(pieces) == 1
        assert batches[0].tasks[0].payload["text"] == synthesis.request.input
        assert "return_tokens" not in batches[0].tasks[0].payload

    asyncio.run(scenario())


def test_a_failed_chunk_ends_the_request_and_cancels_the_rest() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(scheduler, request(), Voice(prompt=PROMPT), chunk_s=5.0)
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
        scheduler = Scheduler(Settings(engine="null"))
        synthesis = Synthesis(scheduler, request(), Voice(prompt=PROMPT), chunk_s=5.0)
        pieces = synthesis.pieces()
        waiting = asyncio.ensure_future(pieces.__anext__())
        await asyncio.sleep(0)
        assert len(scheduler.unfinished) == len(synthesis.chunks)
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
        scheduler = Scheduler(Settings(engine="null", max_queue_audio_s=60))
        held = Synthesis(
            scheduler, request(input=LONG * 2), Voice(), chunk_s=5.0
        )  # ~120 s: fits an empty queue
        before = scheduler.admitted_audio_s
        with pytest.raises(Overloaded):
            Synthesis(scheduler, request(input=LONG * 2), Voice(), chunk_s=5.0)  # the queue is full
        assert (
            scheduler.admitted_audio_s == before
        )  # none of the refused one's chunks were admitted
        held.close()
        assert scheduler.admitted_audio_s == 0
        reserved = Synthesis(scheduler, request(), Voice(), chunk_s=5.0)
        assert (
            scheduler.admitted_audio_s > 30 and not scheduler._idle.is_set()
        )  # a drain waits for it
        scheduler.close(Overloaded("draining"))
        await run(reserved, scheduler)  # admitted before the drain: its later chunks still run
        assert scheduler._idle.is_set()

    asyncio.run(scenario())
