"""Requests to prompts: each request normalised once, then split into chunks, each chunk one
`Prompt` for the network.

A short request is one chunk. A long one (estimated above `audio_chunk_threshold`) is split at
punctuation; with a voice prompt every chunk clones it, without one chunk 0 runs bare and
becomes the voice prompt of the request's later chunks, so the voice stays the same (those
chunks can start only once chunk 0 is done).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
import tokenizers
import torch

from sidecar.runtime.generate import Prompt
from sidecar.runtime.request import GenerationRequest
from sidecar.shared.duration import FRAME_RATE, target_tokens, target_tokens_for_duration
from sidecar.shared.errors import InvalidInput
from sidecar.shared.languages import resolve_language
from sidecar.shared.text import (
    CHUNK_SEED_STRIDE,
    chunk_char_len,
    chunk_text,
    combine_text,
    contains_cjk,
    tokenize_text,
)
from sidecar.shared.voice_design import resolve_instruct

MIN_CHUNK_CHARS = 3


@dataclass
class PreparedRequest:
    """A request after normalisation: what every later stage needs, computed once."""

    request: GenerationRequest
    text: str
    language: str | None
    instruct: str | None
    ref_text: str | None
    ref_tokens: torch.Tensor | None  # [C, Tr]
    ref_rms: float | None
    target_len: int
    speed: float | None  # the speed chunks are estimated with (None: 1.0)
    seed: int

    @property
    def is_long(self) -> bool:
        return self.target_len > int(self.request.audio_chunk_threshold * FRAME_RATE)

    def waits_for_chunk0(self, chunk: int) -> bool:
        """Whether this chunk clones the request's own chunk 0 (a long request without a voice)."""
        return chunk > 0 and self.ref_tokens is None


class Prompter:
    """Makes prompts with one checkpoint's tokenizer and codebook layout."""

    def __init__(
        self, tokenizer: tokenizers.Tokenizer, num_codebooks: int, mask_id: int, frame_rate: int
    ) -> None:
        self.tokenizer = tokenizer
        self.num_codebooks = num_codebooks
        self.mask_id = mask_id
        self.frame_rate = frame_rate

    def prepare(self, req: GenerationRequest) -> PreparedRequest:
        """Check and normalise one request (InvalidInput names what is wrong)."""
        if not req.text or not req.text.strip():
            raise InvalidInput("input text is empty")
        if req.num_step < 1:
            raise InvalidInput(f"num_step must be at least 1, got {req.num_step}")
        if req.speed is not None and not req.speed > 0:
            raise InvalidInput(f"speed must be positive, got {req.speed}")
        if req.duration is not None and not req.duration > 0:
            raise InvalidInput(f"duration must be positive, got {req.duration}")
        instruct = (
            resolve_instruct(req.instruct, use_zh=contains_cjk(req.text)) if req.instruct else None
        )
        voice = req.voice
        ref_text = voice.ref_text if voice is not None else None
        ref_tokens = None
        if voice is not None:
            ref_tokens = torch.as_tensor(np.asarray(voice.tokens), dtype=torch.long)
            if ref_tokens.ndim != 2 or ref_tokens.shape[0] != self.num_codebooks:
                raise InvalidInput(
                    f"voice prompt tokens must be [{self.num_codebooks}, T], got {list(ref_tokens.shape)}"
                )
            if int(ref_tokens.min()) < 0 or int(ref_tokens.max()) >= self.mask_id:
                raise InvalidInput("voice prompt tokens hold values outside the codec's codebook")
        num_ref = int(ref_tokens.shape[1]) if ref_tokens is not None else None
        speed: float | None
        if req.duration is not None:
            target_len, speed = target_tokens_for_duration(
                req.text, req.duration, ref_text, num_ref
            )
        else:
            target_len = target_tokens(req.text, ref_text, num_ref, speed=req.speed or 1.0)
            speed = req.speed
        seed = req.seed if req.seed is not None else secrets.randbits(63)
        return PreparedRequest(
            req,
            req.text,
            resolve_language(req.language),
            instruct,
            ref_text,
            ref_tokens,
            voice.ref_rms if voice is not None else None,
            target_len,
            speed,
            seed,
        )

    def prompt(
        self,
        item: PreparedRequest,
        text: str,
        target_len: int,
        ref_text: str | None,
        ref_tokens: torch.Tensor | None,
        chunk: int = 0,
    ) -> Prompt:
        """[style | text | reference audio | MASK target] for one item (or one chunk of it)."""
        req = item.request
        style = "<|denoise|>" if req.denoise and ref_tokens is not None else ""
        style += f"<|lang_start|>{item.language or 'None'}<|lang_end|>"
        style += f"<|instruct_start|>{item.instruct or 'None'}<|instruct_end|>"
        text_ids = self.tokenizer.encode(style).ids + tokenize_text(
            self.tokenizer, f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>"
        )
        parts = [torch.tensor(text_ids, dtype=torch.long).repeat(self.num_codebooks, 1)]
        if ref_tokens is not None:
            parts.append(ref_tokens)
        parts.append(torch.full((self.num_codebooks, target_len), self.mask_id, dtype=torch.long))
        return Prompt(
            input_ids=torch.cat(parts, dim=1),
            audio_start=len(text_ids),
            target_len=target_len,
            num_step=req.num_step,
            guidance_scale=req.guidance_scale,
            t_shift=req.t_shift,
            layer_penalty_factor=req.layer_penalty_factor,
            position_temperature=req.position_temperature,
            class_temperature=req.class_temperature,
            seed=(item.seed + chunk * CHUNK_SEED_STRIDE) % (1 << 63),  # fresh noise for every chunk
        )

    def chunk_texts(self, item: PreparedRequest) -> list[str]:
        """The item's text as chunks: itself when short, split at punctuation when long."""
        if not item.is_long:
            return [item.text]
        chunk_len = chunk_char_len(
            item.target_len, item.text, item.request.audio_chunk_duration, self.frame_rate
        )
        return chunk_text(item.text, chunk_len, MIN_CHUNK_CHARS)

    def chunk_prompt(
        self, item: PreparedRequest, texts: list[str], ci: int, chunk0: torch.Tensor | None
    ) -> Prompt:
        """The prompt of chunk `ci` of an item whose chunk texts are `texts` (`chunk0`: the
        item's chunk 0 tokens, for a later chunk of a long item without a voice prompt)."""
        if not item.is_long:
            return self.prompt(item, item.text, item.target_len, item.ref_text, item.ref_tokens)
        if item.ref_tokens is not None:
            ref_text, ref_tokens = item.ref_text, item.ref_tokens
        elif ci == 0:
            ref_text, ref_tokens = None, None
        else:
            assert chunk0 is not None, (
                "a later chunk of an item without a voice prompt needs its chunk 0"
            )
            ref_text, ref_tokens = texts[0], chunk0.cpu()
        num_ref = int(ref_tokens.shape[1]) if ref_tokens is not None else None
        target_len = target_tokens(texts[ci], ref_text, num_ref, speed=item.speed or 1.0)
        return self.prompt(item, texts[ci], target_len, ref_text, ref_tokens, chunk=ci)
