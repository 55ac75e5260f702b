"""supervisor/supervision/work.py: a task's kind types its payload, its frame and its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sidecar.shared.protocol import ProtocolError, Tier, validate
from supervisor.supervision.work import Alignment, Batch, Encoding, Generation, Transcription

AUDIO = {"audio": b"\0\0", "encoding": "s16le", "sample_rate": 24000}


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def test_each_kind_makes_its_own_valid_frame() -> None:
    async def scenario() -> None:
        voice = {**AUDIO, "ref_text": "hi", "preprocess": True}
        heard = {**AUDIO, "text": "hi", "language": None}
        item = {"id": "g", "text": "Hello."}
        cases = [
            (Batch(1, "encode", [Encoding(id="e", payload=voice, tier=Tier.BULK)]), "encode_voice"),
            (
                Batch(2, "transcribe", [Transcription(id="t", payload=heard, tier=Tier.BULK)]),
                "transcribe",
            ),
            (Batch(3, "align", [Alignment(id="a", payload=heard, tier=Tier.BULK)]), "align"),
            (Batch(4, "generate", [Generation(id="g", payload=item, tier=Tier.BULK)]), "generate"),
        ]
        for batch, op in cases:
            frame = batch.frame()
            assert frame["op"] == op and frame["batch"] == batch.id
            validate(dict(frame))  # what the sidecar accepts: exact keys, exact types
        assert cases[3][0].frame()["items"] == [item]  # type: ignore[typeddict-item]

    run(scenario)


def test_a_batch_mixing_kinds_is_refused() -> None:
    async def scenario() -> None:
        voice = {**AUDIO, "ref_text": "hi", "preprocess": True}
        tasks = [
            Generation(id="g", payload={"id": "g", "text": "Hi."}, tier=Tier.BULK),
            Encoding(id="e", payload=voice, tier=Tier.BULK),
        ]
        with pytest.raises(TypeError, match="mixes"):
            Batch(1, "generate", tasks).frame()

    run(scenario)


def test_a_task_takes_only_its_kinds_answer() -> None:
    async def scenario() -> None:
        task = Generation(id="g", payload={"id": "g", "text": "Hi."}, tier=Tier.BULK)
        with pytest.raises(ProtocolError, match="encoded for g, a task to generate"):
            task.resolve({"op": "encoded", "batch": 1, "id": "g", "voice": {}})
        assert not task.done
        result = {"op": "result", "id": "g", "audio": b"", "timings": {}}
        task.resolve(result)
        assert task.future.result() is result

    run(scenario)
