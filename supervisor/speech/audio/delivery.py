"""Delivery profiles: the output's sample rate, G.711 for telephony, and loudness.

    sample_rate   8000 to 48000 Hz; libswresample (PyAV's AudioResampler), one resampler per
                  answer that keeps its state across chunks, so a streamed answer has no seams
    mulaw, alaw   WAV files of G.711 samples (format tags 7 and 6), 8000 Hz unless
                  `sample_rate` says otherwise
    loudness      "podcast" (-16 LUFS), "broadcast" (-23 LUFS, EBU R128), "acx" (RMS -20 dBFS,
                  inside ACX's -23 to -18, peak at most -3 dB), or {"lufs": L, "true_peak_db": P};
                  `loudness.normalise` over the whole output

Loudness needs the whole output before the first byte can go out, so an answer that asks for
it is buffered: it starts once every chunk is done (a job item is whole anyway). A sample rate
alone still streams. The supervisor does all of this, after the chunks are joined, so a chunked
answer is normalised as one piece, not chunk by chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from supervisor.errors import InvalidRequest
from supervisor.speech.audio import formats, loudness
from supervisor.speech.audio.loudness import Target

SAMPLE_RATES = (8000, 48000)
G711 = ("mulaw", "alaw")
G711_RATE = 8000
PRESETS: dict[str, Target] = {
    "podcast": Target(-16.0, -1.0),
    "broadcast": Target(-23.0, -1.0),
    "acx": Target(-20.0, -3.0, "rms"),
}
# The rates these codecs take (libmp3lame's, libav's aac's, libopus's); the others take any.
# Ogg Opus decoders always give 48 kHz whatever was encoded (RFC 7845): Opus keeps the
# bandwidth, not the rate.
CODEC_RATES: dict[str, tuple[int, ...]] = {
    "mp3": (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    "aac": (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    "opus": (8000, 12000, 16000, 24000, 48000),
}
LUFS_RANGE = (-50.0, -5.0)
TRUE_PEAK_RANGE = (-20.0, 0.0)  # alimiter's ceiling goes down to -24 dB
DEFAULT_TRUE_PEAK_DB = -1.0


@dataclass(frozen=True)
class Profile:
    """What a request asks of its output besides the format."""

    sample_rate: int | None = None
    loudness: Target | None = None

    def rate(self, fmt: str, source_rate: int) -> int:
        """The sample rate of the answer."""
        if self.sample_rate is not None:
            return self.sample_rate
        return G711_RATE if fmt in G711 else source_rate


class Asks(Protocol):
    """What `profile` reads of a request (`schemas.SpeechRequest`): the output's fields."""

    @property
    def sample_rate(self) -> int | None: ...
    @property
    def loudness(self) -> Target | None: ...


def profile(request: Asks) -> Profile:
    return Profile(request.sample_rate, request.loudness)


# ---------------------------------------------------------------- request fields


def _bad_loudness(detail: str) -> InvalidRequest:
    presets = ", ".join(f'"{name}"' for name in PRESETS)
    return InvalidRequest(
        f"'loudness' must be {presets} or an object "
        f'{{"lufs": L, "true_peak_db": P}} (L from {LUFS_RANGE[0]:g} to {LUFS_RANGE[1]:g}, '
        f"P from {TRUE_PEAK_RANGE[0]:g} to {TRUE_PEAK_RANGE[1]:g}, default "
        f"{DEFAULT_TRUE_PEAK_DB:g}); {detail}.",
        param="loudness",
    )


def _in_range(value: Any, bounds: tuple[float, float]) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and bounds[0] <= value <= bounds[1]
    )


def parse_loudness(value: Any) -> Target | None:
    """The `loudness` field as a target; None when not given. InvalidRequest otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.lower() not in PRESETS:
            raise _bad_loudness(f"got {value!r}")
        return PRESETS[value.lower()]
    if not isinstance(value, dict):
        raise _bad_loudness(f"got {type(value).__name__}")
    unknown = sorted(set(value) - {"lufs", "true_peak_db"})
    if unknown:
        raise _bad_loudness(f"unknown key(s) {', '.join(unknown)}")
    if not _in_range(value.get("lufs"), LUFS_RANGE):
        raise _bad_loudness(f"'lufs' is {value.get('lufs')!r}")
    peak = value.get("true_peak_db", DEFAULT_TRUE_PEAK_DB)
    if not _in_range(peak, TRUE_PEAK_RANGE):
        raise _bad_loudness(f"'true_peak_db' is {peak!r}")
    return Target(float(value["lufs"]), float(peak))


def check_rate(fmt: str, sample_rate: int | None) -> None:
    """A 400 for a sample rate the format's codec cannot encode."""
    rates = CODEC_RATES.get(fmt)
    if sample_rate is not None and rates is not None and sample_rate not in rates:
        raise InvalidRequest(
            f"'sample_rate' {sample_rate} cannot be encoded as {fmt}; it takes "
            f"{', '.join(map(str, rates))} (wav, flac, pcm, mulaw and alaw take any rate "
            f"from {SAMPLE_RATES[0]} to {SAMPLE_RATES[1]}).",
            param="sample_rate",
        )


# ---------------------------------------------------------------- audio


class Resampler:
    """s16 mono from one rate to another, chunk by chunk, keeping the filter's state."""

    def __init__(self, source_rate: int, rate: int) -> None:
        import av  # PyAV: imported on first use, as in formats

        self.source_rate = source_rate
        self.resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        self._frame_type = av.AudioFrame
        self.pts = 0

    def _out(self, frames: list[Any]) -> bytes:
        return b"".join(bytes(f.planes[0])[: f.samples * 2] for f in frames)

    def feed(self, pcm: bytes) -> bytes:
        out = []
        for frame in formats.s16_frames(self._frame_type, pcm, self.source_rate, self.pts):
            self.pts += frame.samples
            out.append(self._out(self.resampler.resample(frame)))
        return b"".join(out)

    def finish(self) -> bytes:
        return self._out(self.resampler.resample(None))


def resample(pcm: bytes, source_rate: int, rate: int) -> bytes:
    if rate == source_rate:
        return pcm
    resampler = Resampler(source_rate, rate)
    return resampler.feed(pcm) + resampler.finish()


class ResamplingEncoder:
    """An encoder fed at the source rate that encodes at another."""

    def __init__(self, resampler: Resampler, inner: formats.Encoder) -> None:
        self.resampler = resampler
        self.inner = inner

    def feed(self, pcm: bytes) -> bytes:
        return self.inner.feed(self.resampler.feed(pcm))

    def finish(self) -> bytes:
        return self.inner.feed(self.resampler.finish()) + self.inner.finish()


def encoder(fmt: str, source_rate: int, wanted: Profile) -> formats.Encoder:
    """A streaming encoder for an answer without loudness (that one is `encode`d whole)."""
    rate = wanted.rate(fmt, source_rate)
    inner = formats.encoder(fmt, rate)
    if rate == source_rate:
        return inner
    return ResamplingEncoder(Resampler(source_rate, rate), inner)


def encode(fmt: str, pcm: bytes, source_rate: int, wanted: Profile) -> bytes:
    """A whole file: resampled, normalised, encoded."""
    rate = wanted.rate(fmt, source_rate)
    pcm = resample(pcm, source_rate, rate)
    if wanted.loudness is not None:
        pcm = loudness.normalise(pcm, rate, wanted.loudness)
    return formats.encode(fmt, pcm, rate)


def is_cheap(fmt: str, source_rate: int, wanted: Profile) -> bool:
    """Nothing to do but framing (no worker thread needed)."""
    return (
        formats.is_cheap(fmt)
        and wanted.loudness is None
        and wanted.rate(fmt, source_rate) == source_rate
    )
