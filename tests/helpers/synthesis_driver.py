"""Drives a real SynthesisRun through the real scheduler, playing the pool: every task is answered
with `audio_samples` of a constant non-zero level, so stitched silence (zeros) shows."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from supervisor.settings import Settings
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.lexicons import Lexicon
from supervisor.speech.synthesis import script
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.supervision.scheduler import Scheduler

RATE = 24000
LEVEL = struct.pack("<h", 1000)


@dataclass
class Run:
    synthesis: SynthesisRun
    payloads: list[dict[str, Any]]  # what each task asked the sidecar, in submission order
    pieces: list[ChunkAudio]  # what the synthesis yielded, in order


def drive(  # noqa: PLR0913  a test driver: each keyword one thing a test varies
    body: dict[str, Any],
    settings: Settings | None = None,
    voice: Voice | None = None,
    voices: Callable[[str], Voice] | None = None,
    lexicon: Lexicon | None = None,
    audio_samples: int = 2400,
    chunk_s: float = 5.0,
    captions: bool = False,
) -> Run:
    settings = settings or Settings(engine="null")

    async def scenario() -> Run:
        scheduler = Scheduler(settings.scheduling)
        request = schemas.speech_request(body, settings.speech)
        synthesis = SynthesisRun(
            scheduler,
            request,
            voice or Voice(),
            replace(settings.speech, chunk_s=chunk_s),
            voices=voices,
            text=await script.read_off_loop(request, settings.speech, lexicon),
            captions=captions,
        )
        run = Run(synthesis, [], [])

        async def consume() -> None:
            async for piece in synthesis.pieces():
                run.pieces.append(piece)

        consumer = asyncio.ensure_future(consume())
        while not consumer.done():
            await asyncio.sleep(0)  # a turn of the loop: the synthesis runs, then this sidecar
            batch = scheduler.next_batch()
            for task in batch.tasks if batch else []:
                run.payloads.append(task.payload)
                tokens = (
                    [{"shape": [1, 1], "data": b"\0\0"}]
                    if task.payload.get("return_tokens")
                    else []
                )
                scheduler.resolve(
                    task,
                    {
                        "op": "result",
                        "id": task.id,
                        "audio": LEVEL * audio_samples,
                        "sample_rate": RATE,
                        "seed": task.payload["seed"],
                        "tokens": tokens,
                        "timings": {},
                    },
                )
        await consumer
        return run

    return asyncio.run(scenario())
