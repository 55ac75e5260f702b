"""Chapter audio decoded, and the whole book's loudness measured and set, a chapter at a time.

A book is far longer than any one answer (ten hours is 1.7 GB of 24 kHz samples), so nothing
here holds more than one chapter: `BookMeter` feeds every chapter through one libavfilter
`ebur128` (and, for an RMS target, `astats`) graph and reads the whole book's integrated
loudness and true peak at the end; `leveled` then applies one gain to each chapter in turn (the
same gain for all, so the book is normalised as one piece, not chapter by chapter), with
`alimiter` at 4x the rate when that gain would lift the book's true peak over the ceiling, as
`supervisor.speech.audio.loudness` does for one answer.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from supervisor.books.model import BookError
from supervisor.speech.audio import formats, loudness
from supervisor.speech.audio.loudness import Target

if TYPE_CHECKING:
    from av.audio.frame import AudioFrame

RATE = formats.SAMPLE_RATE  # the model's, and the book's


def decoded(data: bytes) -> bytes:
    """An item's result file (any format the server writes) as s16 mono at RATE."""
    import av

    out = bytearray()
    try:
        with av.open(io.BytesIO(data)) as container:
            resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
            for frame in container.decode(audio=0):
                for piece in resampler.resample(frame):
                    out.extend(memoryview(piece.planes[0])[: piece.samples * 2])
            for piece in resampler.resample(None):
                out.extend(memoryview(piece.planes[0])[: piece.samples * 2])
    except av.FFmpegError as exc:
        raise BookError(f"a chapter's audio cannot be decoded: {exc}") from None
    return bytes(out)


class BookMeter:
    """Integrated loudness (or RMS level) and true peak over every chapter fed to it."""

    def __init__(self, measure: str, peak: bool = True) -> None:
        """`peak`: measure the true peak too (4x oversampled, most of the meter's work)."""
        import av.filter

        self.graph = av.filter.Graph()
        self.source = self.graph.add_abuffer(
            format="s16", sample_rate=RATE, layout="mono", time_base=Fraction(1, RATE)
        )
        node = self.source
        chain = [("ebur128", "metadata=1:peak=true" if peak else "metadata=1")]
        if measure == "rms":
            chain.append(
                ("astats", "metadata=1:reset=0:measure_overall=RMS_level:measure_perchannel=none")
            )
        for name, args in chain:
            following = self.graph.add(name, args)
            node.link_to(following)
            node = following
        self.sink = self.graph.add("abuffersink")
        node.link_to(self.sink)
        self.graph.configure()
        self.kind = measure
        self.pts = 0
        self.metadata: dict[str, str] = {}

    def _drain(self) -> None:
        import av

        while True:
            try:
                frame = cast("AudioFrame", self.sink.pull())
            except (av.BlockingIOError, av.EOFError):
                return
            self.metadata = dict(frame.metadata) or self.metadata

    def feed(self, pcm: bytes) -> None:
        import av

        for frame in formats.s16_frames(av.AudioFrame, pcm, RATE, self.pts):
            self.pts += frame.samples
            frame.time_base = Fraction(1, RATE)
            self.source.push(frame)
            self._drain()

    def result(self) -> loudness.Measured:
        self.source.push(None)
        self._drain()
        peak = float(self.metadata.get("lavfi.r128.true_peak", 0.0))
        peak_db = -200.0 if peak <= 0 else 20 * math.log10(peak)
        if self.kind == "rms":
            level = float(self.metadata.get("lavfi.astats.Overall.RMS_level", "-inf"))
        else:
            level = float(self.metadata.get("lavfi.r128.I", "-70"))
        return loudness.Measured(level, peak_db)


def gain_for(measured: loudness.Measured, target: Target) -> tuple[float, bool]:
    """The book's gain in dB, and whether the limiter must hold its peak; (0, False) for a book
    too quiet to measure."""
    if measured.level <= loudness.SILENT_LUFS or math.isinf(measured.level):
        return 0.0, False
    gain = target.level - measured.level
    return gain, measured.true_peak_db + gain > target.true_peak_db


def leveled(pcm: bytes, gain_db: float, limit: bool, target: Target) -> bytes:
    """One chapter at the book's gain, as long as it was (the limiter's resampling may add or
    take a sample, and the chapter marks are counted on the original lengths)."""
    if gain_db == 0.0 and not limit:
        return pcm
    chain = [("aformat", "sample_fmts=dbl"), ("volume", f"volume={gain_db:.4f}dB:precision=double")]
    if limit:
        ceiling = 10 ** ((target.true_peak_db - loudness.MARGIN_DB) / 20)
        chain += [
            ("aresample", str(RATE * loudness.OVERSAMPLE)),
            ("alimiter", f"limit={ceiling:.6f}:level=false:latency=true"),
            ("aresample", str(RATE)),
        ]
    out = loudness.run_filters(pcm, RATE, chain)[0]
    return out[: len(pcm)] + bytes(max(0, len(pcm) - len(out)))
