"""The sidecar's side of the frame pipes, and the arrays that travel in frames.

A `Channel` writes frames whole, from a thread of its own, a bulk batch's answers last; tokens
and audio go out as little-endian bytes; a reference clip comes in as PCM or as a whole file, decoded here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import IO

import numpy as np

from sidecar.shared.errors import InvalidAudio
from sidecar.shared.protocol import (
    TO_SIDECAR,
    EncodeVoice,
    ExitCode,
    Message,
    TokenArray,
    encode_frame,
    read_frame,
)

log = logging.getLogger("sidecar")


class Channel:
    """The private frame pipes. Frames are written whole, by a writer thread of their own, so
    that no thread that sends one waits for the pipe: the frame loop's `step` frames do not
    wait while a finisher's large `result` drains into a pipe the supervisor reads slowly.
    A bulk batch's answers (`bulk_answer`: its results, errors, `denoised` and `done`) are
    written once no other frame waits, so an interactive batch's answers and every step go
    before those already queued; each of the two keeps its order."""

    def __init__(self, rfile: IO[bytes], wfile: IO[bytes], max_frame_bytes: int) -> None:
        self.rfile = rfile
        self.wfile = wfile
        self.max_frame_bytes = max_frame_bytes
        self._queued: tuple[deque[bytes], deque[bytes]] = (deque(), deque())  # others, bulk
        self._unwritten = 0  # queued, or being written
        self._changed = threading.Condition()
        self._writer: threading.Thread | None = None

    def send(self, message: Message, bulk_answer: bool = False) -> None:
        self.write_raw(encode_frame(message, self.max_frame_bytes), bulk_answer)

    def write_raw(self, data: bytes, bulk_answer: bool = False) -> None:
        """Queue a frame for the writer thread (started by the first one) and return."""
        with self._changed:
            self._queued[1 if bulk_answer else 0].append(data)
            self._unwritten += 1
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write, name="frame-writer", daemon=True
                )
                self._writer.start()
            self._changed.notify_all()

    def queued(self) -> tuple[int, int]:
        """Frames waiting for the writer: (others, bulk answers)."""
        with self._changed:
            return len(self._queued[0]), len(self._queued[1])

    def flush(self) -> None:
        """Return once every frame sent so far is written."""
        with self._changed:
            self._changed.wait_for(lambda: self._unwritten == 0)

    def _write(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: any(self._queued))
                data = (self._queued[0] or self._queued[1]).popleft()
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except OSError as exc:  # the supervisor closed the pipe: it is gone
                log.error("cannot write a frame to the supervisor (%s); exiting", exc)
                os._exit(ExitCode.ORPHANED)
            with self._changed:
                self._unwritten -= 1
                self._changed.notify_all()

    def receive(self) -> Message | None:
        return read_frame(self.rfile, self.max_frame_bytes, TO_SIDECAR)


def tokens_to_wire(tokens: np.ndarray) -> TokenArray:
    array = np.ascontiguousarray(tokens, dtype="<i2")
    return {"shape": [int(array.shape[0]), int(array.shape[1])], "data": array.tobytes()}


def tokens_from_wire(tokens: TokenArray) -> np.ndarray:
    return np.frombuffer(tokens["data"], dtype="<i2").reshape(tokens["shape"]).astype(np.int64)


def audio_to_wire(audio: np.ndarray, encoding: str) -> bytes:
    # NaN or infinite samples (the `finite` check reports them) go out as silence, not as
    # whatever a cast of NaN to int16 happens to give.
    audio = np.nan_to_num(audio, nan=0.0, posinf=1.0, neginf=-1.0)
    if encoding == "f32le":
        return np.ascontiguousarray(audio, dtype="<f4").tobytes()
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def audio_from_wire(data: bytes, encoding: str) -> np.ndarray:
    if encoding == "f32le":
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def decode_reference(message: EncodeVoice) -> tuple[np.ndarray, int]:
    """The reference clip of an encode_voice frame as float32 samples and their rate.

    A whole file is decoded here, in the sidecar, so that parsing untrusted uploads can only
    ever crash a process the supervisor replaces. InvalidAudio when it cannot be decoded or is
    longer than the frame allows.
    """
    if message["encoding"] == "file":
        from sidecar.audio.processing import (
            read_audio,  # soundfile: only sidecars that encode voices need it
        )

        audio, sample_rate = read_audio(message["audio"])
    else:
        audio, sample_rate = (
            audio_from_wire(message["audio"], message["encoding"]),
            message["sample_rate"],
        )
    if sample_rate <= 0:
        raise InvalidAudio(f"reference audio has an invalid sample rate ({sample_rate})")
    limit = message.get("max_duration_s")
    seconds = len(audio) / sample_rate
    if limit and seconds > limit:
        raise InvalidAudio(
            f"reference audio is {seconds:.1f} s long; at most {limit:g} s is accepted (3-10 s works best)"
        )
    return audio, sample_rate
