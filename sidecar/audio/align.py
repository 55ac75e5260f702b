"""Word timing for a known text (the `align` frame), on the ASR sidecar's Whisper.

Forced alignment by teacher forcing: the decoder is fed the text that was read (each word's
tokens after Whisper's prompt: start, language, transcribe, no timestamps) in one forward pass,
and its cross-attention says where in the audio each token looks. The heads used are the
checkpoint's `alignment_heads` (a published Whisper's generation config names the heads whose
attention follows the speech), else every head of the decoder's later half. Their weights, over
the audio's own encoder frames (20 ms each), are standardised per frame across tokens, smoothed
along time (a median of 7 frames) and averaged; a monotonic path through them (dynamic time
warping in which every token, the last prompt token and the end token each hold at least one
frame) gives each word the frames from its first token's entry to the next word's, so words
are contiguous, in order and never empty. The method follows openai-whisper's word timestamps
(its `timing.py`); the code is this project's own.

Fallbacks, so that the answer always holds every word once, in order, inside the audio:
audio longer than one 30 s window, with fewer frames than tokens, or a text longer than the
decoder's positions (448 tokens on a published Whisper), is split across its words in
proportion to their characters. On the tiny random checkpoint of CI the times are
meaningless but keep these properties, which is what the tests check.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from sidecar.audio.resample import resample
from sidecar.shared.protocol import WordTiming as Word

WINDOW_S = 30
ENCODER_STRIDE = 2  # Whisper's encoder halves the mel frames: 10 ms hops, 20 ms frames
MEDIAN_WIDTH = 7


def words_of(text: str) -> list[str]:
    return text.split()


def proportional(words: list[str], duration_s: float) -> list[Word]:
    """Each word a share of the audio in proportion to its characters (the fallback)."""
    weights = [len(w) + 1 for w in words]
    total, edge, out = sum(weights), 0.0, []
    for word, weight in zip(words, weights, strict=True):
        start, edge = edge, edge + duration_s * weight / total
        out.append(Word(word=word, start=start, end=edge))
    return out


def monotonic_path(cost: np.ndarray) -> np.ndarray:
    """For a (rows, frames) cost with frames >= rows, the frame at which each row is entered on
    the cheapest path from (0, 0) to (rows-1, frames-1) that moves one frame per step and one
    row at most: every row holds at least one frame."""
    rows, frames = cost.shape
    total = np.full((rows, frames), np.inf)
    came_down = np.zeros((rows, frames), dtype=bool)
    total[0, :] = np.cumsum(cost[0, :])
    for r in range(1, rows):
        for f in range(r, frames):
            stay, down = total[r, f - 1], total[r - 1, f - 1]
            came_down[r, f] = down <= stay
            total[r, f] = cost[r, f] + min(stay, down)
    entries = np.zeros(rows, dtype=np.int64)
    r = rows - 1
    for f in range(frames - 1, 0, -1):
        if r == 0:
            break
        if came_down[r, f]:
            entries[r] = f
            r -= 1
    return entries


def median_filter(x: torch.Tensor, width: int) -> torch.Tensor:
    """A median over `width` frames along the last axis (edges padded by reflection)."""
    if x.shape[-1] <= width // 2:
        return x
    pad = width // 2
    padded = torch.nn.functional.pad(x, (pad, pad), mode="reflect")  # (heads, tokens, frames)
    return padded.unfold(-1, width, 1).median(dim=-1).values


class Aligner:
    """Word timing on a loaded Whisper (`model`, `processor` of sidecar.audio.asr.Transcriber)."""

    def __init__(self, model: Any, processor: Any, device: str, dtype: torch.dtype) -> None:
        self.model, self.processor, self.device, self.dtype = model, processor, device, dtype
        self.generation = model.generation_config
        extractor = processor.feature_extractor
        self.sample_rate = int(extractor.sampling_rate)
        self.frame_s = extractor.hop_length * ENCODER_STRIDE / self.sample_rate
        config = model.config
        heads = getattr(self.generation, "alignment_heads", None)
        if heads:
            self.heads = [(int(layer), int(head)) for layer, head in heads]
        else:
            layers, per_layer = config.decoder_layers, config.decoder_attention_heads
            self.heads = [(la, h) for la in range(layers // 2, layers) for h in range(per_layer)]

    def prompt(self, language: str | None) -> list[int]:
        g = self.generation
        languages = dict(getattr(g, "lang_to_id", None) or {})
        ids = [int(g.decoder_start_token_id)]
        if language and f"<|{language}|>" in languages:
            ids.append(int(languages[f"<|{language}|>"]))
        tasks = dict(getattr(g, "task_to_id", None) or {})
        if "transcribe" in tasks:
            ids.append(int(tasks["transcribe"]))
        if getattr(g, "no_timestamps_token_id", None) is not None:
            ids.append(int(g.no_timestamps_token_id))
        return ids

    def tokens(self, words: list[str]) -> list[list[int]]:
        """Each word's tokens, spelled as Whisper writes a word after a space."""
        tokenizer = self.processor.tokenizer
        return [tokenizer.encode(" " + w, add_special_tokens=False) or [0] for w in words]

    def align(
        self, audio: np.ndarray, sample_rate: int, text: str, language: str | None
    ) -> list[Word]:
        """Every word of `text` once, in order, with its start and end (seconds) inside the audio."""
        words = words_of(text)
        if sample_rate != self.sample_rate:
            audio = resample(audio, sample_rate, self.sample_rate)
        duration = len(audio) / self.sample_rate
        if not words:
            return []
        per_word = self.tokens(words)
        prompt = self.prompt(language)
        count = sum(len(t) for t in per_word)
        frames = min(math.ceil(duration / self.frame_s), round(WINDOW_S / self.frame_s))
        fits = len(prompt) + count + 1 <= self.model.config.max_target_positions
        if duration > WINDOW_S or frames < count + 2 or not fits:
            return proportional(words, duration)
        weights = self.attention(audio, prompt, [i for t in per_word for i in t], frames)
        rows = weights[len(prompt) - 1 :]  # the last prompt token, the words' tokens, the end
        entries = monotonic_path(-rows.numpy().astype(np.float64))
        starts, k = [], 1
        for tokens in per_word:
            starts.append(int(entries[k]))
            k += len(tokens)
        ends = [*starts[1:], int(entries[k])]
        return [
            Word(word=w, start=min(s * self.frame_s, duration), end=min(e * self.frame_s, duration))
            for w, s, e in zip(words, starts, ends, strict=True)
        ]

    def attention(
        self, audio: np.ndarray, prompt: list[int], text: list[int], frames: int
    ) -> torch.Tensor:
        """The chosen heads' cross-attention, (prompt + text + end tokens, frames), normalised."""
        features = self.processor(audio, sampling_rate=self.sample_rate, return_tensors="pt")
        inputs = features.input_features.to(self.device, self.dtype)
        end = int(self.generation.eos_token_id)
        ids = torch.tensor([prompt + text + [end]], device=self.device)
        fast = self.model.config._attn_implementation
        self.model.set_attn_implementation("eager")  # only eager attention returns its weights
        try:
            with torch.inference_mode():
                out = self.model(
                    input_features=inputs, decoder_input_ids=ids, output_attentions=True
                )
        finally:
            self.model.set_attn_implementation(fast)
        cross = out.cross_attentions  # per layer: (1, heads, tokens, encoder frames)
        weights = torch.stack([cross[la][0, h, :, :frames] for la, h in self.heads]).float().cpu()
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
        std, mean = torch.std_mean(weights, dim=-2, keepdim=True)
        weights = (weights - mean) / std.clamp_min(1e-6)
        return median_filter(weights, MEDIAN_WIDTH).mean(0)
