"""An item's `result` frame: its audio on the wire, its seed and tokens, its timings and, from a
real engine, its quality checks (`sidecar.audio.checks`)."""

from __future__ import annotations

import numpy as np

from sidecar.audio.checks import run_checks
from sidecar.runtime.request import GenerationResult
from sidecar.serve.batch_run import BatchEntry
from sidecar.serve.wire_arrays import audio_to_wire, tokens_to_wire
from sidecar.shared.protocol import Encoding, Result
from sidecar.shared.thresholds import Thresholds


def result_message(  # noqa: PLR0913  one item's answer: which batch, the item, what it made, how sent
    batch: int,
    entry: BatchEntry,
    result: GenerationResult,
    audio: np.ndarray,
    encoding: Encoding,
    wall: float,
    checks: Thresholds | None,
) -> Result:
    """The frame for `result` with `audio` (the result's, or what a test hook made of it);
    `checks`: the thresholds of its quality checks, None for none (the null engine's silence is
    for overhead benchmarks)."""
    message: Result = {
        "op": "result",
        "batch": batch,
        "id": entry.id,
        "audio": audio_to_wire(audio, encoding),
        "encoding": encoding,
        "sample_rate": int(result.sample_rate),
        "seed": result.seed,
        "tokens": [tokens_to_wire(t) for t in result.tokens] if entry.request.return_tokens else [],
        "timings": {"generate_s": wall, "audio_s": len(audio) / max(1, result.sample_rate)},
    }
    if checks is not None:
        request = entry.request
        message["qa"] = run_checks(
            audio,
            result.sample_rate,
            request.text,
            checks,
            request.speed,
            request.duration is not None,
        )
    return message
