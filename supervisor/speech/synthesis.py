"""One speech request through the scheduler: chunks in, audio pieces out, in order.

The text is split by `chunking`; `chunk_mode` decides how the chunks' tasks relate:

    none        one task with the whole input; the runtime chunks it the reference way
    concurrent  chunk 0 first, asking for its codec tokens; then every other chunk at once,
                each prompted with chunk 0 (its tokens and text) so the voice stays the same
    sequential  each chunk prompted with the one before it, one after another

With a voice prompt (a saved or cloned voice) every chunk is prompted with that voice, so
`concurrent` submits all chunks at once and `sequential` runs them one at a time. A `duration`
applies to the whole input, so such a request is always one task.

The input is first read into spans (`supervisor.speech.text.script`: an SSML document or a dialogue
script, a lexicon, normalisation); each span is chunked on its own (with `captions`, each
sentence), and each chunk keeps its span's voice, speed and language (`Part`). Only chunks in
one voice prompt each other: in `concurrent` mode the first chunk of each voice leads the later
chunks in it. Silence asked for (SSML breaks, dialogue pauses) is zeros stitched onto the
chunks' audio; with `captions` each chunk's spoken samples are timed in `segments`.

The whole request's estimated audio, its pauses included, is checked against the limits
(`cost`: a 400 if it is more than one request may make) and reserved when it is admitted, so a
request is refused (429) at once or not at all. The next chunk is submitted before the current piece is handed
on, so encoding and sending one piece overlaps the generation of the next. `close` cancels
whatever is still queued or running (the client went away, or a chunk failed) and gives back
the unused reservation.

Every chunk's audio is checked in the sidecar; a chunk that fails a check is generated again
with another seed, up to --qa-retries times (supervisor/speech/quality.py), and `verdict` sums up the
outcome of the chunks handed on so far.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, replace
from typing import Any

from sidecar.shared.duration import FRAME_RATE
from sidecar.shared.protocol import AudioToHear, Item, Result, VoicePayload
from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor.errors import InvalidRequest
from supervisor.speech import chunking, continuity, cost, quality
from supervisor.speech.hearing import Hearing
from supervisor.speech.piece import Attempt, Piece
from supervisor.speech.schemas import MAX_SEED, SpeechRequest
from supervisor.speech.text import captions, script
from supervisor.speech.text.captions import Segment
from supervisor.speech.text.spans import Script, Span
from supervisor.supervision.scheduler import Priority, Scheduler

BYTES_PER_TOKEN = 4  # input_tokens in SSE usage is an estimate: about four bytes of UTF-8 each


@dataclass(frozen=True)
class Voice:
    """What a request speaks with."""

    instruct: str | None = None  # voice design
    prompt: VoicePayload | None = None  # a saved or cloned voice
    seed: int | None = None  # used when the request names no seed (OpenAI voice names)


@dataclass(frozen=True)
class Part:
    """How one chunk is read: the voice and settings of the span it came from."""

    voice_name: str | None  # the span's voice (None: the request's)
    voice: Voice
    speed: float  # the request's speed times the span's
    language: str | None
    lead_s: float = 0.0  # silence before the chunk
    pause_s: float = 0.0  # silence after the chunk


VoiceResolver = Callable[[str], Voice]  # a voice name in the text (SSML <voice>) to its Voice


class Synthesis:
    def __init__(  # noqa: PLR0913  a synthesis's parts, the optional ones by name; built in speech.service
        self,
        scheduler: Scheduler,
        request: SpeechRequest,
        voice: Voice,
        chunk_s: float,
        priority: Priority = Priority.INTERACTIVE,
        voices: VoiceResolver | None = None,
        text: Script | None = None,
        captions: bool = False,
        asr: Hearing | None = None,
        first_short: bool = False,
    ) -> None:
        """`text`: the input as read (`script.read_off_loop`); None: read here, without a
        lexicon. `first_short`: a streamed answer, whose first chunk is short
        (`chunking.first_chunk`)."""
        self.first_short = first_short
        self.scheduler = scheduler
        self.voices = voices
        self.text = text if text is not None else script.read(request, scheduler.settings)
        self.captions = captions  # each sentence its own chunk, its timing kept in `segments`
        self.segments: list[Segment] = []
        self.samples = 0  # of audio handed on so far
        self.asr = asr  # the ASR sidecar (--asr-model): each chunk is heard back
        self.request = request
        self.voice = voice
        self.priority = priority
        given = request.seed if request.seed is not None else voice.seed
        self.seed = given if given is not None else secrets.randbits(63)
        self.id = uuid.uuid4().hex
        self.parts: list[Part] = []
        self.chunks = self.plan(chunk_s)
        self.mode = "none" if len(self.chunks) == 1 else request.chunk_mode
        self.futures: list[asyncio.Future[Any]] = []  # of the tasks and of their retry loops
        self.scheduled: list[asyncio.Future[Result]] = []  # the generation tasks' own
        self.audio_s = 0.0
        self.sample_rate = 0
        self.verdict = quality.Verdict()
        count, s = len(self.chunks), scheduler.settings
        frames = continuity.prompted_frames(
            [self.item(i) for i in range(count)],
            [self.prompter(i) for i in range(count)],
            s.max_continuity_audio_tokens,
            s.max_continuity_text_words,
        )
        spoken = sum(frames) / FRAME_RATE
        silence = sum(part.lead_s + part.pause_s for part in self.parts)
        self.cost = cost.Cost(cost.chars(self.text), len(self.chunks), spoken, silence)
        cost.check(self.cost, scheduler.settings, scheduler.capacity)
        # The pauses are admitted too: the answer holds them as it holds speech.
        self.reservation = scheduler.reserve(self.cost.audio_s)

    def plan(self, chunk_s: float) -> list[str]:
        """The chunks' texts, and in `parts` how each is read; a span boundary is a chunk
        boundary."""
        read = self.text
        if self.request.duration is not None and len(read.spans) > 1:
            raise InvalidRequest(
                "'duration' applies to one text read one way; this input has breaks, voices, "
                "rates or languages of its own, so leave 'duration' out.",
                param="duration",
            )
        chunks: list[str] = []
        for span in read.spans:
            voice = self.voice if span.voice is None else self.resolve(span.voice)
            if self.captions:
                texts = [
                    t
                    for s in captions.sentences(span.text)
                    for t in self.split(replace(span, text=s), voice, chunk_s)
                ]
            else:
                texts = self.split(span, voice, chunk_s, first=not chunks)
            for j, text in enumerate(texts):
                chunks.append(text)
                self.parts.append(
                    Part(
                        span.voice,
                        voice,
                        cost.span_speed(self.request, span.speed),
                        span.language or self.request.language,
                        read.lead_s if not self.parts else 0.0,
                        span.pause_s if j == len(texts) - 1 else 0.0,
                    )
                )
        if self.request.duration is not None and len(chunks) > 1:
            raise InvalidRequest(
                "'duration' makes one task of the whole input; captions need a chunk per "
                "sentence, so leave 'duration' out.",
                param="duration",
            )
        return chunks

    def resolve(self, name: str) -> Voice:
        if self.voices is None:
            raise InvalidRequest("this route cannot change voices inside the text", param="input")
        return self.voices(name)

    def split(self, span: Span, voice: Voice, chunk_s: float, first: bool = False) -> list[str]:
        r = self.request
        if r.chunk_mode == "none" or r.duration is not None:
            return [span.text]
        if first and self.first_short:
            head, rest = chunking.first_chunk(span.text)
            if rest:
                return [head, *self.split(replace(span, text=rest), voice, chunk_s)]
        words = self.scheduler.settings.text_chunk_words
        if (
            words and r.chunk_s is None and r.whole_s is None
        ):  # by words, unless the request gave seconds
            return chunking.split_words(span.text, words)
        prompt = voice.prompt
        speed = cost.span_speed(r, span.speed)
        total_s = chunking.estimate_s(
            span.text,
            prompt["ref_text"] if prompt else None,
            prompt["tokens"]["shape"][1] if prompt else None,
            speed,
        )
        # Chunks are measured at the request's speed, so a fast reader gets fewer, longer chunks.
        return chunking.split_text(span.text, r.chunk_s or chunk_s, total_s, r.whole_s)

    def item(
        self,
        index: int,
        prompt: VoicePayload | None = None,
        return_tokens: bool = False,
        attempt: int = 1,
    ) -> Item:
        r, part = self.request, self.parts[index]
        # A span in a voice of its own starts from that voice's seed, unless the request gave one.
        base = self.seed if r.seed is not None or part.voice.seed is None else part.voice.seed
        seed = (base + index * CHUNK_SEED_STRIDE) % (MAX_SEED + 1)
        item: Item = {
            "id": f"{self.id}-{index}" + (f".{attempt}" if attempt > 1 else ""),
            "text": self.chunks[index],
            "num_step": r.num_step,
            "seed": quality.retry_seed(seed, attempt),
        }
        if attempt > 1:
            item["attempt"] = attempt
        voice = part.voice.prompt or prompt
        optional = {
            "language": part.language,
            "instruct": part.voice.instruct,
            "voice": voice,
            "speed": part.speed if part.speed != 1.0 else None,
            "duration": r.duration,
            "guidance_scale": r.guidance_scale,
            "denoise": r.denoise,
        }
        item.update({k: v for k, v in optional.items() if v is not None})  # type: ignore[typeddict-item]
        if return_tokens:
            item["return_tokens"] = True
        return item

    async def hear(self, result: Result, index: int, count: int) -> Attempt:
        """The attempt, the ASR round trip's checks added to its own."""
        assert self.asr is not None
        fields: AudioToHear = {
            "audio": result["audio"],
            "encoding": "s16le",
            "sample_rate": result["sample_rate"],
            "text": self.chunks[index],
            "language": self.parts[index].language,
        }
        transcript = await self.asr.transcript(fields, self.priority)
        if transcript is None:  # the ASR sidecar cannot hear it now: sent on, saying so
            return Attempt(result, count, unheard=True)
        heard = result.copy()
        heard["qa"] = {**result.get("qa", {}), **transcript["qa"]}
        return Attempt(heard, count)

    def related(self, first: int, later: int) -> bool:
        """Whether chunk `later` is prompted with chunk `first`'s audio: both in one voice, and
        that voice has no prompt of its own (a saved voice prompts every chunk itself)."""
        a, b = self.parts[first], self.parts[later]
        return self.mode != "none" and a.voice_name == b.voice_name and a.voice.prompt is None

    def prompter(self, index: int) -> int | None:
        """The chunk whose audio will prompt chunk `index`: the one before it (sequential), or the
        first in its voice (concurrent); None if none will."""
        if self.mode == "sequential":
            return index - 1 if index and self.related(index - 1, index) else None
        return next((j for j in range(index) if self.related(j, index)), None)

    def follow(self, done: Attempt, index: int) -> VoicePayload | None:
        """Chunk `index`'s result as the prompt of a later chunk, within the continuity limits."""
        s = self.scheduler.settings
        return continuity.continuity(
            done.result,
            self.chunks[index],
            s.max_continuity_audio_tokens,
            s.max_continuity_text_words,
        )

    def submit(
        self, index: int, prompt: VoicePayload | None = None, return_tokens: bool = False
    ) -> asyncio.Future[Attempt]:
        """Chunk `index`, generated until its audio passes the checks or the retries run out;
        the future resolves to its last attempt. The first attempt is queued at once."""
        first = self.queue(index, prompt, return_tokens, 1)
        future = asyncio.ensure_future(self.attempts(first, index, prompt, return_tokens))
        self.futures.append(future)
        return future

    def queue(
        self, index: int, prompt: VoicePayload | None, return_tokens: bool, attempt: int
    ) -> asyncio.Future[Result]:
        item = self.item(index, prompt, return_tokens, attempt)
        [future] = self.scheduler.submit([item], self.priority, self.reservation)
        self.futures.append(future)  # closing cancels it even if its retry loop never ran
        self.scheduled.append(future)
        return future

    def begun(self, waiting: set[asyncio.Future[Any]]) -> bool:
        """Whether a sidecar has taken (or finished) any of its tasks; `waiting`: the
        scheduler's tasks no sidecar has taken (`Scheduler.waiting`)."""
        return any(future not in waiting for future in self.scheduled)

    async def attempts(
        self,
        pending: asyncio.Future[Result],
        index: int,
        prompt: VoicePayload | None,
        return_tokens: bool,
    ) -> Attempt:
        retries = self.scheduler.settings.qa_retries
        attempt = 1
        while True:
            done = Attempt(await pending, attempt)
            if self.asr is not None and not quality.failed_checks(done.result.get("qa", {})):
                done = await self.hear(done.result, index, attempt)
            failed = quality.failed_checks(done.result.get("qa", {}))
            if failed:
                quality.count_attempt(failed, retrying=attempt <= retries)
            if not failed or attempt > retries:
                return done
            if self.scheduler.closed is not None:  # draining: a retry is new work, refused
                raise self.scheduler.closed
            attempt += 1
            pending = self.queue(index, prompt, return_tokens, attempt)

    async def pieces(self) -> AsyncGenerator[Piece, None]:
        """Each chunk's piece, in order, with its silences; raises the first chunk's error."""
        count = len(self.chunks)
        try:
            if self.mode == "sequential":
                pending = self.submit(0, return_tokens=count > 1 and self.related(0, 1))
                for i in range(count):
                    done = await pending
                    if i + 1 < count:
                        prompt = self.follow(done, i) if self.related(i, i + 1) else None
                        tokens = i + 2 < count and self.related(i + 1, i + 2)
                        pending = self.submit(i + 1, prompt, return_tokens=tokens)
                    yield self.account(done, i)
            else:
                # The first chunk of each voice leads: all leaders at once; each later chunk in
                # a leader's voice is submitted, prompted with it, once the leader is done.
                followers: dict[int, list[int]] = {}  # leader -> the later chunks in its voice
                for i in range(count):
                    leader = next((j for j in followers if self.related(j, i)), None)
                    if leader is None:
                        followers[i] = []
                    else:
                        followers[leader].append(i)
                futures = {
                    j: self.submit(j, return_tokens=bool(later)) for j, later in followers.items()
                }
                for i in range(count):
                    done = await futures[i]
                    if followers.get(i):
                        prompt = self.follow(done, i)
                        futures.update({f: self.submit(f, prompt) for f in followers[i]})
                    yield self.account(done, i)
        finally:
            self.close()

    def account(self, done: Attempt, index: int) -> Piece:
        """The chunk's piece: its audio with the silence asked for before and after it."""
        part, rate = self.parts[index], done.result["sample_rate"]
        lead, spoken, pause = (
            round(part.lead_s * rate),
            len(done.result["audio"]) // 2,
            round(part.pause_s * rate),
        )
        made = Piece.of(done, lead, pause)
        self.verdict.add(made)
        self.sample_rate = self.sample_rate or rate
        if self.captions:  # in samples, so that a boundary is exact
            start = self.samples + lead
            self.segments.append(
                {"text": self.chunks[index], "start": start / rate, "end": (start + spoken) / rate}
            )
        self.samples += lead + spoken + pause
        self.audio_s += made.samples / max(1, rate)
        return made

    def close(self) -> None:
        """Cancel what has not finished and give back the reservation. Idempotent."""
        for future in self.futures:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved, so asyncio does not log it as never seen
        self.reservation.release()

    def usage(self) -> dict[str, int]:
        return usage(self.request.input, self.audio_s)


def usage(text: str, audio_s: float) -> dict[str, int]:
    """OpenAI's usage object: text tokens (estimated) in, codec frames out."""
    input_tokens = max(1, -(-len(text.encode()) // BYTES_PER_TOKEN))
    output_tokens = round(audio_s * FRAME_RATE)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
