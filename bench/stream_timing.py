"""When a streamed answer's audio arrives, against when a player would need it.

A player starts at the first audio and plays in real time. Each later piece must arrive before
the playback reaches it; if one is late, the player waits (an underrun) and everything after it
shifts by that wait. So the total wait of a stream is the largest lateness of any piece,
measured from the first audio:

    underrun = max(0, max_i (arrival_i - arrival_0 - audio_before_i))

where `audio_before_i` is the seconds of audio received before piece i. vLLM-Omni's benchmark
calls the same figure `audio_underrun`.

`StreamClock` reads the bytes of a raw `pcm` answer (`stream_format: "audio"`) or of an SSE one
(`speech.audio.delta` events, base64 pcm) as they arrive, and keeps that account.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass, field

PCM_BYTES_PER_SECOND = 24000 * 2  # the harness asks for pcm: 24 kHz, 16-bit mono


@dataclass
class StreamClock:
    """One stream's audio as it arrives; `feed` each chunk the client reads."""

    stream_format: str  # "audio" (raw pcm) or "sse"
    start: float = field(default_factory=time.perf_counter)
    first_audio_s: float | None = None  # from `start` to the first audio bytes
    audio_s: float = 0.0  # audio received so far
    underrun_s: float = 0.0  # the player's wait so far (see the module's docstring)
    error: bool = False  # an SSE `error` event arrived
    _pending: bytes = b""  # an SSE event not yet complete

    def feed(self, chunk: bytes, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        if self.stream_format == "sse":
            self._pending += chunk
            *events, self._pending = self._pending.split(b"\n\n")
            for event in events:
                self._add_audio(self._sse_audio_bytes(event), now)
        else:
            self._add_audio(len(chunk), now)

    def _add_audio(self, size: int, now: float) -> None:
        if size <= 0:
            return
        since_start = now - self.start
        if self.first_audio_s is None:
            self.first_audio_s = since_start
        else:
            late = since_start - self.first_audio_s - self.audio_s
            self.underrun_s = max(self.underrun_s, late)
        self.audio_s += size / PCM_BYTES_PER_SECOND

    def _sse_audio_bytes(self, event: bytes) -> int:
        """The pcm bytes an SSE event carries (0 for any other event)."""
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            try:
                data = json.loads(line[5:])
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            if data.get("type") == "error" or "error" in data:
                self.error = True
            if data.get("type") == "speech.audio.delta":
                try:
                    return len(base64.b64decode(data.get("audio", ""), validate=True))
                except (binascii.Error, TypeError, ValueError):
                    return 0
        return 0
