"""The OmniVoice runtime as a library: load a checkpoint, generate speech, encode voices.

    model = OmniVoice.load("path/or/hf-id", device="cuda:0", dtype="bfloat16")
    [result] = model.generate([GenerationRequest(text="Hello.")])
    prompt = model.encode_voice(waveform, sample_rate, ref_text="...")

`generate` follows the reference `generate()`: requests are normalised (language, instruct,
target length), short ones run as one batch, long ones (estimated above
`audio_chunk_threshold`) are split at punctuation and run chunk by chunk, then everything is
decoded and post-processed. Unlike the reference, every request carries its own settings and
its own random numbers (a hash of its seed), and requests with and without a voice prompt may be long together.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sidecar import audio as audio_ops
from sidecar.codec import Codec, load_codec
from sidecar.duration import target_tokens, target_tokens_for_duration
from sidecar.errors import InvalidAudio, InvalidInput
from sidecar.generate import Prompt, generate_tokens
from sidecar.languages import resolve_language
from sidecar.loader import DTYPES, check_layout, load_model, load_tokenizer, resolve_checkpoint
from sidecar.model import OmniVoiceModel
from sidecar.runner import ModelRunner
from sidecar.request import GenerationRequest, GenerationResult, VoicePrompt
from sidecar.text import add_punctuation, chunk_char_len, chunk_text, combine_text, contains_cjk, tokenize_text
from sidecar.voice_design import resolve_instruct

log = logging.getLogger(__name__)

# on_progress(stage) is called during loading; on_step(step, num_steps) every denoising step.
ProgressCallback = Callable[[str], None]
StepCallback = Callable[[int, int], None]

MIN_CHUNK_CHARS = 3
CROSS_FADE_S = 0.3
CHUNK_SEED_STRIDE = 0x9E3779B97F4A7C15  # odd, so successive chunks of one item get distinct seeds
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
        return self.target_len > int(self.request.audio_chunk_threshold * 25)


class OmniVoice:
    """A loaded OmniVoice model (backbone, text tokenizer, codec) on one device."""

    def __init__(self, model: OmniVoiceModel, tokenizer: object, codec: Codec, device: torch.device, runner: ModelRunner | None = None) -> None:
        self.model = model
        self.runner = runner or ModelRunner(model, use_graphs=False)
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = device
        self.num_codebooks = model.cfg.num_codebooks
        self.mask_id = model.cfg.audio_mask_id

    @property
    def sample_rate(self) -> int:
        return int(self.codec.sample_rate)

    @property
    def frame_rate(self) -> int:
        return int(self.codec.frame_rate)

    def stats(self) -> dict[str, float | int]:
        """Cumulative forward-pass figures: passes, tokens (real and padded), useful FLOPs,
        device seconds, CUDA-graph hits and misses."""
        return self.runner.stats.as_dict()

    @classmethod
    def load(
        cls,
        source: str,
        device: str = "cpu",
        dtype: str = "float32",
        on_progress: ProgressCallback | None = None,
        cuda_graphs: bool = True,
        compile: bool | None = None,
    ) -> "OmniVoice":
        """Load a checkpoint. On a GPU the forward pass runs from CUDA graphs captured here
        (`cuda_graphs`), over a torch.compile'd layer stack (`compile`; None: on for a GPU in
        half precision, where it doubles the forward pass's speed, off elsewhere)."""
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
        report("codec")
        codec = load_codec(root / "audio_tokenizer", device=torch_device, dtype=DTYPES[dtype])
        # Graphs need the FlashAttention varlen path (half precision); float32 on a GPU runs
        # attention per segment, which reads the segment table on the host every pass.
        use_graphs = torch_device.type == "cuda" and cuda_graphs and dtype in ("bfloat16", "float16")
        if compile is None:
            compile = torch_device.type == "cuda" and dtype in ("bfloat16", "float16")
        runner = ModelRunner(model, use_graphs=use_graphs, compile=compile)
        if use_graphs:
            report("cuda_graphs")
            runner.capture()
        log.info("loaded %s on %s (%s)", root, device, dtype)
        return cls(model, tokenizer, codec, torch_device, runner)

    # ------------------------------------------------------------------ voices

    def encode_voice(self, audio: np.ndarray, sample_rate: int, ref_text: str, preprocess: bool = True) -> VoicePrompt:
        """Turn a reference clip and its transcript into a voice clone prompt."""
        if not ref_text or not ref_text.strip():
            raise InvalidInput("a transcript of the reference audio is required (ref_text is empty)")
        wav, ref_rms = audio_ops.prepare_reference(audio, sample_rate, preprocess=preprocess, has_ref_text=True)
        if wav.size == 0:
            raise InvalidAudio("reference audio is shorter than one codec frame (40 ms)")
        with torch.inference_mode():
            tokens = self.codec.encode(torch.from_numpy(wav).to(self.device).view(1, 1, -1))[0]
        text = add_punctuation(ref_text) if preprocess else ref_text
        return VoicePrompt(tokens=tokens.cpu().numpy().astype(np.int64), ref_text=text, ref_rms=ref_rms)

    # ------------------------------------------------------------------ generation

    def generate(self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None) -> list[GenerationResult]:
        """Generate every request as one batch; results come back in request order."""
        items = [self._normalise(r) for r in requests]
        tokens: list[list[torch.Tensor]] = [[] for _ in items]
        short = [i for i, it in enumerate(items) if not it.is_long]
        if short:
            prompts = [self._prompt(items[i], items[i].text, items[i].target_len, items[i].ref_text, items[i].ref_tokens) for i in short]
            for i, t in zip(short, generate_tokens(self.model, prompts, on_step, self.runner)):
                tokens[i] = [t]
        long_items = [i for i, it in enumerate(items) if it.is_long]
        for group in ([i for i in long_items if items[i].ref_tokens is not None], [i for i in long_items if items[i].ref_tokens is None]):
            if group:
                for i, chunks in zip(group, self._generate_chunked([items[i] for i in group], on_step)):
                    tokens[i] = chunks
        flat = [t for toks in tokens for t in toks]
        decoded = iter(a.float().cpu().numpy() for a in self.codec.decode_many([t.to(self.device) for t in flat]))
        return [self._finish(it, toks, [next(decoded) for _ in toks]) for it, toks in zip(items, tokens)]

    def _normalise(self, req: GenerationRequest) -> _Item:
        if not req.text or not req.text.strip():
            raise InvalidInput("input text is empty")
        if req.num_step < 1:
            raise InvalidInput(f"num_step must be at least 1, got {req.num_step}")
        if req.speed is not None and not req.speed > 0:
            raise InvalidInput(f"speed must be positive, got {req.speed}")
        if req.duration is not None and not req.duration > 0:
            raise InvalidInput(f"duration must be positive, got {req.duration}")
        instruct = resolve_instruct(req.instruct, use_zh=contains_cjk(req.text)) if req.instruct else None
        voice = req.voice
        ref_text = voice.ref_text if voice is not None else None
        ref_tokens = None
        if voice is not None:
            ref_tokens = torch.as_tensor(np.asarray(voice.tokens), dtype=torch.long)
            if ref_tokens.ndim != 2 or ref_tokens.shape[0] != self.num_codebooks:
                raise InvalidInput(f"voice prompt tokens must be [{self.num_codebooks}, T], got {list(ref_tokens.shape)}")
            if int(ref_tokens.min()) < 0 or int(ref_tokens.max()) >= self.mask_id:
                raise InvalidInput("voice prompt tokens hold values outside the codec's codebook")
        num_ref = int(ref_tokens.shape[1]) if ref_tokens is not None else None
        if req.duration is not None:
            target_len, speed = target_tokens_for_duration(req.text, req.duration, ref_text, num_ref)
        else:
            target_len = target_tokens(req.text, ref_text, num_ref, speed=req.speed or 1.0)
            speed = req.speed
        seed = req.seed if req.seed is not None else secrets.randbits(63)
        return _Item(req, req.text, resolve_language(req.language), instruct, ref_text, ref_tokens,
                     voice.ref_rms if voice is not None else None, target_len, speed, seed)

    def _prompt(self, item: _Item, text: str, target_len: int, ref_text: str | None, ref_tokens: torch.Tensor | None, chunk: int = 0) -> Prompt:
        """[style | text | reference audio | MASK target] for one item (or one chunk of it)."""
        req = item.request
        style = "<|denoise|>" if req.denoise and ref_tokens is not None else ""
        style += f"<|lang_start|>{item.language or 'None'}<|lang_end|>"
        style += f"<|instruct_start|>{item.instruct or 'None'}<|instruct_end|>"
        text_ids = self.tokenizer.encode(style).ids + tokenize_text(self.tokenizer, f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")
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

    def _generate_chunked(self, items: list[_Item], on_step: StepCallback | None) -> list[list[torch.Tensor]]:
        """Long items chunk by chunk, batched across items per chunk index.

        With a voice prompt every chunk uses it. Without one, chunk 0 runs bare and becomes the
        voice prompt (tokens and raw text) of the item's later chunks, so the voice stays the same.
        """
        chunks = [
            chunk_text(it.text, chunk_char_len(it.target_len, it.text, it.request.audio_chunk_duration, self.frame_rate), MIN_CHUNK_CHARS)
            for it in items
        ]
        results: list[list[torch.Tensor]] = [[] for _ in items]
        for ci in range(max(len(c) for c in chunks)):
            members = [j for j in range(len(items)) if ci < len(chunks[j])]
            prompts = []
            for j in members:
                it = items[j]
                if it.ref_tokens is not None:
                    ref_text, ref_tokens = it.ref_text, it.ref_tokens
                elif ci == 0:
                    ref_text, ref_tokens = None, None
                else:
                    ref_text, ref_tokens = chunks[j][0], results[j][0].cpu()
                num_ref = int(ref_tokens.shape[1]) if ref_tokens is not None else None
                target_len = target_tokens(chunks[j][ci], ref_text, num_ref, speed=it.speed or 1.0)
                prompts.append(self._prompt(it, chunks[j][ci], target_len, ref_text, ref_tokens, chunk=ci))
            for j, t in zip(members, generate_tokens(self.model, prompts, on_step, self.runner)):
                results[j].append(t)
        return results

    def _finish(self, item: _Item, tokens: list[torch.Tensor], pieces: list[np.ndarray]) -> GenerationResult:
        """Join decoded chunks and post-process as the reference does."""
        sr = self.sample_rate
        wav = pieces[0] if not item.is_long else audio_ops.cross_fade_chunks(pieces, sr, CROSS_FADE_S)
        if item.request.postprocess_output:
            wav = audio_ops.remove_silence(wav, sr, *OUTPUT_SILENCE_MS)
        wav = audio_ops.normalize_output_loudness(wav, item.ref_rms)
        wav = audio_ops.fade_and_pad(wav, sr)
        kept = [t.cpu().numpy().astype(np.int64) for t in tokens] if item.request.return_tokens else []
        return GenerationResult(audio=wav.astype(np.float32, copy=False), sample_rate=sr, tokens=kept, seed=item.seed)
