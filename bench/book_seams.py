"""The silence a seam between two of a book's segments adds, per format: what each segment's
packets span past its audio (its encoder's delay at the start, its last frame's padding at the
end), over segments of seeded random lengths, encoded as the book maker encodes them.

    PYTHONPATH=$PWD .venv/bin/python bench/book_seams.py [--segments 40] [--seed 3]

Prints one line per format: the least and most added, in ms. docs/AUDIOBOOKS.md gives them;
`chaptered.SEAM_MAX_S` bounds them.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from supervisor.books import audio, segments


def added_ms(fmt: str, lengths: list[int], folder: Path) -> list[float]:
    """For each segment of `lengths` samples (noise, s16 mono at audio.RATE): the ms its packets
    span past its audio."""
    rng = np.random.default_rng(len(lengths))
    added = []
    for number, samples in enumerate(lengths):
        pcm = (rng.uniform(-0.3, 0.3, samples) * 32767).astype("<i2").tobytes()
        packets, frame = segments.encode(folder / f"{number}.{fmt}", fmt, pcm)
        added.append((packets * frame - samples) * 1000 / audio.RATE)
    return added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", type=int, default=40)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    lengths = [int(n) for n in rng.integers(audio.RATE, 3 * audio.RATE, args.segments)]
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in segments.CODECS:
            added = added_ms(fmt, lengths, Path(tmp))
            print(f"{fmt}: {min(added):.0f}-{max(added):.0f} ms over {len(added)} segments")


if __name__ == "__main__":
    main()
