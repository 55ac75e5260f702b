"""The ASR round trip (`--asr-model`): a second kind of sidecar, `python -m sidecar --engine
whisper`, supervised exactly as the OmniVoice ones (the same Pool: load and heartbeat deadlines,
pings, SIGKILL, respawn, restart intensity, reaping) with a scheduler of its own.

One ASR sidecar runs on the first device beside the OmniVoice sidecar there. It transcribes each
generated chunk, and the transcript's checks (`wer`, `divergent_run`) join the chunk's own, so a
chunk whose words came out wrong is retried like any other failed check (supervisor/speech/checks/quality.py).
It also transcribes a clone reference uploaded without a transcript, and times the words of a
caption segment (`align`, for word timestamps: supervisor/speech/checks/word_timestamps.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sidecar.shared.protocol import AsrAudio
from sidecar.shared.tiers import Tier
from supervisor.errors import Unavailable, Unprocessable
from supervisor.supervision.gpu import Device
from supervisor.supervision.pool import Pool
from supervisor.supervision.process import FrameHandler, SidecarProcess
from supervisor.supervision.scheduler import Scheduler
from supervisor.supervision.sidecar_command import sidecar_argv, sidecar_env

ENGINE = "whisper"


class AsrPool(Pool):
    """Sidecars that run the Whisper checkpoint of --asr-model."""

    def sidecar_process(
        self, device: Device, on_frame: FrameHandler, wake: Callable[[], None]
    ) -> SidecarProcess:
        argv = sidecar_argv(self.settings.sidecar, device, ENGINE, self.settings.sidecar.asr_model)
        return SidecarProcess(
            device,
            argv,
            sidecar_env(device),
            self.settings.sidecar.max_frame_bytes,
            on_frame,
            wake,
            self.clock,
        )


def asr_devices(found: list[Device]) -> list[Device]:
    """Where the ASR sidecar runs: the first device, under a name of its own (`asr-gpu0`)."""
    first = found[0]
    return [Device(f"asr-{first.id}", first.name, first.index)]


async def transcribe_reference(asr: Scheduler, upload: bytes, deadline_s: float) -> str:
    """What is said in an uploaded reference clip (any format a voice upload takes); a 503
    saying to send the transcript if none comes back within deadline_s (a stalled sidecar)."""
    fields: AsrAudio = {
        "audio": upload,
        "encoding": "file",
        "sample_rate": 0,
        "text": "",
        "language": None,
    }
    try:
        message = await asyncio.wait_for(
            asr.submit_transcribe(fields, Tier.INTERACTIVE), deadline_s
        )
    except asyncio.TimeoutError:
        raise Unavailable(
            f"the ASR sidecar gave no transcript of the reference within {deadline_s:g} s: "
            "send its 'transcript'",
            param="transcript",
            retry_after_s=5,
        ) from None
    heard = message["text"].strip()
    if not heard:
        raise Unprocessable(
            "no speech was heard in the reference audio: send its 'transcript'", param="transcript"
        )
    return heard
