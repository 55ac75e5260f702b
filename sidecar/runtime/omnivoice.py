"""The OmniVoice runtime as a library: load a checkpoint, generate speech, encode voices.

    model = OmniVoice.load("path/or/hf-id", device="cuda:0", dtype="bfloat16")
    [result] = model.generate([GenerationRequest(text="Hello.")])
    prompt = model.encode_voice(waveform, sample_rate, ref_text="...")

`generate` follows the reference `generate()`: requests are normalised (language, instruct,
target length), long ones (estimated above `audio_chunk_threshold`) are split at punctuation,
all items and chunks run in at most two batches (the later chunks of a long item without a voice
prompt clone its first chunk, so they wait for the second), then everything is decoded and
post-processed. Unlike the reference, every request carries its own settings and its own random
numbers (a hash of its seed), and requests with and without a voice prompt may be long together.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tokenizers
import torch

from sidecar.audio import processing as audio_ops
from sidecar.runtime import compile_cache
from sidecar.runtime.codec import Codec, load_codec
from sidecar.runtime.generate import Prompt, generate_tokens
from sidecar.runtime.loader import (
    DTYPES,
    check_layout,
    load_model,
    load_tokenizer,
    resolve_checkpoint,
)
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import DEFAULT_OPTIONS, RuntimeOptions
from sidecar.runtime.request import GenerationRequest, GenerationResult, VoicePrompt
from sidecar.runtime.runner import ModelRunner
from sidecar.shared.duration import FRAME_RATE, target_tokens, target_tokens_for_duration
from sidecar.shared.errors import InvalidAudio, InvalidInput
from sidecar.shared.languages import resolve_language
from sidecar.shared.text import (
    CHUNK_SEED_STRIDE,
    add_punctuation,
    chunk_char_len,
    chunk_text,
    combine_text,
    contains_cjk,
    tokenize_text,
)
from sidecar.shared.voice_design import resolve_instruct

log = logging.getLogger(__name__)

# on_progress(stage) is called during loading; on_step(step, num_steps) every denoising step.
ProgressCallback = Callable[[str], None]
StepCallback = Callable[[int, int], None]

MIN_CHUNK_CHARS = 3
CROSS_FADE_S = 0.3
DECODE_STREAM_PRIORITY = -1  # CUDA: lower is sooner; the default stream is 0
OUTPUT_SILENCE_MS = (500, 100, 100)  # longest kept silence inside, at the start, at the end


@dataclass
class _Item:
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


@dataclass
class Denoised:
    """One request's generated tokens (one [C, T] tensor per chunk), waiting to be decoded."""

    item: _Item
    tokens: list[torch.Tensor]
    ready: torch.cuda.Event | None = None  # on a GPU: recorded after the batch's last step


def _ready_events(denoised: Sequence[Denoised]) -> list[torch.cuda.Event]:
    """The distinct events recorded after the steps that made these tokens (none on the CPU)."""
    return list({id(d.ready): d.ready for d in denoised if d.ready is not None}.values())


class OmniVoice:
    """A loaded OmniVoice model (backbone, text tokenizer, codec) on one device."""

    def __init__(
        self,
        model: OmniVoiceModel,
        tokenizer: tokenizers.Tokenizer,
        codec: Codec,
        device: torch.device,
        runner: ModelRunner | None = None,
    ) -> None:
        self.model = model
        self.runner = runner or ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=False))
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = device
        self.num_codebooks = model.cfg.num_codebooks
        self.mask_id = model.cfg.audio_mask_id
        # On a GPU the codec decodes on a stream of its own. On the denoising stream its kernels
        # would queue behind the next batch's steps, which the sidecar enqueues meanwhile, so a
        # batch's audio came out only when the next batch was denoised (docs/PERFORMANCE.md).
        # The stream has the higher priority: under load the denoising steps keep every SM busy,
        # and at equal priority the codec's kernels waited for gaps between them, so decoding a
        # batch outlasted denoising the next and the sidecar went without work.
        self.decode_stream = (
            torch.cuda.Stream(device, priority=DECODE_STREAM_PRIORITY)
            if device.type == "cuda"
            else None
        )

    @property
    def sample_rate(self) -> int:
        return int(self.codec.sample_rate)

    @property
    def frame_rate(self) -> int:
        return int(self.codec.frame_rate)

    def stats(self) -> dict[str, float | int]:
        """Cumulative forward-pass figures: passes, tokens (real and padded), useful FLOPs,
        CUDA-graph hits and misses (their device seconds: `device_times`)."""
        return self.runner.stats.counts()

    def device_times(self) -> dict[str, float]:
        """Device seconds of the batches the device has finished since the last call (their
        forward passes, the batches, the gaps before them), read without waiting for it."""
        return self.runner.settle()

    @classmethod
    def load(
        cls,
        source: str,
        device: str = "cpu",
        dtype: str = "float32",
        on_progress: ProgressCallback | None = None,
        options: RuntimeOptions = DEFAULT_OPTIONS,
    ) -> OmniVoice:
        """Load a checkpoint. `options` says how the network runs (`RuntimeOptions`: CUDA graphs
        captured here, torch.compile, the Triton kernels; its defaults are the production path),
        resolved for the device and dtype and handed whole to the `ModelRunner`."""
        if dtype not in DTYPES:
            raise InvalidInput(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        report = on_progress or (lambda stage: None)
        report("resolve")
        root = resolve_checkpoint(source)
        check_layout(root)
        report("tokenizer")
        tokenizer = load_tokenizer(root)
        report("model")
        torch_device = torch.device(device)
        if dtype == "float32":
            # float32 means float32: TF32 matmuls and convolutions would change the tokens.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        model = load_model(root, device, DTYPES[dtype])
        # Graphs need the FlashAttention varlen path (half precision); float32 on a GPU runs
        # attention per segment, which reads the segment table on the host every pass.
        options = options.resolved(torch_device.type == "cuda", dtype in ("bfloat16", "float16"))
        report("codec")
        codec = load_codec(root / "audio_tokenizer", device=torch_device, dtype=DTYPES[dtype])
        runner = ModelRunner(model, options)

        def compile_and_capture() -> None:  # run again on an empty cache if the cache breaks it
            if options.compile:
                codec.fuse_activations()
            if options.cuda_graphs:
                report("cuda_graphs")
                runner.capture()

        compile_cache.retrying(compile_and_capture, reset=torch.compiler.reset)
        log.info("loaded %s on %s (%s)", root, device, dtype)
        return cls(model, tokenizer, codec, torch_device, runner)

    # ------------------------------------------------------------------ voices

    def encode_voice(
        self, audio: np.ndarray, sample_rate: int, ref_text: str, preprocess: bool = True
    ) -> VoicePrompt:
        """Turn a reference clip and its transcript into a voice clone prompt."""
        if not ref_text or not ref_text.strip():
            raise InvalidInput(
                "a transcript of the reference audio is required (ref_text is empty)"
            )
        wav, ref_rms = audio_ops.prepare_reference(
            audio, sample_rate, preprocess=preprocess, has_ref_text=True
        )
        if wav.size == 0:
            raise InvalidAudio("reference audio is shorter than one codec frame (40 ms)")
        with torch.inference_mode():
            tokens = self.codec.encode(torch.from_numpy(wav).to(self.device).view(1, 1, -1))[0]
        text = add_punctuation(ref_text) if preprocess else ref_text
        return VoicePrompt(
            tokens=tokens.cpu().numpy().astype(np.int64), ref_text=text, ref_rms=ref_rms
        )

    # ------------------------------------------------------------------ generation

    def generate(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> list[GenerationResult]:
        """Generate every request as one batch; results come back in request order."""
        return self.decode(self.denoise(requests, on_step))

    def denoise(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> list[Denoised]:
        """The denoising half of `generate`: every request's tokens, not yet decoded.

        A short item is one chunk; a long one is split into several (`_chunk_texts`). Everything
        runs in at most two `generate_tokens` rounds: first every chunk that needs no generated
        tokens, then the later chunks of long items without a voice prompt, which use their own
        chunk 0 as one (`_chunk_prompt`). `on_step` counts each round's steps from 1 again.
        """
        items = [self._normalise(r) for r in requests]
        texts = [self._chunk_texts(it) for it in items]
        jobs = [(i, ci) for i, chunks in enumerate(texts) for ci in range(len(chunks))]
        first = [(i, ci) for i, ci in jobs if ci == 0 or items[i].ref_tokens is not None]
        second = [(i, ci) for i, ci in jobs if ci > 0 and items[i].ref_tokens is None]
        done: dict[tuple[int, int], torch.Tensor] = {}
        for round_jobs in (first, second):
            if round_jobs:
                prompts = [
                    self._chunk_prompt(items[i], texts[i], ci, done.get((i, 0)))
                    for i, ci in round_jobs
                ]
                done.update(
                    zip(round_jobs, generate_tokens(self.model, prompts, on_step, self.runner))
                )
        ready = None
        if self.decode_stream is not None:
            ready = torch.cuda.Event()
            ready.record()  # on the denoising stream, after the last step
        return [
            Denoised(item, [done[i, ci] for ci in range(len(chunks))], ready)
            for i, (item, chunks) in enumerate(zip(items, texts))
        ]

    def wait_denoised(self, denoised: Sequence[Denoised]) -> None:
        """Return once the device has run the steps that made these tokens (at once on the CPU,
        where `denoise` ran them). Blocks only the calling thread: the sidecar's watcher."""
        for event in _ready_events(denoised):
            event.synchronize()

    def decode(
        self, denoised: Sequence[Denoised], timings: dict[str, float] | None = None
    ) -> list[GenerationResult]:
        """The other half: decode every chunk in one codec batch, then post-process each item.

        The sidecar runs it in a thread of its own, while the next batch denoises; on a GPU its
        kernels run on `decode_stream`, after the denoising steps that made the tokens. Adds the
        host's seconds for each part to `timings`: the codec until its audio is on the host
        (`codec_s`), then the post-processing (`postprocess_s`)."""
        started = time.monotonic()
        flat = [t.to(self.device) for d in denoised for t in d.tokens]
        stream = self.decode_stream
        if stream is None:
            pieces, kept = self._to_host(flat, denoised)
        else:
            for event in _ready_events(denoised):
                stream.wait_event(event)
            for t in flat:  # made on the denoising stream: not reused before the decode is done
                t.record_stream(stream)
            with torch.cuda.stream(stream):
                pieces, kept = self._to_host(flat, denoised)
        decoded = time.monotonic()
        chunks = iter(pieces)
        results = [
            self._finish(d.item, tokens, [next(chunks) for _ in d.tokens])
            for d, tokens in zip(denoised, kept)
        ]
        if timings is not None:
            timings["codec_s"] = timings.get("codec_s", 0.0) + decoded - started
            timings["postprocess_s"] = (
                timings.get("postprocess_s", 0.0) + time.monotonic() - decoded
            )
        return results

    def _to_host(
        self, flat: list[torch.Tensor], denoised: Sequence[Denoised]
    ) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
        """Every chunk's audio, and each item's tokens where it asked for them, on the host.
        On a GPU the caller runs this on the decode stream: a copy made on the denoising stream
        would wait for every step queued there since, the next batches' too."""
        audio = [a.float().cpu().numpy() for a in self.codec.decode_many(flat)]
        kept = [
            [t.cpu().numpy().astype(np.int64) for t in d.tokens]
            if d.item.request.return_tokens
            else []
            for d in denoised
        ]
        return audio, kept

    def _normalise(self, req: GenerationRequest) -> _Item:
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
        return _Item(
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

    def _prompt(
        self,
        item: _Item,
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

    def _chunk_texts(self, item: _Item) -> list[str]:
        """The item's text as chunks: itself when short, split at punctuation when long."""
        if not item.is_long:
            return [item.text]
        chunk_len = chunk_char_len(
            item.target_len, item.text, item.request.audio_chunk_duration, self.frame_rate
        )
        return chunk_text(item.text, chunk_len, MIN_CHUNK_CHARS)

    def _chunk_prompt(
        self, item: _Item, texts: list[str], ci: int, chunk0: torch.Tensor | None
    ) -> Prompt:
        """The prompt of chunk `ci` of an item whose chunk texts are `texts`.

        A short item is one prompt with its own target length. A long item's chunks are
        estimated one by one: with a voice prompt every chunk uses it; without one, chunk 0 runs
        bare and becomes the voice prompt (tokens `chunk0` and raw text) of the item's later
        chunks, so the voice stays the same.
        """
        if not item.is_long:
            return self._prompt(item, item.text, item.target_len, item.ref_text, item.ref_tokens)
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
        return self._prompt(item, texts[ci], target_len, ref_text, ref_tokens, chunk=ci)

    def _finish(
        self, item: _Item, tokens: list[np.ndarray], pieces: list[np.ndarray]
    ) -> GenerationResult:
        """Join decoded chunks and post-process as the reference does; `tokens`: those to return."""
        sr = self.sample_rate
        wav = (
            pieces[0] if not item.is_long else audio_ops.cross_fade_chunks(pieces, sr, CROSS_FADE_S)
        )
        if item.request.postprocess_output:
            wav = audio_ops.remove_silence(wav, sr, *OUTPUT_SILENCE_MS)
        wav = audio_ops.normalize_output_loudness(wav, item.ref_rms)
        wav = audio_ops.fade_and_pad(wav, sr)
        return GenerationResult(
            audio=wav.astype(np.float32, copy=False), sample_rate=sr, tokens=tokens, seed=item.seed
        )
