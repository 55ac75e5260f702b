"""Loudness normalisation of a whole output to a target, with a true-peak ceiling.

The meter and the limiter are libavfilter's, through PyAV (already here for encoding, and no
numpy): `ebur128` measures integrated loudness (EBU R128 / ITU-R BS.1770) and the true peak,
`astats` the RMS level for ACX, `volume` applies one linear gain, and `alimiter` (a look-ahead
limiter, latency-compensated) holds the peak. The limiter runs at 4x the sample rate, so it
catches the peaks between samples that a true-peak meter sees (BS.1770 oversamples 4x too).

A gain alone keeps the sound as it is; the limiter only runs when that gain would lift the true
peak over the ceiling. Limiting takes a little loudness away, so the gain is corrected by what
the last pass missed and applied again to the original, at most `PASSES` times. The ceiling
wins over the target: when the limiter takes a correction back (audio whose peaks are high for
its loudness, such as mostly low frequencies, which BS.1770's K-weighting counts little), the
output stays at the loudness it reached, under the target. Audio too short or too quiet to
measure (under 0.4 s of sound above the absolute gate) is returned unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

from supervisor.speech.audio import formats

if TYPE_CHECKING:
    from av.audio.frame import AudioFrame

PASSES = 3
TOLERANCE_LU = 0.2  # close enough to the target to stop correcting
OVERSAMPLE = 4
SILENT_LUFS = -69.0  # ebur128 reports -70 (its absolute gate) when nothing is above it
# The limiter aims this far under the ceiling: s16 rounding and resampling add a little.
MARGIN_DB = 0.1


@dataclass(frozen=True)
class Target:
    """What to normalise to: integrated loudness (LUFS), or RMS level (dBFS) for ACX, and the
    ceiling of the true peak (dBTP)."""

    level: float
    true_peak_db: float
    measure: str = "lufs"  # "lufs" or "rms"


@dataclass(frozen=True)
class Measured:
    level: float  # LUFS, or dBFS RMS
    true_peak_db: float


def _frame(pcm: bytes, sample_rate: int, pts: int = 0) -> Any:
    import av

    samples = len(pcm) // 2
    frame = av.AudioFrame(format="s16", layout="mono", samples=samples)
    frame.planes[0].update(pcm[: samples * 2])
    frame.sample_rate = sample_rate
    frame.pts = pts
    frame.time_base = Fraction(1, sample_rate)
    return frame


def run_filters(
    pcm: bytes, sample_rate: int, chain: list[tuple[str, str]]
) -> tuple[bytes, dict[str, str]]:
    """s16 mono through a chain of libavfilter filters ending in s16 mono at `sample_rate`:
    the output audio and the metadata of the last frame out."""
    import av
    import av.filter

    graph = av.filter.Graph()
    node = graph.add_abuffer(
        format="s16", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
    )
    source = node
    chain = [
        *chain,
        ("aformat", f"sample_fmts=s16:sample_rates={sample_rate}:channel_layouts=mono"),
    ]
    for name, args in chain:
        following = graph.add(name, args)
        node.link_to(following)
        node = following
    sink = graph.add("abuffersink")
    node.link_to(sink)
    graph.configure()
    out = bytearray()
    metadata: dict[str, str] = {}

    def drain() -> None:
        nonlocal metadata
        while True:
            try:
                # abuffersink after abuffer gives audio frames; PyAV types pull() as any frame.
                frame = cast("AudioFrame", sink.pull())
            except (av.BlockingIOError, av.EOFError):
                return
            out.extend(memoryview(frame.planes[0])[: frame.samples * 2])
            metadata = dict(frame.metadata) or metadata

    # Pushed a slice at a time and drained after each: the filters (in double, the limiter
    # oversampled) then hold a few seconds, not the whole answer (~16 GB for 600 s at 48 kHz).
    pts = 0
    for piece in formats.slices(pcm):
        source.push(_frame(bytes(piece), sample_rate, pts))
        pts += len(piece) // 2
        drain()
    source.push(None)
    drain()
    return bytes(out), metadata


def measure(pcm: bytes, sample_rate: int, kind: str) -> Measured:
    """The integrated loudness (or RMS level) and the true peak of s16 mono audio."""
    chain = [("ebur128", "metadata=1:peak=true")]
    if kind == "rms":
        chain.append(
            ("astats", "metadata=1:reset=0:measure_overall=RMS_level:measure_perchannel=none")
        )
    _, metadata = run_filters(pcm, sample_rate, chain)
    peak = float(metadata.get("lavfi.r128.true_peak", 0.0))
    peak_db = -200.0 if peak <= 0 else 20 * math.log10(peak)
    if kind == "rms":
        level = float(metadata.get("lavfi.astats.Overall.RMS_level", "-inf"))
    else:
        level = float(metadata.get("lavfi.r128.I", "-70"))
    return Measured(level, peak_db)


def normalise(pcm: bytes, sample_rate: int, target: Target) -> bytes:
    """The audio at the target level with its true peak under the ceiling (s16 mono in and out)."""
    first = measure(pcm, sample_rate, target.measure)
    if first.level <= SILENT_LUFS or math.isinf(first.level):
        return pcm  # nothing to measure: leave it as it is
    gain = target.level - first.level
    limit = first.true_peak_db + gain > target.true_peak_db
    out = _apply(pcm, sample_rate, gain, target, limit)
    if not limit:
        return out
    level = measure(out, sample_rate, target.measure).level
    for _ in range(PASSES - 1):
        missed = target.level - level
        if abs(missed) <= TOLERANCE_LU:
            break
        candidate = _apply(pcm, sample_rate, gain + missed, target, limit)
        reached = measure(candidate, sample_rate, target.measure).level
        if abs(reached - level) < abs(missed) / 2:
            break  # the limiter takes the gain back (peaks too high for the level): stop there
        gain, out, level = gain + missed, candidate, reached
    return out


def _apply(pcm: bytes, sample_rate: int, gain_db: float, target: Target, limit: bool) -> bytes:
    chain = [("aformat", "sample_fmts=dbl"), ("volume", f"volume={gain_db:.4f}dB:precision=double")]
    if limit:
        ceiling = 10 ** ((target.true_peak_db - MARGIN_DB) / 20)
        chain += [
            ("aresample", str(sample_rate * OVERSAMPLE)),
            ("alimiter", f"limit={ceiling:.6f}:level=false:latency=true"),
            ("aresample", str(sample_rate)),
        ]
    return run_filters(pcm, sample_rate, chain)[0]
