"""A book's items, each encoded on its own (a segment), and joined end to end into one stream.

Segments are independent, so several threads encode them at once (`chaptered.BookWriter`), and
`Joined` copies each one's packets, unchanged, after those of the one before. Each segment is a
stream of its own: it starts with its encoder's delay (AAC 1,024 samples, MP3 1,105, Opus 156)
and its last packet decodes to a whole frame, however little of it is audio. A decoder drops
the delay of the stream's start only, so where two segments meet the book holds a little more
silence than their audio (`chaptered.SEAM_MAX_S`), and a segment's audio starts in the book
where its packets do: every segment before it spans its packets' whole frames (`spanned`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from supervisor.books import audio
from supervisor.speech.audio import formats

if TYPE_CHECKING:
    from av.audio.stream import AudioStream
    from av.container.core import Chapter

# format: (muxer, codec, the codec's sample format, bit rate)
CODECS: dict[str, tuple[str, str, str, int]] = {
    "m4b": ("ipod", "aac", "fltp", 64_000),
    "mp3": ("mp3", "libmp3lame", "s16p", 64_000),
    "opus": ("ogg", "libopus", "s16", 32_000),
}


@dataclass(frozen=True)
class Segment:
    """One item's audio in the book, encoded on its own into the file at `path` (its place in
    the book is its writer's key for it)."""

    chapter: int
    opens: bool  # the first of its chapter's segments
    lead: int  # samples of silence before its audio: the gap, if it opens a chapter but the first
    samples: int  # its audio's
    packets: int
    frame: int  # samples a packet decodes to (its codec's frame)
    path: Path

    @property
    def spanned(self) -> int:
        """The samples its packets decode to: the lead, the audio, the encoder's delay and the
        last frame's padding."""
        return self.packets * self.frame


def encode(path: Path, fmt: str, pcm: bytes) -> tuple[int, int]:
    """s16 mono at audio.RATE encoded on its own into `path`, in the book's format; how many
    packets, and the samples each decodes to."""
    import av

    muxer, codec, sample_format, bit_rate = CODECS[fmt]
    packets = 0
    with av.open(str(path), "w", format=muxer) as output:
        stream = cast("AudioStream", output.add_stream(codec, rate=audio.RATE))
        stream.layout = "mono"
        stream.bit_rate = bit_rate
        resampler = av.AudioResampler(format=sample_format, layout="mono", rate=audio.RATE)

        def muxed(encoded: list[Any]) -> None:
            nonlocal packets
            packets += len(encoded)
            output.mux(encoded)

        for frame in formats.s16_frames(av.AudioFrame, pcm, audio.RATE, 0):
            for piece in resampler.resample(frame):
                muxed(stream.encode(piece))
        for piece in resampler.resample(None):
            muxed(stream.encode(piece))
        muxed(stream.encode(None))
        frame_size = stream.codec_context.frame_size
    return packets, frame_size


class Joined:
    """The book's one stream at `path`, its segments appended in order (from one thread at a
    time). Each packet is stamped a whole frame after the one before, as it decodes; the last
    packet is held back until the next segment comes or the stream is closed, so that only the
    book's last keeps its shorter duration, which tells where the audio ends."""

    def __init__(self, path: Path, fmt: str, metadata: dict[str, str]) -> None:
        self.path, self.fmt, self.metadata = path, fmt, metadata
        self.output: Any = None  # opened with the first segment, its stream's template
        self.stream: Any = None
        self.frame = 0  # a packet's frame, in the segments' time base
        self.at = 0  # the next packet's time, in the segments' time base
        self.held: Any = None

    def _opened(self, source: Any, segment: Segment, first: Any) -> None:
        import av

        self.output = av.open(str(self.path), "w", format=CODECS[self.fmt][0])
        self.stream = self.output.add_stream_from_template(source)
        self.output.metadata.update(self.metadata)
        self.stream.metadata.update(self.metadata)  # Ogg keeps its comments on the stream
        self.frame = round(Fraction(segment.frame, audio.RATE) / source.time_base)
        self.at = first.pts  # the encoder's delay: before the book's time 0

    def _mux_held(self, whole_frame: bool) -> None:
        if self.held is not None:
            if whole_frame:
                self.held.duration = self.frame
            self.held.stream = self.stream
            self.output.mux(self.held)
            self.held = None

    def append(self, segment: Segment) -> None:
        import av

        with av.open(str(segment.path)) as inside:
            source = inside.streams.audio[0]
            for packet in inside.demux(source):
                if packet.dts is None:  # the demuxer's empty packet at the end
                    continue
                if self.output is None:
                    self._opened(source, segment, packet)
                self._mux_held(whole_frame=True)
                packet.pts = packet.dts = self.at
                self.at += self.frame
                self.held = packet

    def close(self, chapters: list[Chapter] | None) -> None:
        """The stream ended, with `chapters` (libavformat's, for an MP4: written at its end)."""
        if self.output is None:
            raise ValueError("a book needs a segment")
        self._mux_held(whole_frame=False)
        if chapters is not None:
            self.output.set_chapters(chapters)
        self.output.close()
        self.output = None

    def abort(self) -> None:
        if self.output is not None:
            self.output.close()
            self.output = None
