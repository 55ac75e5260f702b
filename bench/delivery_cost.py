"""What delivery profiles cost the supervisor: 60 s of audio resampled, G.711-encoded and
loudness-normalised (`supervisor.speech.audio.delivery.encode`), best of three.

    .venv/bin/python bench/delivery_cost.py

The audio is a 180 Hz tone with a syllable-like envelope, so a podcast target needs the limiter.
"""

from __future__ import annotations

import math
import struct
import time

from supervisor.speech.audio import delivery

RATE = 24000
SECONDS = 60


def audio() -> bytes:
    samples = (
        int(9000 * math.sin(2 * math.pi * 180 * i / RATE) * abs(math.sin(i / 9000)) ** 3)
        for i in range(RATE * SECONDS)
    )
    return b"".join(struct.pack("<h", s) for s in samples)


def best_ms(fmt: str, pcm: bytes, wanted: delivery.Profile) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        delivery.encode(fmt, pcm, RATE, wanted)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    pcm = audio()
    cases = [
        ("resample to 16 kHz, wav", "wav", delivery.Profile(sample_rate=16000)),
        ("mulaw at 8 kHz", "mulaw", delivery.Profile()),
        ("podcast loudness, wav", "wav", delivery.Profile(loudness=delivery.PRESETS["podcast"])),
        (
            "broadcast loudness, wav",
            "wav",
            delivery.Profile(loudness=delivery.PRESETS["broadcast"]),
        ),
    ]
    for name, fmt, wanted in cases:
        print(f"{name}: {best_ms(fmt, pcm, wanted):.0f} ms for {SECONDS} s of audio")


if __name__ == "__main__":
    main()
