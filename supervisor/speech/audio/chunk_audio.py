"""A chunk's audio as a speech request hands it on: made once, where `SynthesisRun.account` takes
the chunk's last attempt into the request's books, and read as it is by everything after it
(the routes, the WebSocket, the job runner, captions and word timing).

    ChunkAttempt     a chunk's last generation: its `result` frame (the ASR round trip's checks
                merged into its `qa`), how many generations it took, whether it went unheard
    ChunkAudio       what is handed on: the audio with the silence asked for around it, its rate,
                seed and checks, and the attempt's count
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.shared.protocol import QaCheck, Result


@dataclass(frozen=True)
class ChunkAttempt:
    """A chunk's last generation, before it is accounted for."""

    result: Result  # its `qa` holds the sidecar's checks and the ASR round trip's
    count: int  # 1 for the first generation, 2 after one QA retry, ...
    unheard: bool = (
        False  # the ASR sidecar could not hear it (supervisor/speech/checks/asr_round_trip.py)
    )


@dataclass(frozen=True)
class ChunkAudio:
    """One chunk's audio, in order, as the request answers with it."""

    id: str  # the task id of the attempt it came from
    audio: bytes  # 16-bit little-endian mono PCM, the silence before and after it included
    sample_rate: int
    seed: int | None  # the seed the sidecar generated it with
    qa: dict[str, QaCheck]  # the checks of its audio, by name (none from the null engine)
    attempts: int  # generations it took (QA retries + 1)
    asr_skipped: bool  # it went out unheard by the ASR sidecar
    timings: dict[str, float]  # the sidecar's own (`audio_s`, stage times)

    @classmethod
    def of(cls, attempt: ChunkAttempt, lead: int = 0, pause: int = 0) -> ChunkAudio:
        """The attempt's audio with `lead` samples of silence before it and `pause` after it."""
        result = attempt.result
        audio = result["audio"]
        if lead or pause:
            audio = bytes(2 * lead) + audio + bytes(2 * pause)
        return cls(
            result["id"],
            audio,
            result["sample_rate"],
            result["seed"],
            result.get("qa", {}),
            attempt.count,
            attempt.unheard,
            result.get("timings", {}),
        )

    @property
    def samples(self) -> int:
        return len(self.audio) // 2
