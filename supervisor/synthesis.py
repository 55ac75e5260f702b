"""One speech request through the scheduler: chunks in, audio pieces out, in order.

The text is split by `chunking`; `chunk_mode` decides how the chunks' tasks relate:

    none        one task with the whole input; the runtime chunks it the reference way
    concurrent  chunk 0 first, asking for its codec tokens; then every other chunk at once,
                each prompted with chunk 0 (its tokens and text) so the voice stays the same
    sequential  each chunk prompted with the one before it, one after another

With a voice prompt (a saved or cloned voice) every chunk is prompted with that voice, so
`concurrent` submits all chunks at once and `sequential` runs them one at a time. A `duration`
applies to the whole input, so such a request is always one task.

The whole request's estimated audio is reserved when it is admitted, so a request is refused
(429) at once or not at all. The next chunk is submitted before the current piece is handed
on, so encoding and sending one piece overlaps the generation of the next. `close` cancels
whatever is still queued or running (the client went away, or a chunk failed) and gives back
the unused reservation.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from sidecar.duration import FRAME_RATE
from sidecar.protocol import Item, TokenArray, VoicePayload
from sidecar.text import CHUNK_SEED_STRIDE
from supervisor import chunking
from supervisor.scheduler import Priority, Scheduler, estimate
from supervisor.schemas import MAX_SEED, SpeechRequest

BYTES_PER_TOKEN = 4  # input_tokens in SSE usage is an estimate: about four bytes of UTF-8 each


@dataclass(frozen=True)
class Voice:
    """What a request speaks with."""

    instruct: str | None = None  # voice design
    prompt: VoicePayload | None = None  # a saved or cloned voice
    seed: int | None = None  # used when the request names no seed (OpenAI voice names)


def continuity(
    result: dict[str, Any], text: str, max_frames: int = 0, max_words: int = 0
) -> VoicePayload | None:
    """A finished chunk as the voice prompt of later chunks (None if the runtime split it itself),
    cut to its last `max_frames` codec frames and its last `max_words` words (0: all)."""
    tokens = result.get("tokens") or []
    if len(tokens) != 1:
        return None
    return {
        "tokens": last_frames(tokens[0], max_frames),
        "ref_text": last_words(text, max_words),
        "ref_rms": None,
    }


def last_frames(tokens: TokenArray, count: int) -> TokenArray:
    """The last `count` frames of [codebooks, frames] int16 tokens (row-major), or all of them."""
    codebooks, frames = tokens["shape"]
    if count <= 0 or frames <= count:
        return tokens
    data = memoryview(tokens["data"])
    rows = [
        data[(c * frames + frames - count) * 2 : (c + 1) * frames * 2] for c in range(codebooks)
    ]
    return {"shape": [codebooks, count], "data": b"".join(rows)}


def last_words(text: str, count: int) -> str:
    """The last `count` words of a text (a character of a script without spaces is a word), or all of it."""
    if count <= 0:
        return text
    pieces = chunking.atoms(text)
    words = [i for i, atom in enumerate(pieces) if chunking.is_word(atom)]
    if len(words) <= count:
        return text
    return "".join(atom.text for atom in pieces[words[-count] :]).strip()


class Synthesis:
    def __init__(self, scheduler: Scheduler, request: SpeechRequest, voice: Voice, chunk_s: float,
                 priority: Priority = Priority.INTERACTIVE) -> None:  # fmt: skip
        self.scheduler = scheduler
        self.request = request
        self.voice = voice
        self.priority = priority
        given = request.seed if request.seed is not None else voice.seed
        self.seed = given if given is not None else secrets.randbits(63)
        self.id = uuid.uuid4().hex
        self.chunks = self.plan(chunk_s)
        self.mode = "none" if len(self.chunks) == 1 else request.chunk_mode
        self.futures: list[asyncio.Future[Any]] = []
        self.audio_s = 0.0
        self.sample_rate = 0
        self.reservation = scheduler.reserve(
            sum(estimate(self.item(i))[0] for i in range(len(self.chunks)))
        )

    def plan(self, chunk_s: float) -> list[str]:
        r = self.request
        if r.chunk_mode == "none" or r.duration is not None:
            return [r.input]
        words = self.scheduler.settings.text_chunk_words
        if (
            words and r.chunk_s is None and r.whole_s is None
        ):  # by words, unless the request gave seconds
            return chunking.split_words(r.input, words)
        prompt = self.voice.prompt
        total_s = chunking.estimate_s(r.input, prompt["ref_text"] if prompt else None,
                                      prompt["tokens"]["shape"][1] if prompt else None, r.speed)  # fmt: skip
        # Chunks are measured at the request's speed, so a fast reader gets fewer, longer chunks.
        return chunking.split_text(r.input, r.chunk_s or chunk_s, total_s, r.whole_s)

    def item(
        self, index: int, prompt: VoicePayload | None = None, return_tokens: bool = False
    ) -> Item:
        r = self.request
        item: Item = {
            "id": f"{self.id}-{index}",
            "text": self.chunks[index],
            "num_step": r.num_step,
            "seed": (self.seed + index * CHUNK_SEED_STRIDE) % (MAX_SEED + 1),
        }
        voice = self.voice.prompt or prompt
        optional = {"language": r.language, "instruct": self.voice.instruct, "voice": voice,
                    "speed": r.speed if r.speed != 1.0 else None, "duration": r.duration,
                    "guidance_scale": r.guidance_scale, "denoise": r.denoise}  # fmt: skip
        item.update({k: v for k, v in optional.items() if v is not None})  # type: ignore[typeddict-item]
        if return_tokens:
            item["return_tokens"] = True
        return item

    def follow(self, result: dict[str, Any], index: int) -> VoicePayload | None:
        """Chunk `index`'s result as the prompt of a later chunk, within the continuity limits."""
        s = self.scheduler.settings
        return continuity(
            result, self.chunks[index], s.max_continuity_audio_tokens, s.max_continuity_text_words
        )

    def submit(
        self, index: int, prompt: VoicePayload | None = None, return_tokens: bool = False
    ) -> asyncio.Future[Any]:
        [future] = self.scheduler.submit(
            [self.item(index, prompt, return_tokens)], self.priority, self.reservation
        )
        self.futures.append(future)
        return future

    async def pieces(self) -> AsyncGenerator[dict[str, Any], None]:
        """The `result` of each chunk, in order; raises the first chunk's error."""
        count = len(self.chunks)
        own_prompt = self.voice.prompt is None  # chunks prompt each other
        try:
            if self.mode == "sequential":
                pending = self.submit(0, return_tokens=own_prompt and count > 1)
                for i in range(count):
                    result = await pending
                    if i + 1 < count:
                        prompt = self.follow(result, i) if own_prompt else None
                        pending = self.submit(
                            i + 1, prompt, return_tokens=own_prompt and i + 2 < count
                        )
                    yield self.account(result)
            elif own_prompt and count > 1:
                first = await self.submit(0, return_tokens=True)
                prompt = self.follow(first, 0)  # every later chunk follows the first
                rest = [self.submit(i, prompt) for i in range(1, count)]
                yield self.account(first)
                for future in rest:
                    yield self.account(await future)
            else:
                futures = [self.submit(i) for i in range(count)]
                for future in futures:
                    yield self.account(await future)
        finally:
            self.close()

    def account(self, result: dict[str, Any]) -> dict[str, Any]:
        self.sample_rate = self.sample_rate or result["sample_rate"]
        self.audio_s += len(result["audio"]) / 2 / max(1, result["sample_rate"])
        return result

    def close(self) -> None:
        """Cancel what has not finished and give back the reservation. Idempotent."""
        for future in self.futures:
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved, so asyncio does not log it as never seen
        self.reservation.release()

    def usage(self) -> dict[str, int]:
        """OpenAI's usage object: text tokens (estimated) in, codec frames out."""
        input_tokens = max(1, -(-len(self.request.input.encode()) // BYTES_PER_TOKEN))
        output_tokens = round(self.audio_s * FRAME_RATE)
        return {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
