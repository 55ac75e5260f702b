"""Word timestamps (`timestamp_granularities: ["word"]`): each caption segment's words timed by
the ASR sidecar of `--asr-model` (an `align` frame per segment, sidecar/audio/align.py).

A segment is one chunk, so its audio is cut from the answer's samples at the segment's own
(exact) times and no word crosses a segment. The sidecar's times are relative to that audio;
here they are moved to the answer's time line and made safe to publish whatever the checkpoint
says: clamped inside the segment, in order, not overlapping, each start before its end. Every
word of the segment's text (split at white space) is there once, in order; a sidecar answer
that is not exactly those words is a server error, never published.

Each `align` has the ASR deadline of the round trip (`--asr-timeout-s`); no answer within it,
or an ASR pool that cannot take work, fails the request with a 503 (a job item is retried as
any item that met a server error is). `segment_words` is the call for one segment (the
captioned endpoint and job captions call it through `add_words`; a WebSocket session through
`pcm_words`, for each of its segments' `audio.done`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from sidecar.shared.protocol import AsrAudio, WordTiming
from sidecar.shared.tiers import Tier
from supervisor.errors import InvalidRequest, ServerError, Unavailable
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.text.captions import Segment, Word
from supervisor.supervision.scheduler import Scheduler

GRANULARITIES = ("segment", "word")
# a job item's own, not the speech's (`title`: a name shown with it, such as an audiobook chapter's)
ITEM_FIELDS = ("captions", "timestamp_granularities", "title", "first_chunk_s")
RETRY_AFTER_S = 5
TICK_S = 0.001  # the shortest word, so that each start is before its end


class Spoken(Protocol):
    """What `item_words` reads of a job item's synthesis (`speech.synthesis.runner.SynthesisRun`): its
    audio's rate, its segments (the words go into them), its request's language and its tier."""

    @property
    def sample_rate(self) -> int: ...
    @property
    def segments(self) -> list[Segment]: ...
    @property
    def request(self) -> SpeechRequest: ...
    @property
    def tier(self) -> Tier: ...


def wants_words(body: Any, asr: Scheduler | None, param: str = "timestamp_granularities") -> bool:
    """`timestamp_granularities`: a non-empty list of "segment" and "word" (default segment).
    True when "word" is asked for; a 400 `word_timestamps_unavailable` without `--asr-model`."""
    wanted = body.get(param, ["segment"]) if isinstance(body, dict) else []
    if (
        not isinstance(wanted, list)
        or not wanted
        or not all(isinstance(g, str) and g in GRANULARITIES for g in wanted)
    ):
        raise InvalidRequest(
            f'\'{param}\' must be a non-empty list of "segment" and "word".', param=param
        )
    if "word" not in wanted:
        return False
    if asr is None:
        error = InvalidRequest(
            "Word timestamps need the ASR sidecar (--asr-model), which this server does not "
            'run; ask for ["segment"]: each sentence\'s timing, exact from the audio.',
            param=param,
        )
        error.code = "word_timestamps_unavailable"
        raise error
    return True


def item_wants_words(fields: Mapping[str, object], asr: Scheduler | None) -> bool:
    """A job item's `timestamp_granularities`: as `wants_words`, and only with captions."""
    if not wants_words(fields, asr):
        return False
    if fields.get("captions") is not True:
        raise InvalidRequest(
            'Word timestamps are cues in an item\'s captions: send "captions": true with them.',
            param="timestamp_granularities",
        )
    return True


async def item_words(
    fields: Mapping[str, object],
    asr: Scheduler | None,
    synthesis: Spoken,
    pcm: bytes,
    deadline_s: float,
) -> None:
    """A job item's words, when it asked for them, into its synthesis's segments (its captions
    become a cue per word). A server restarted without `--asr-model` fails the item with the
    400's error."""
    if asr is None and "timestamp_granularities" not in fields:
        return
    if item_wants_words(fields, asr) and asr is not None:
        await add_words(
            asr,
            pcm,
            synthesis.sample_rate,
            synthesis.segments,
            synthesis.request.language,
            synthesis.tier,
            deadline_s,
        )


def tidy(raw: list[WordTiming], text: str, start: float, end: float) -> list[Word]:
    """The sidecar's word times (relative to the segment) on the answer's time line, checked
    against the segment's words, clamped into [start, end], ordered and non-overlapping."""
    words = text.split()
    if [w.get("word") for w in raw] != words:
        raise ServerError("the ASR sidecar timed other words than the segment's")
    span = max(end - start, 0.0)
    tick = min(TICK_S, span / (2 * len(words))) if words else TICK_S
    out: list[Word] = []
    floor = start
    for k, (word, timing) in enumerate(zip(words, raw, strict=True)):
        room = end - (len(words) - k) * tick  # what the later words need is kept for them
        begin = min(max(start + float(timing["start"]), floor), room)
        finish = min(max(start + float(timing["end"]), begin + tick), room + tick)
        out.append(Word(word=word, start=begin, end=finish))
        floor = finish
    return in_milliseconds(out, start, end)


def in_milliseconds(words: list[Word], start: float, end: float) -> list[Word]:
    """The words' times rounded to the millisecond (as captions and segments read them), kept
    inside [start, end]; as they were where the segment is too short for that (under 1 ms a
    word), so that each word still starts before it ends."""
    rounded = [
        Word(
            word=w["word"],
            start=min(max(round(w["start"], 3), start), end),
            end=min(max(round(w["end"], 3), start), end),
        )
        for w in words
    ]
    ordered = all(w["start"] < w["end"] for w in rounded) and all(
        a["end"] <= b["start"] for a, b in itertools.pairwise(rounded)
    )
    return rounded if ordered else words


async def segment_words(  # noqa: PLR0913  one segment's audio and how it is heard: the ASR task's fields
    asr: Scheduler,
    pcm: bytes,
    sample_rate: int,
    segment: Segment,
    language: str | None,
    tier: Tier,
    deadline_s: float,
) -> list[Word]:
    """The words of one segment whose 16-bit samples are `pcm` (the segment's own audio)."""
    if not segment["text"].split():
        return []
    fields: AsrAudio = {
        "audio": pcm,
        "encoding": "s16le",
        "sample_rate": sample_rate,
        "text": segment["text"],
        "language": language,
    }
    try:
        message = await asyncio.wait_for(asr.submit_align(fields, tier), deadline_s)
    except asyncio.TimeoutError:
        raise Unavailable(
            f"word timing: the ASR sidecar gave no answer within {deadline_s:.0f} s",
            retry_after_s=RETRY_AFTER_S,
        ) from None
    return tidy(message["words"], segment["text"], segment["start"], segment["end"])


async def add_words(  # noqa: PLR0913  the answer's audio and how it is heard: the ASR task's fields
    asr: Scheduler,
    pcm: bytes,
    sample_rate: int,
    segments: list[Segment],
    language: str | None,
    tier: Tier,
    deadline_s: float,
) -> None:
    """Give every segment its `words`, timed on its own slice of `pcm` (the whole answer), one
    after the other (the ASR sidecar takes one at a time)."""
    for segment in segments:
        first, last = round(segment["start"] * sample_rate), round(segment["end"] * sample_rate)
        piece = pcm[2 * first : 2 * last]
        segment["words"] = await segment_words(
            asr, piece, sample_rate, segment, language, tier, deadline_s
        )


async def kept(pieces: AsyncIterator[ChunkAudio], pcm: list[bytes]) -> AsyncIterator[ChunkAudio]:
    """The pieces passed on as they come, each one's 16-bit samples also kept in `pcm`."""
    async for piece in pieces:
        pcm.append(piece.audio)
        yield piece


async def pcm_words(  # noqa: PLR0913  a segment's audio and how it is heard: the ASR task's fields
    asr: Scheduler,
    pcm: list[bytes],
    sample_rate: int,
    text: str,
    language: str | None,
    tier: Tier,
    deadline_s: float,
) -> list[Word]:
    """The words of a WebSocket session's segment (at its tier), on the segment's own time
    line: seconds from the start of its audio."""
    audio = b"".join(pcm)
    whole = Segment(text=text, start=0.0, end=len(audio) / 2 / sample_rate)
    return await segment_words(asr, audio, sample_rate, whole, language, tier, deadline_s)
