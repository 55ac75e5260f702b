"""A speech request's steps, written once: the speech route, the captioned route, the WebSocket
and the job runner each call these, and keep only their own concerns (HTTP headers, streaming,
disconnects and deadlines; a job item's store and queue).

    voice       the voice a request names, among those its owner may use (access.py)
    start       its text read (SSML, lexicon, normalisation, off the event loop), its cost
                checked and reserved: a running SynthesisRun, or its 400, 429 or 503
    encode_whole / encoded
                the audio as one file in the requested format, at once or as it comes
    cache_meta  what the result cache keeps beside the audio, to answer from it later
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import ParamSpec, TypeVar

from supervisor.qa_summary import QaSummary
from supervisor.services import Services
from supervisor.speech.audio import delivery
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.audio.delivery import Profile
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.result_cache import CacheMeta
from supervisor.speech.stores.voices import resolve_voice, voice_resolver
from supervisor.speech.synthesis import script
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.tenants import Tenant
from supervisor.tracing import spans

T = TypeVar("T")
P = ParamSpec("P")


def voice(svc: Services, owner: Tenant, speech: SpeechRequest) -> Voice:
    """The voice `speech` names, one of those `owner` may use; a 400 or 404 raised here."""
    return resolve_voice(speech, svc.voices_for(owner))


async def start(  # noqa: PLR0913  the request's four parts and four keyword-only admission options
    svc: Services,
    owner: Tenant,
    speech: SpeechRequest,
    voice: Voice,
    *,
    captions: bool = False,
    first_short: bool = False,
    first_chunk_s: float | None = None,
    heard: bool = True,
) -> SynthesisRun:
    """A request's synthesis, admitted (its 400, 429 or 503 raised here): its text read with
    its owner's lexicon, the voices it names in the text resolved among the owner's. Not
    `heard`: its chunks go out without the ASR round trip (a WebSocket session's choice)."""
    voices = voice_resolver(speech, svc.voices_for(owner))
    lexicon = svc.lexicons_for(owner).for_request(speech)
    text = await script.read_off_loop(speech, svc.settings.speech, lexicon)
    began = time.monotonic()
    synthesis = SynthesisRun(
        svc.scheduler,
        speech,
        voice,
        svc.settings.speech,
        voices,
        text,
        captions=captions,
        asr=svc.hearing if heard else None,
        first_short=first_short,
        first_chunk_s=first_chunk_s,
        owner=owner.owner,
    )
    # Its plan, checked against the limits and reserved; a job item's trace records it later.
    synthesis.admitted = (began, time.monotonic())
    spans.record("admission", spans.current(), *synthesis.admitted)
    return synthesis


async def off_loop(cheap: bool, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run an encoder step; unless it is `cheap` (framing only), in a worker thread."""
    with spans.span("encode"):
        if cheap:
            return call(*args, **kwargs)
        return await asyncio.to_thread(call, *args, **kwargs)


async def encode_whole(fmt: str, pcm: bytes, rate: int, wanted: Profile) -> bytes:
    """A whole answer's audio (`rate` Hz PCM) as one file in `fmt`; resampling, loudness and the
    compressed formats in a worker thread, off the event loop."""
    cheap = delivery.is_cheap(fmt, rate, wanted)
    return await off_loop(cheap, delivery.encode, fmt, pcm, rate, wanted)


async def _streamed(
    first: ChunkAudio, rest: AsyncIterator[ChunkAudio], fmt: str, wanted: Profile
) -> AsyncIterator[bytes]:
    rate = first.sample_rate
    cheap = delivery.is_cheap(fmt, rate, wanted)
    encoder = await off_loop(cheap, delivery.encoder, fmt, rate, wanted)
    yield await off_loop(cheap, encoder.feed, first.audio)
    async for piece in rest:
        data = await off_loop(cheap, encoder.feed, piece.audio)
        if data:
            yield data
    tail = await off_loop(cheap, encoder.finish)
    if tail:
        yield tail


async def encoded(
    first: ChunkAudio, rest: AsyncIterator[ChunkAudio], fmt: str, wanted: Profile
) -> AsyncIterator[bytes]:
    """Pieces' audio as one file in its format, each piece's sent as soon as it is encoded
    (one encoder for the whole file); with a loudness target, measured over all of it first."""
    if wanted.loudness is None:
        async for data in _streamed(first, rest, fmt, wanted):
            yield data
        return
    pcm = first.audio + b"".join([piece.audio async for piece in rest])
    yield await encode_whole(fmt, pcm, first.sample_rate, wanted)


def cache_meta(synthesis: SynthesisRun, fmt: str, rate: int, qa: str | QaSummary) -> CacheMeta:
    """What the result cache keeps beside an answer's audio (`rate`: the file's): its headers'
    worth, and `qa`, the verdict as the answer's reader takes it (a header, or a job item's
    summary)."""
    return {
        "format": fmt,
        "sample_rate": rate,
        "seed": synthesis.seed,
        "audio_s": synthesis.audio_s,
        "chunks": len(synthesis.chunks),
        "qa": qa,
    }
