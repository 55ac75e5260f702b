"""Encoding a voice through a real sidecar, then generating with it."""

from __future__ import annotations

import asyncio
import math
import struct
from pathlib import Path

from tests.helpers.harness import fast_settings, outcomes, run, running_pool


def sine_s16le(seconds: float, rate: int = 24000, hz: float = 220.0) -> bytes:
    count = int(seconds * rate)
    return struct.pack(
        f"<{count}h", *(int(8000 * math.sin(2 * math.pi * hz * i / rate)) for i in range(count))
    )


def test_encode_voice_then_generate_with_it(checkpoint_dir: Path) -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            fields = {
                "audio": sine_s16le(1.0),
                "encoding": "s16le",
                "sample_rate": 24000,
                "ref_text": "A test tone",
                "preprocess": False,
            }
            encoded = await asyncio.wait_for(pool.scheduler.submit_encode(fields), 60)
            voice = encoded["voice"]
            codebooks, frames = voice["tokens"]["shape"]
            assert codebooks == 8 and 20 <= frames <= 30 and voice["ref_text"] == "A test tone"
            [result] = await outcomes(
                pool,
                [{"id": "cloned", "text": "Say it in that voice.", "voice": voice, "seed": 1}],
                60,
            )
            assert isinstance(result, dict) and len(result["audio"]) > 0

    run(scenario())
