"""One speech request through the scheduler: its plan's items in, audio pieces out, in order.

The plan (`plan`: pure) cuts the input into chunks and says which prompts which; this
runner submits them in the order `chunk_mode` asks: in `concurrent` mode the first chunk of each
voice leads and the later chunks in it follow, prompted with it, once it is done; in
`sequential` mode each chunk waits for the one before it. Silence asked for (SSML breaks,
dialogue pauses) is zeros stitched onto the chunks' audio; with `captions` each chunk's spoken
samples are timed in `segments`.

The whole request's estimated audio, its pauses included, is checked against the limits
(`cost`: a 400 if it is more than one request may make) and reserved when it is admitted, so a
request is refused (429) at once or not at all. The next chunk is submitted before the current
piece is handed on, so encoding and sending one piece overlaps the generation of the next.
`close` cancels whatever is still queued or running (the client went away, or a chunk failed)
and gives back the unused reservation.

Every chunk's audio is checked in the sidecar; a chunk that fails a check is generated again
with another seed, up to --qa-retries times (supervisor/speech/checks/quality.py), and `verdict` sums up
the outcome of the chunks handed on so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from sidecar.shared.duration import FRAME_RATE
from sidecar.shared.protocol import AsrAudio, Result, VoicePayload
from sidecar.shared.tiers import Tier
from supervisor.settings import SpeechSettings
from supervisor.speech.audio.chunk_audio import ChunkAttempt, ChunkAudio
from supervisor.speech.checks import quality
from supervisor.speech.checks.asr_round_trip import AsrRoundTrip
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice, VoiceResolver
from supervisor.speech.synthesis import cost, script
from supervisor.speech.synthesis.plan import Plan, Reading
from supervisor.speech.text.captions import Segment
from supervisor.speech.text.spans import Script
from supervisor.supervision.scheduler import Scheduler

BYTES_PER_TOKEN = 4  # input_tokens in SSE usage is an estimate: about four bytes of UTF-8 each


class SynthesisRun:
    def __init__(  # noqa: PLR0913  a synthesis's parts, the optional ones by name; built in speech.synthesis.steps
        self,
        scheduler: Scheduler,
        request: SpeechRequest,
        voice: Voice,
        settings: SpeechSettings,
        voices: VoiceResolver | None = None,
        text: Script | None = None,
        captions: bool = False,
        asr: AsrRoundTrip | None = None,
        first_short: bool = False,
        first_chunk_s: float | None = None,
        owner: str = "",
    ) -> None:
        """`text`: the input as read (`script.read_off_loop`); None: read here, without a
        lexicon. `first_short`: a streamed answer, whose first chunk is short
        (`chunking.first_chunk`); `first_chunk_s`: a job item's first chunk of that length
        (`chunking.lead_chunk`)."""
        self.scheduler = scheduler
        self.request = request
        self.captions = captions  # each sentence its own chunk, its timing kept in `segments`
        read = text if text is not None else script.read(request, settings)
        reading = Reading(settings.chunk_s, voices, captions, first_short, first_chunk_s)
        self.plan = Plan(request, read, voice, settings, reading)
        self.chunks, self.parts, self.cost = self.plan.chunks, self.plan.parts, self.plan.cost
        self.seed, self.id = self.plan.seed, self.plan.id
        self.segments: list[Segment] = []
        self.samples = 0  # of audio handed on so far
        self.asr = asr  # the ASR sidecar (--asr-model): each chunk is heard back
        self.tier = request.tier  # its tasks' (OpenAI's `service_tier`, `schemas.service_tier`)
        self.owner = owner  # whose request it is (its tasks' fair share between owners)
        # the generation tasks and their retry loops, which closing cancels
        self.futures: list[asyncio.Future[Result] | asyncio.Future[ChunkAttempt]] = []
        self.scheduled: list[asyncio.Future[Result]] = []  # the generation tasks' own
        self.audio_s = 0.0
        self.sample_rate = 0
        self.verdict = quality.Verdict()
        self.admitted = (0.0, 0.0)  # when its admission began and ended (steps.start)
        cost.check(self.cost, settings, scheduler.capacity)
        # The pauses are admitted too: the answer holds them as it holds speech.
        counted = owner if self.tier is Tier.INTERACTIVE else None  # whose share it takes
        self.reservation = scheduler.reserve(self.cost.audio_s, counted)

    async def hear(self, result: Result, index: int, count: int) -> ChunkAttempt:
        """The attempt, the ASR round trip's checks added to its own."""
        assert self.asr is not None
        fields: AsrAudio = {
            "audio": result["audio"],
            "encoding": "s16le",
            "sample_rate": result["sample_rate"],
            "text": self.chunks[index],
            "language": self.parts[index].language,
        }
        transcript = await self.asr.transcript(fields, self.tier)
        if transcript is None:  # the ASR sidecar cannot hear it now: sent on, saying so
            return ChunkAttempt(result, count, unheard=True)
        heard = result.copy()
        heard["qa"] = {**result.get("qa", {}), **transcript["qa"]}
        return ChunkAttempt(heard, count)

    def submit(
        self, index: int, prompt: VoicePayload | None = None, return_tokens: bool = False
    ) -> asyncio.Future[ChunkAttempt]:
        """Chunk `index`, generated until its audio passes the checks or the retries run out;
        the future resolves to its last attempt. The first attempt is queued at once."""
        first = self.queue(index, prompt, return_tokens, 1)
        future = asyncio.ensure_future(self.attempts(first, index, prompt, return_tokens))
        self.futures.append(future)
        return future

    def queue(
        self, index: int, prompt: VoicePayload | None, return_tokens: bool, attempt: int
    ) -> asyncio.Future[Result]:
        item = self.plan.item(index, prompt, return_tokens, attempt)
        [future] = self.scheduler.submit([item], self.tier, self.reservation, self.owner)
        self.futures.append(future)  # closing cancels it even if its retry loop never ran
        self.scheduled.append(future)
        return future

    def begun(self, waiting: set[asyncio.Future[Result]]) -> bool:
        """Whether a sidecar has taken (or finished) any of its tasks; `waiting`: the
        scheduler's tasks no sidecar has taken (`Scheduler.waiting`)."""
        return any(future not in waiting for future in self.scheduled)

    async def attempts(
        self,
        pending: asyncio.Future[Result],
        index: int,
        prompt: VoicePayload | None,
        return_tokens: bool,
    ) -> ChunkAttempt:
        retries = self.plan.settings.qa_retries
        attempt = 1
        while True:
            done = ChunkAttempt(await pending, attempt)
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

    async def pieces(self) -> AsyncGenerator[ChunkAudio, None]:
        """Each chunk's piece, in order, with its silences; raises the first chunk's error."""
        count = len(self.chunks)
        try:
            if self.plan.mode == "sequential":
                pending = self.submit(0, return_tokens=count > 1 and self.plan.related(0, 1))
                for i in range(count):
                    done = await pending
                    if i + 1 < count:
                        prompt = (
                            self.plan.follow(done.result, i)
                            if self.plan.related(i, i + 1)
                            else None
                        )
                        tokens = i + 2 < count and self.plan.related(i + 1, i + 2)
                        pending = self.submit(i + 1, prompt, return_tokens=tokens)
                    yield self.account(done, i)
            else:
                # The first chunk of each voice leads: all leaders at once; each later chunk in
                # a leader's voice is submitted, prompted with it, once the leader is done.
                followers = self.plan.leaders()  # leader -> the later chunks in its voice
                futures = {
                    j: self.submit(j, return_tokens=bool(later)) for j, later in followers.items()
                }
                for i in range(count):
                    done = await futures[i]
                    if followers.get(i):
                        prompt = self.plan.follow(done.result, i)
                        futures.update({f: self.submit(f, prompt) for f in followers[i]})
                    yield self.account(done, i)
        finally:
            self.close()

    def account(self, done: ChunkAttempt, index: int) -> ChunkAudio:
        """The chunk's piece: its audio with the silence asked for before and after it."""
        part, rate = self.parts[index], done.result["sample_rate"]
        lead, spoken, pause = (
            round(part.lead_s * rate),
            len(done.result["audio"]) // 2,
            round(part.pause_s * rate),
        )
        made = ChunkAudio.of(done, lead, pause)
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
