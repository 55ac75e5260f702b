"""The ASR sidecar (`python -m sidecar --engine whisper`): the same frame loop and lifecycle as
the OmniVoice sidecar (hello, progress, ready, ping, shutdown, orphan watch), answering
`transcribe` frames instead of `generate`.

A `transcribe` frame holds audio (PCM, or a whole uploaded file, decoded here as voice uploads
are) and the text that was read. The answer is one `transcript` with the text heard and, when
there was a text to compare with, the checks `wer` and `divergent_run` (sidecar/audio/wer.py) against
`--qa-thresholds`; then `done`. A `step` frame per 30 s window is the supervisor's heartbeat.
The test hooks (sidecar/serve/hooks.py) see the text before it is transcribed and every window:
the fault tests' entry point kills or stalls a transcription there (`crash`, `hang`, `slow:S`).

An `align` frame holds a segment's audio and the text that was read; the answer is one
`aligned` with each word's start and end (sidecar/audio/align.py: the same Whisper, its
cross-attention over the known text), then `done`, after one `step` (the heartbeat).
"""

from __future__ import annotations

import os
import time

import numpy as np

from sidecar.audio.align import Aligner
from sidecar.audio.asr import Transcriber
from sidecar.audio.wer import compare
from sidecar.serve import engines
from sidecar.serve.loop import Sidecar
from sidecar.serve.wire_arrays import decode_reference
from sidecar.shared.errors import CheckpointError
from sidecar.shared.protocol import (
    Align,
    EncodeVoice,
    ErrorKind,
    ExitCode,
    Generate,
    QaCheck,
    Transcribe,
)

WARMUP_S = 1.0


class AsrSidecar(Sidecar):
    transcriber: Transcriber | None = None
    aligner: Aligner | None = None

    def load(self) -> int | None:
        self.channel.send({"op": "progress", "stage": "start"})
        self.hooks.on_load(lambda kind, text: self.send_error(None, None, ErrorKind(kind), text))
        dtype = engines.resolve_dtype(self.args.dtype, self.device)
        try:
            self.progress("asr")
            self.transcriber = Transcriber(self.args.model, self.device, dtype)
            self.progress("warmup")
            rate = self.transcriber.sample_rate
            self.transcriber.transcribe(np.zeros(int(WARMUP_S * rate), np.float32), rate, None)
            self.aligner = Aligner(
                self.transcriber.model,
                self.transcriber.processor,
                self.device,
                self.transcriber.dtype,
            )
        except (CheckpointError, OSError, ValueError, ImportError) as exc:
            self.send_error(None, None, ErrorKind.LOAD_FAILED, f"{type(exc).__name__}: {exc}")
            return ExitCode.LOAD_ERROR
        self.channel.send(
            {
                "op": "ready",
                "device": self.device,
                "model": self.args.model,
                "engine": self.args.engine,
                "memory": engines.memory_stats(self.device),
                "sample_rate": self.transcriber.sample_rate,
            }
        )
        return None

    def handle_transcribe(self, message: Transcribe) -> None:
        batch, item_id = message["batch"], message["id"]
        assert self.transcriber is not None
        text, faults = self.hooks.item(message["text"])
        try:
            audio, rate = decode_reference(message)  # type: ignore[arg-type]

            def on_window(step: int, windows: int) -> None:
                self.channel.send({"op": "step", "batch": batch, "step": step, "of": windows})
                self.hooks.on_step(faults, step, windows, 1)  # crash, hang, slow: mid-way

            started = time.monotonic()
            heard = self.transcriber.transcribe(audio, rate, message["language"], on_window)
        except Exception as exc:
            if engines.is_device_fatal(exc):
                os._exit(ExitCode.DEVICE_FATAL)  # a fresh process takes over, as in serve.py
            self.send_errors(batch, self.item_errors([item_id], exc))
        else:
            self.channel.send(
                {
                    "op": "transcript",
                    "batch": batch,
                    "id": item_id,
                    "text": heard,
                    "qa": self.round_trip(text, heard),
                }
            )
            self.channel.send(
                {
                    "op": "done",
                    "batch": batch,
                    "stats": {"items": 1, "wall_s": time.monotonic() - started},
                }
            )
            return
        self.channel.send({"op": "done", "batch": batch, "stats": {"items": 1}})

    def handle_align(self, message: Align) -> None:
        batch, item_id = message["batch"], message["id"]
        assert self.aligner is not None
        text, faults = self.hooks.item(message["text"])
        try:
            audio, rate = decode_reference(message)  # type: ignore[arg-type]
            self.channel.send({"op": "step", "batch": batch, "step": 1, "of": 1})
            self.hooks.on_step(faults, 1, 1, 1)  # crash, hang, slow
            started = time.monotonic()
            words = self.aligner.align(audio, rate, text, message["language"])
        except Exception as exc:
            if engines.is_device_fatal(exc):
                os._exit(ExitCode.DEVICE_FATAL)
            self.send_errors(batch, self.item_errors([item_id], exc))
            self.channel.send({"op": "done", "batch": batch, "stats": {"items": 1}})
            return
        self.channel.send({"op": "aligned", "batch": batch, "id": item_id, "words": list(words)})
        self.channel.send(
            {
                "op": "done",
                "batch": batch,
                "stats": {"items": 1, "wall_s": time.monotonic() - started},
            }
        )

    def round_trip(self, read: str, heard: str) -> dict[str, QaCheck]:
        if not read:
            return {}
        limits = self.args.qa_thresholds
        rate, run = compare(read, heard)
        return {
            "wer": {"passed": rate <= limits.max_wer, "value": round(rate, 4)},
            "divergent_run": {"passed": run <= limits.max_divergent_run, "value": float(run)},
        }

    def handle_generate(self, message: Generate) -> None:
        self.refuse(message["batch"], [item["id"] for item in message["items"]])

    def handle_encode_voice(self, message: EncodeVoice) -> None:
        self.refuse(message["batch"], [message["id"]])

    def refuse(self, batch: int, ids: list[str]) -> None:
        why = "this is an ASR sidecar: it only transcribes"
        self.send_errors(batch, [(i, ErrorKind.INVALID_INPUT, why) for i in ids])
        self.channel.send({"op": "done", "batch": batch, "stats": {"items": float(len(ids))}})

    def drain(self) -> None:
        """Answers go out in the frame loop itself: nothing is left to wait for."""
