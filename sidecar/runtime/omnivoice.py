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
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import tokenizers
import torch

from sidecar.audio import processing as audio_ops
from sidecar.runtime import compile_cache, streams, trace_once
from sidecar.runtime.codec import Codec, load_codec
from sidecar.runtime.interleave import BULK_DEPTH, INTERACTIVE_DEPTH, Interleaved, Lane
from sidecar.runtime.loader import (
    DTYPES,
    check_layout,
    load_model,
    load_tokenizer,
    resolve_checkpoint,
)
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import DEFAULT_OPTIONS, RuntimeOptions
from sidecar.runtime.preload import HostLoad
from sidecar.runtime.prompting import PreparedRequest, Prompter
from sidecar.runtime.request import GenerationRequest, GenerationResult, VoicePrompt
from sidecar.runtime.runner import ModelRunner
from sidecar.runtime.stepper import INTERACTIVE_QUEUED_STEPS, Denoised, Stepper, run_to_end
from sidecar.shared.errors import InvalidAudio, InvalidInput
from sidecar.shared.options import STEP_TOKENS
from sidecar.shared.text import add_punctuation
from sidecar.shared.tiers import Tier

log = logging.getLogger(__name__)

# on_progress(stage) is called during loading; on_step(step, num_steps) every denoising step.
ProgressCallback = Callable[[str], None]
StepCallback = Callable[[int, int], None]

CROSS_FADE_S = 0.3
# The interactive lane's largest CUDA graph (`RuntimeOptions.interactive_stream`): its steps hold
# the interactive requests of the moment, a few thousand tokens; all its graphs are captured at
# load.
INTERACTIVE_MAX_TOKENS = 8192
OUTPUT_SILENCE_MS = (500, 100, 100)  # longest kept silence inside, at the start, at the end


def interactive_options(options: RuntimeOptions) -> RuntimeOptions:
    """The interactive lane's runner's options: the small buckets, every graph at load, captured
    at its stream's priority (a graph's kernels keep the capturing stream's)."""
    buckets = tuple(n for n in options.buckets if n <= INTERACTIVE_MAX_TOKENS)
    priority = streams.HIGHEST if options.interactive_stream == "high" else 0
    return replace(
        options,
        buckets=buckets or (min(options.buckets),),
        graphs_at_load=None,
        graph_priority=priority,
    )


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
        interactive_runner: ModelRunner | None = None,
    ) -> None:
        self.model = model
        self.runner = runner or ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=False))
        # With `RuntimeOptions.interactive_stream`: the interactive lane's runner and the stream
        # its steps run on (`stepper`, sidecar/runtime/interleave.py), at its graphs' priority.
        self.interactive_runner = interactive_runner
        self.lane_stream = (
            torch.cuda.Stream(device, priority=interactive_runner.options.graph_priority)
            if interactive_runner is not None and device.type == "cuda"
            else None
        )
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = device
        self.num_codebooks = model.cfg.num_codebooks
        self.mask_id = model.cfg.audio_mask_id
        self.prompter = Prompter(tokenizer, self.num_codebooks, self.mask_id, self.frame_rate)
        # On a GPU the codec decodes on a stream of its own. On the denoising stream its kernels
        # would queue behind the next batch's steps, which the sidecar enqueues meanwhile, so a
        # batch's audio came out only when the next batch was denoised (docs/PERFORMANCE.md).
        # Its kernels go before the denoising's (sidecar/runtime/streams.py says why), which
        # runs on the thread's current stream, the default one.
        self.decode_stream = (
            torch.cuda.Stream(device, priority=streams.DECODE_STREAM_PRIORITY)
            if device.type == "cuda"
            else None
        )
        # Interactive requests decode on a stream of their own, at the highest priority, so
        # their few kernels never queue behind a bulk batch's decoding, nor the lane's next
        # steps behind them.
        self.interactive_decode_stream = (
            torch.cuda.Stream(device, priority=streams.INTERACTIVE_DECODE_PRIORITY)
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
        CUDA-graph hits and misses (their device seconds: `device_times`), the interactive
        lane's added in."""
        counts = self.runner.stats.counts()
        if self.interactive_runner is not None:
            for key, value in self.interactive_runner.stats.counts().items():
                counts[key] = counts.get(key, 0) + value
        return counts

    def device_times(self) -> dict[str, float]:
        """Device seconds of the batches the device has finished since the last call (their
        forward passes, the batches, the gaps before them), read without waiting for it. The
        interactive lane's forward passes count in `forward_s` (they overlap the bulk's); the
        batches and gaps are the bulk's."""
        times = self.runner.settle()
        if self.interactive_runner is not None:
            times["forward_s"] += self.interactive_runner.settle()["forward_s"]
        return times

    @classmethod
    def load(
        cls,
        source: str,
        device: str = "cpu",
        dtype: str = "float32",
        on_progress: ProgressCallback | None = None,
        options: RuntimeOptions = DEFAULT_OPTIONS,
        host: HostLoad | None = None,
    ) -> OmniVoice:
        """Load a checkpoint. `options` says how the network runs (`RuntimeOptions`: CUDA graphs
        captured here, torch.compile, the Triton kernels; its defaults are the production path),
        resolved for the device and dtype and handed whole to the `ModelRunner`. `host`: the
        checkpoint a parked spare already read (sidecar/runtime/preload.py)."""
        if dtype not in DTYPES:
            raise InvalidInput(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        report = on_progress or (lambda stage: None)
        if host is None:
            report("resolve")
            root = resolve_checkpoint(source)
            check_layout(root)
            report("tokenizer")
            tokenizer = load_tokenizer(root)
        else:
            root, tokenizer = host.root, host.tokenizer
        report("model")
        torch_device = torch.device(device)
        if dtype == "float32":
            # float32 means float32: TF32 matmuls and convolutions would change the tokens.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        model = load_model(root, device, DTYPES[dtype], host.weights if host else None)
        # Graphs need the FlashAttention varlen path (half precision); float32 on a GPU runs
        # attention per segment, which reads the segment table on the host every pass.
        options = options.resolved(torch_device.type == "cuda", dtype in ("bfloat16", "float16"))
        report("codec")
        if host is None:
            codec = load_codec(root / "audio_tokenizer", device=torch_device, dtype=DTYPES[dtype])
        else:
            codec = host.codec.to(torch_device)
        codec.use_decoder_dtype(torch.float32)  # its own precision, whatever the model's
        runner = ModelRunner(model, options)
        lane = None
        if options.interactive_stream != "off":
            lane = ModelRunner(model, interactive_options(options))

        def compile_and_capture() -> None:  # run again on an empty cache if the cache breaks it
            if options.compile:
                codec.fuse_activations()
            if options.cuda_graphs:
                report("cuda_graphs")
                with trace_once.seeded(f"{options} {model.cfg} {runner.attention_kernel}"):
                    runner.capture()  # the stack's one trace (trace_once.py), then its graphs
                if lane is not None:
                    lane.capture()

        compile_cache.retrying(compile_and_capture, reset=torch.compiler.reset)
        loaded = cls(model, tokenizer, codec, torch_device, runner, lane)
        if torch_device.type == "cuda":  # a decode shape's first run is slow there
            if options.cuda_graphs:
                streams = [loaded.decode_stream, loaded.interactive_decode_stream]
                codec.capture_graphs([s for s in streams if s is not None])
            else:
                codec.warm_shapes()
        log.info("loaded %s on %s (%s)", root, device, dtype)
        return loaded

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

        A short item is one chunk; a long one is split into several (`Prompter.chunk_texts`).
        They run together in one `Stepper`; the later chunks of a long item without a voice
        prompt join once its chunk 0 is done, since they clone it. `on_step` counts the steps.
        """
        stepper = self.bulk_stepper()
        for refused in stepper.add(0, requests, on_step=on_step):
            if refused is not None:
                raise refused
        [(_, denoised)] = run_to_end(stepper)
        return denoised

    def stepper(self, step_tokens: int = STEP_TOKENS.default) -> Stepper | Interleaved:
        """A running batch to add requests to and step (see `sidecar.runtime.stepper`); with
        `RuntimeOptions.interactive_stream`, interactive requests step apart, in a lane of their
        own beside it (`sidecar.runtime.interleave`)."""
        if self.interactive_runner is None:
            return self.bulk_stepper(step_tokens, INTERACTIVE_QUEUED_STEPS)
        bulk = self.bulk_stepper(step_tokens)  # the lanes bound their own queues
        lane = Stepper(
            self.prompter, self.model, self.interactive_runner, step_tokens, bulk.max_members
        )
        return Interleaved(
            Lane(bulk, None, BULK_DEPTH), Lane(lane, self.lane_stream, INTERACTIVE_DEPTH)
        )

    def bulk_stepper(
        self, step_tokens: int = STEP_TOKENS.default, queued_steps: int = 0
    ) -> Stepper:
        """A running batch on the runtime's runner alone: interactive members join its steps
        (`queued_steps`: `Stepper`'s)."""
        max_members = self.runner.max_segments // 2  # both rows of each
        return Stepper(
            self.prompter, self.model, self.runner, step_tokens, max_members, queued_steps
        )

    def wait_denoised(self, denoised: Sequence[Denoised]) -> None:
        """Return once the device has run the steps that made these tokens (at once on the CPU,
        where `denoise` ran them). Blocks only the calling thread: the sidecar's watcher."""
        for event in _ready_events(denoised):
            event.synchronize()

    def decode(
        self,
        denoised: Sequence[Denoised],
        timings: dict[str, float] | None = None,
        tier: Tier = Tier.BULK,
    ) -> list[GenerationResult]:
        """The other half: decode every chunk in one codec batch, then post-process each item.

        The sidecar runs it in a thread of its own, while the next batch denoises; on a GPU its
        kernels run on `decode_stream` (`interactive_decode_stream` for a batch of the
        interactive tier), after the denoising steps that made the tokens. Adds the host's
        seconds for each part to `timings`: the codec until its audio is on the host
        (`codec_s`), then the post-processing (`postprocess_s`)."""
        started = time.monotonic()
        flat = [t.to(self.device) for d in denoised for t in d.tokens]
        stream = self.interactive_decode_stream if tier is Tier.INTERACTIVE else self.decode_stream
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

    def _finish(
        self, item: PreparedRequest, tokens: list[np.ndarray], pieces: list[np.ndarray]
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
