"""16-bit mono PCM in, the response formats out; and SSE event framing.

    pcm   raw s16le, 24 kHz mono (no header)               stdlib
    wav   RIFF/WAVE; streamed: sizes 0xFFFFFFFF (open end)  stdlib
    flac  FLAC                                              PyAV (libav's flac)
    mp3   MPEG-1 layer III, 64 kb/s mono                    PyAV (libmp3lame)
    opus  Opus in Ogg, 32 kb/s                              PyAV (libopus)
    aac   AAC-LC in ADTS, 64 kb/s                           PyAV (libav's aac)
    mulaw WAV of G.711 mu-law samples (format tag 7)        PyAV (libav's pcm_mulaw, wav muxer)
    alaw  WAV of G.711 A-law samples (format tag 6)         PyAV (libav's pcm_alaw, wav muxer)

Audio is encoded here, in the supervisor, not in the sidecar: a sidecar's time belongs to the
GPU (encoding 64 results one after another would leave it idle for a second per batch), and a
streamed response needs one encoder that lives across chunks that may come from different
sidecars. PyAV is imported on first use of a compressed format and never needs numpy: frames
are filled from bytes. Its encoders run in worker threads (`asyncio.to_thread`), off the event
loop. Every encoder is one continuous stream, so what `feed` returns, concatenated with what
`finish` returns, is a single valid file whether it was sent in one piece or chunk by chunk.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from supervisor import format_names

if TYPE_CHECKING:
    from av.audio.stream import AudioStream

    from supervisor.errors import ErrorBody

FORMATS = format_names.FORMATS
MEDIA_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mulaw": "audio/wav",  # WAV files whose samples are G.711
    "alaw": "audio/wav",
}
SAMPLE_RATE = 24000  # pcm is 24 kHz mono 16-bit little-endian, as OpenAI's
OPEN_ENDED = 0xFFFFFFFF  # RIFF and data sizes of a WAV streamed before its length is known

# container, codec, sample format the codec takes, bit rate, muxer options for a stream
_AV_FORMATS: dict[str, tuple[str, str, str, int, dict[str, str]]] = {
    # No Xing/Info frame and no ID3 tag: neither can be filled in on a stream sent as it is made.
    # A whole file gets both (the Xing frame tells decoders to drop the encoder's padding).
    "mp3": ("mp3", "libmp3lame", "s16p", 64_000, {"write_xing": "0", "id3v2_version": "0"}),
    # Ogg pages of at most 100 ms (the default is 1 s), so a streamed chunk is not held back.
    "opus": ("ogg", "libopus", "s16", 32_000, {"page_duration": "100000"}),
    "aac": ("adts", "aac", "fltp", 64_000, {}),
    "flac": ("flac", "flac", "s16", 0, {}),
    # Streamed, the wav muxer writes RIFF and data sizes 0xFFFFFFFF, as WavStreamEncoder does.
    "mulaw": ("wav", "pcm_mulaw", "s16", 0, {}),
    "alaw": ("wav", "pcm_alaw", "s16", 0, {}),
}


class Encoder(Protocol):
    def feed(self, pcm: bytes) -> bytes:
        """Encode more s16le samples; returns whatever output is ready (possibly nothing)."""

    def finish(self) -> bytes:
        """Flush: the rest of the file."""


def wav_header(sample_rate: int, num_bytes: int | None) -> bytes:
    """The 44-byte header of a 16-bit mono WAV; num_bytes None gives the open-ended form."""
    data = OPEN_ENDED if num_bytes is None else num_bytes
    riff = OPEN_ENDED if num_bytes is None else 36 + num_bytes
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data)
    )


SLICE_SAMPLES = 1 << 16  # libav is handed at most this much at once (2.7 s at 24 kHz)


def slices(pcm: bytes, samples: int = SLICE_SAMPLES) -> Iterator[memoryview]:
    """Whole 16-bit samples of pcm in pieces of at most `samples`: libav converts a frame at once
    in float, so one frame of ten minutes took ~15 times its own size in memory."""
    view = memoryview(pcm)[: len(pcm) // 2 * 2]
    for start in range(0, len(view), 2 * samples):
        yield view[start : start + 2 * samples]


def s16_frames(frame_type: Any, pcm: bytes, sample_rate: int, pts: int) -> Iterator[Any]:
    """pcm as mono s16 frames of PyAV's `frame_type`, one per `slices` piece, at `sample_rate`,
    stamped from `pts` on (each frame's `samples` moves the caller's count on)."""
    for piece in slices(pcm):
        frame = frame_type(format="s16", layout="mono", samples=len(piece) // 2)
        frame.planes[0].update(bytes(piece))
        frame.sample_rate = sample_rate
        frame.pts = pts
        pts += frame.samples
        yield frame


class PcmEncoder:
    def feed(self, pcm: bytes) -> bytes:
        return pcm

    def finish(self) -> bytes:
        return b""


class WavStreamEncoder:
    """A WAV whose length is not known when it starts: the header says 'until the end'."""

    def __init__(self, sample_rate: int) -> None:
        self.header: bytes | None = wav_header(sample_rate, None)

    def feed(self, pcm: bytes) -> bytes:
        header, self.header = self.header or b"", None
        return header + pcm

    def finish(self) -> bytes:
        header, self.header = self.header or b"", None
        return header


class _Sink:
    """A write-only file for PyAV's muxer; what was written is taken out after each call."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


class AvEncoder:
    """One libav encoder and muxer writing a continuous stream of `fmt`.

    `whole`: the output is a seekable buffer returned by `finish`, so the muxer can go back and
    complete its header (FLAC's sample count and checksum, MP3's Xing frame); `feed` returns
    nothing then.
    """

    def __init__(self, fmt: str, sample_rate: int, whole: bool = False) -> None:
        import av  # PyAV: imported on first use, so serving wav/pcm never loads libav

        container, codec, sample_format, bit_rate, options = _AV_FORMATS[fmt]
        self.sample_rate = sample_rate
        self.sink: _Sink | io.BytesIO = io.BytesIO() if whole else _Sink()
        self.output = av.open(
            self.sink, "w", format=container, options={} if whole and fmt == "mp3" else options
        )
        # _AV_FORMATS names audio codecs only; PyAV types a codec named by a plain str as any stream.
        self.stream = cast("AudioStream", self.output.add_stream(codec, rate=sample_rate))
        self.stream.layout = "mono"
        if bit_rate:
            self.stream.bit_rate = bit_rate
        self.resampler = av.AudioResampler(format=sample_format, layout="mono", rate=sample_rate)
        self._frame_type = av.AudioFrame
        self.pts = 0
        self.closed = False

    def _encode(self, frame: Any) -> None:
        for resampled in self.resampler.resample(frame):
            for packet in self.stream.encode(resampled):
                self.output.mux(packet)

    def feed(self, pcm: bytes) -> bytes:
        for frame in s16_frames(self._frame_type, pcm, self.sample_rate, self.pts):
            self.pts += frame.samples
            self._encode(frame)
        return self.sink.take() if isinstance(self.sink, _Sink) else b""

    def finish(self) -> bytes:
        if not self.closed:
            self.closed = True
            self._encode(None)
            for packet in self.stream.encode(None):
                self.output.mux(packet)
            self.output.close()
        return self.sink.take() if isinstance(self.sink, _Sink) else self.sink.getvalue()


def encoder(fmt: str, sample_rate: int = SAMPLE_RATE) -> Encoder:
    """A streaming encoder for one response.

    FLAC is the exception that arrives whole: a stream's STREAMINFO can only say "length
    unknown", which libsndfile (soundfile) reads as 2^63 frames and refuses, so a FLAC answer
    of several chunks is kept until its end and its header then holds the real length.
    """
    if fmt == "pcm":
        return PcmEncoder()
    if fmt == "wav":
        return WavStreamEncoder(sample_rate)
    return AvEncoder(fmt, sample_rate, whole=fmt == "flac")


def encode(fmt: str, pcm: bytes, sample_rate: int = SAMPLE_RATE) -> bytes:
    """A whole file at once. For wav the header holds the real sizes."""
    if fmt == "pcm":
        return pcm
    if fmt == "wav":
        return wav_header(sample_rate, len(pcm)) + pcm
    enc = AvEncoder(fmt, sample_rate, whole=True)
    enc.feed(pcm)
    return enc.finish()


def is_cheap(fmt: str) -> bool:
    """Formats that cost next to nothing to produce (no worker thread needed)."""
    return fmt in ("pcm", "wav")


# ---------------------------------------------------------------- server-sent events

SSE_SLICE = 48_000  # bytes of audio per delta event (1 s of pcm; even, so samples stay whole)


def sse_event(payload: Mapping[str, object]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def sse_deltas(audio: bytes) -> Iterator[bytes]:
    """`speech.audio.delta` events carrying audio in base64, in slices."""
    for start in range(0, len(audio), SSE_SLICE):
        chunk = base64.b64encode(audio[start : start + SSE_SLICE]).decode()
        yield sse_event({"type": "speech.audio.delta", "audio": chunk})


def sse_done(usage: dict[str, int]) -> bytes:
    return sse_event({"type": "speech.audio.done", "usage": usage})


def sse_error(body: ErrorBody) -> bytes:
    """Not in OpenAI's spec for speech: a failure after the stream started, then the end."""
    return sse_event({"type": "error", **body})
