"""A speech request's plan: its chunks, how each is read, which prompts which, and what it costs.

Pure: made from the request, its text as read (`supervisor.speech.synthesis.script`) and the settings,
with no scheduler and no I/O, so it is tested alone (tests/supervisor/speech/
test_synthesis_plan.py). The runner (`supervisor.speech.synthesis.runner`) submits the plan's items and
hands their audio on.

The text is split by `chunking`; `chunk_mode` decides how the chunks relate:

    none        one task with the whole input; the runtime chunks it the reference way
    concurrent  chunk 0 first, asking for its codec tokens; then every other chunk at once,
                each prompted with chunk 0 (its tokens and text) so the voice stays the same
    sequential  each chunk prompted with the one before it, one after another

Each span of the text is chunked on its own (with `captions`, each sentence), and each chunk
keeps its span's voice, speed and language (`Part`). Only chunks in one voice prompt each other;
a voice with a prompt of its own (a saved or cloned voice) prompts every chunk itself. A
`duration` applies to the whole input, so such a request is always one chunk.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, replace

from sidecar.shared.duration import FRAME_RATE
from sidecar.shared.protocol import Item, Result, VoicePayload
from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor.errors import InvalidRequest
from supervisor.settings import SpeechSettings
from supervisor.speech.checks import quality
from supervisor.speech.request.schemas import MAX_SEED, SpeechRequest
from supervisor.speech.request.voice import Voice, VoiceResolver
from supervisor.speech.synthesis import continuity, cost
from supervisor.speech.text import captions, chunking
from supervisor.speech.text.spans import Script, Span


@dataclass(frozen=True)
class Part:
    """How one chunk is read: the voice and settings of the span it came from."""

    voice_name: str | None  # the span's voice (None: the request's)
    voice: Voice
    speed: float  # the request's speed times the span's
    language: str | None
    lead_s: float = 0.0  # silence before the chunk
    pause_s: float = 0.0  # silence after the chunk


@dataclass(frozen=True)
class Reading:
    """How the text is to be cut: besides the request and its voice, what the plan depends on."""

    chunk_s: float  # the server's chunk length (--chunk-s), unless the request names one
    voices: VoiceResolver | None = None  # None: the route cannot change voices in the text
    captions: bool = False  # each sentence its own chunk
    first_short: bool = False  # a streamed answer: its first chunk short (`chunking.first_chunk`)
    first_chunk_s: float | None = None  # a job item's first chunk this long (`chunking.lead_chunk`)


class Plan:
    """The chunks of one request and the item each is sent as. `seed`: the request's, else the
    voice's, else drawn at random; `id` names the items (`<id>-<chunk>`), drawn unless given."""

    def __init__(  # noqa: PLR0913  the plan's inputs; the random ones by name, for tests
        self,
        request: SpeechRequest,
        text: Script,
        voice: Voice,
        settings: SpeechSettings,
        reading: Reading,
        *,
        seed: int | None = None,
        plan_id: str | None = None,
    ) -> None:
        self.request = request
        self.text = text
        self.voice = voice
        self.settings = settings
        self.reading = reading
        given = request.seed if request.seed is not None else voice.seed
        self.seed = (
            given if given is not None else seed if seed is not None else secrets.randbits(63)
        )
        self.id = plan_id or uuid.uuid4().hex
        self.parts: list[Part] = []
        self.chunks = self.cut()
        self.mode = "none" if len(self.chunks) == 1 else request.chunk_mode
        count = len(self.chunks)
        frames = continuity.prompted_frames(
            [self.item(i) for i in range(count)],
            [self.prompter(i) for i in range(count)],
            settings.max_continuity_audio_tokens,
            settings.max_continuity_text_words,
        )
        spoken = sum(frames) / FRAME_RATE
        silence = sum(part.lead_s + part.pause_s for part in self.parts)
        self.cost = cost.Cost(cost.chars(text), count, spoken, silence)

    def cut(self) -> list[str]:
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
            if self.reading.captions:
                texts = [
                    t
                    for s in captions.sentences(span.text)
                    for t in self.split(replace(span, text=s), voice)
                ]
            else:
                texts = self.split(span, voice, first=not chunks)
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
        if self.reading.voices is None:
            raise InvalidRequest("this route cannot change voices inside the text", param="input")
        return self.reading.voices(name)

    def split(self, span: Span, voice: Voice, first: bool = False) -> list[str]:
        r = self.request
        if r.chunk_mode == "none" or r.duration is not None:
            return [span.text]
        if first and self.reading.first_short:
            head, rest = chunking.first_chunk(span.text)
            if rest:
                return [head, *self.split(replace(span, text=rest), voice)]
        words = self.settings.text_chunk_words
        if words and r.chunk_s is None and r.whole_s is None:  # by words, unless seconds given
            return chunking.split_words(span.text, words)
        prompt = voice.prompt
        speed = cost.span_speed(r, span.speed)
        total_s = chunking.estimate_s(
            span.text,
            prompt["ref_text"] if prompt else None,
            prompt["tokens"]["shape"][1] if prompt else None,
            speed,
        )
        lead_s = self.reading.first_chunk_s
        if first and lead_s:
            head, rest = chunking.lead_chunk(span.text, lead_s, total_s)
            if rest:
                return [head, *self.split(replace(span, text=rest), voice)]
        # Chunks are measured at the request's speed, so a fast reader gets fewer, longer chunks.
        return chunking.split_text(span.text, r.chunk_s or self.reading.chunk_s, total_s, r.whole_s)

    def item(
        self,
        index: int,
        prompt: VoicePayload | None = None,
        return_tokens: bool = False,
        attempt: int = 1,
    ) -> Item:
        """Chunk `index` as the item a sidecar generates: attempt n of it, prompted or not."""
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

    def leaders(self) -> dict[int, list[int]]:
        """Concurrent mode: the first chunk of each voice, with the later chunks in its voice."""
        followers: dict[int, list[int]] = {}
        for i in range(len(self.chunks)):
            leader = next((j for j in followers if self.related(j, i)), None)
            if leader is None:
                followers[i] = []
            else:
                followers[leader].append(i)
        return followers

    def follow(self, result: Result, index: int) -> VoicePayload | None:
        """Chunk `index`'s result as the prompt of a later chunk, within the continuity limits."""
        s = self.settings
        return continuity.continuity(
            result, self.chunks[index], s.max_continuity_audio_tokens, s.max_continuity_text_words
        )
