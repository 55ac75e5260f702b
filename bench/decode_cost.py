"""What the codec's decode costs the denoising forward, and what the variants of the decode save.

The production forward (CUDA graphs, torch.compile) of one packed batch like the mixed run's (its
requests in order, long ones as all their chunks, up to `--tokens`) is timed alone, then while a
second thread decodes that batch's chunks (random codes of each chunk's length: the decode's work
depends on lengths only) back to back on a CUDA stream of its own, as the sidecar's finisher
does. Per variant of the decode (the streams' priorities, frames per decode call, the acoustic
decoder's precision): the forward alone and beside the decode, the forward's loss, the decode's
throughput alone and beside it. The decode never stops in the beside window, so the loss is the
most it can cost; `mixed_loss_estimate_pct` scales it by the share of the time the decode would
run at the mixed run's rate, and `production_paced` measures that: the decode paced to the rate,
the forward timed over three of its cycles. Each precision's audio is held to the parity fixtures' audio rule
(within 1e-3 absolute at the output's level) against the float32 decode with TF32 off.

    python3 bench/decode_cost.py /tmp/full --out decode-cost.json
    python3 bench/decode_cost.py /tmp/tiny --device cpu --dry-run --out dry.json  # the code path

Keys: bench/README.md ("The decode's cost"). `--dry-run` runs every variant on a small batch, its
codes cut to a second, and a few forward passes (on the CPU the streams do not exist and the
timings mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import workloads
from sidecar.runtime import streams
from sidecar.runtime.codec import DECODE_FRAMES_PER_CALL, Codec, load_codec
from sidecar.runtime.generate import BatchState, Prompt
from sidecar.runtime.loader import DTYPES, resolve_checkpoint
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest, VoicePrompt

PARITY_TOL = 1e-3  # the parity fixtures' audio rule (/work/shared/parity/README.md)
OUTPUT_PEAK = 0.5  # the level a voiceless output is normalised to (normalize_output_loudness)
DRY_RUN_FRAMES = 25  # each chunk's codes cut to one second in a dry run
# A forward pass of the mixed run over HTTP at fd50967 held 44,700 tokens on average (35.76 M in
# 800 passes; bench/results/2026-12-03-h200-fd50967.json), 57.7 chunks, 710 s of audio a batch.
MIXED_TOKENS = 44700
# The decode stream's priority for each arrangement: `above` (the runtime's: the decode's kernels
# first), `equal`, or `below` (the decode at 0 under a denoising stream of the highest priority).
DECODE_PRIORITY = {"above": streams.DECODE_STREAM_PRIORITY, "equal": 0, "below": 0}


@dataclass(frozen=True)
class Variant:
    name: str
    # The decode's stream against the denoising's (DECODE_PRIORITY): `above` is the runtime's.
    decode_priority: str = "above"
    decode_frames_per_call: int = DECODE_FRAMES_PER_CALL
    codec_dtype: str = "float32"
    paced: bool = False  # the decode at the mixed run's rate (--mixed-x-realtime), not nonstop


VARIANTS = (
    Variant("production"),
    Variant("production_paced", paced=True),
    Variant("equal_priority", "equal"),
    Variant("forward_first", "below"),
    Variant("frames_3750", decode_frames_per_call=3750),
    Variant("frames_7500", decode_frames_per_call=7500),
    Variant("frames_30000", decode_frames_per_call=30000),
    Variant("forward_first_frames_3750", "below", 3750),
    Variant("bf16", codec_dtype="bfloat16"),
    Variant("bf16_forward_first", "below", codec_dtype="bfloat16"),
)


# ---------------------------------------------------------------- the batch


def request(r: workloads.Request, clone: VoicePrompt) -> GenerationRequest:
    """A mixed request as the runtime gets it (an OpenAI voice name is an auto voice there)."""
    voice = clone if r.kind == "clone" else None
    return GenerationRequest(text=r.text, instruct=r.instruct, voice=voice, seed=r.seed)


def chunk_prompts(model: OmniVoice, req: GenerationRequest) -> list[Prompt]:
    """Every chunk's prompt; a later chunk of a long item without a voice clones a made-up chunk
    0 of the right length (its tokens do not change the work)."""
    prompter, prompts = model.prompter, []
    item = prompter.prepare(req)
    texts = prompter.chunk_texts(item)
    chunk0 = None
    for ci in range(len(texts)):
        prompts.append(prompter.chunk_prompt(item, texts, ci, chunk0))
        if ci == 0:
            frames = prompts[0].target_len
            chunk0 = torch.randint(0, model.mask_id, (model.num_codebooks, frames))
    return prompts


def mixed_batch(model: OmniVoice, tokens: int) -> tuple[list[Prompt], int]:
    """The mixed requests in order, each with all its chunks, while the packed batch (each
    chunk's conditional and unconditional rows) stays within `tokens`; and how many."""
    clone, prompts, used = voice_prompt(model), [], 0
    for n, r in enumerate(workloads.mixed()):
        more = chunk_prompts(model, request(r, clone))
        cost = sum(p.input_ids.shape[1] + p.target_len for p in more)
        if prompts and used + cost > tokens:
            return prompts, n
        prompts, used = prompts + more, used + cost
    return prompts, len(workloads.mixed())


def voice_prompt(model: OmniVoice, seconds: float = 5.0) -> VoicePrompt:
    frames = int(seconds * model.frame_rate)
    tokens = torch.randint(0, model.mask_id, (model.num_codebooks, frames)).numpy()
    return VoicePrompt(tokens=tokens, ref_text=workloads.CLONE_REF_TEXT, ref_rms=0.1)


# ---------------------------------------------------------------- timing


def on_stream(stream: torch.cuda.Stream | None) -> contextlib.AbstractContextManager[object]:
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def forward_ms(state: BatchState, passes: int, stream: torch.cuda.Stream | None) -> float:
    """The mean device time of `passes` forward passes queued back to back on `stream` (the
    current one if None); the host's clock on the CPU."""
    if state.runner is None or state.runner.device.type != "cuda":
        start = time.perf_counter()
        for _ in range(passes):
            state.logits()
        return (time.perf_counter() - start) / passes * 1e3
    with on_stream(stream):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(passes):
            state.logits()
        end.record()
        end.synchronize()
    return begin.elapsed_time(end) / passes


class DecodeLoop(threading.Thread):
    """Decodes the same codes again and again on its stream, each call's audio brought to the
    host as the sidecar's finisher does, until stopped; keeps each call's (start, end). With
    `pace` (audio seconds a second) it waits between calls to decode no faster than that."""

    def __init__(
        self,
        codec: Codec,
        codes: list[torch.Tensor],
        frames: int,
        stream: torch.cuda.Stream | None,
        pace: float | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.codec, self.codes, self.frames, self.stream = codec, codes, frames, stream
        self.pace = pace
        self.audio_s = sum(c.shape[-1] for c in codes) / codec.frame_rate
        self.calls: list[tuple[float, float]] = []
        self.first = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with torch.inference_mode(), on_stream(self.stream):
                while not self.stop.is_set():
                    start = time.perf_counter()
                    _ = [a.float().cpu() for a in self.codec.decode_many(self.codes, self.frames)]
                    self.calls.append((start, time.perf_counter()))
                    self.first.set()
                    if self.pace:
                        due = self.calls[0][0] + len(self.calls) * self.audio_s / self.pace
                        self.stop.wait(max(0.0, due - time.perf_counter()))
        except BaseException as exc:  # reported by the caller
            self.error = exc
            self.first.set()

    def calls_within(self, since: float) -> int:
        return sum(1 for a, _ in list(self.calls) if a >= since)

    def x_realtime(self, since: float, until: float) -> float | None:
        """Audio seconds decoded per second by the calls made wholly within [since, until]."""
        inside = [(a, b) for a, b in list(self.calls) if a >= since and b <= until]
        if not inside:
            return None
        return len(inside) * self.audio_s / (inside[-1][1] - inside[0][0])

    def __enter__(self) -> DecodeLoop:
        self.start()
        self.first.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()
        if self.error is not None:
            raise self.error


# ---------------------------------------------------------------- one variant


@dataclass
class Setup:
    model: OmniVoice
    state: BatchState
    codes: list[torch.Tensor]
    codecs: dict[str, Codec]
    passes: int  # forward passes in a window of `seconds`
    seconds: float
    mixed_x: float


def variant_streams(
    device: torch.device, choice: str
) -> tuple[torch.cuda.Stream | None, torch.cuda.Stream | None]:
    """The forward's stream (None: the default one) and the decode's for a `DECODE_PRIORITY`,
    each after the work queued so far; `above` as the runtime makes them."""
    if device.type != "cuda":
        return None, None
    forward = torch.cuda.Stream(device, priority=streams.HIGHEST) if choice == "below" else None
    decode = torch.cuda.Stream(device, priority=DECODE_PRIORITY[choice])
    for stream in (forward, decode):
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(device))  # the batch's tensors
    return forward, decode


@torch.inference_mode()
def measure(setup: Setup, variant: Variant) -> dict[str, float | None]:
    """One round: the forward alone, the decode alone, then both together. The forward keeps
    running beside the decode until two decode calls have ended within its window (or four
    windows have passed), so that a starved decode is still measured."""
    device = setup.model.device
    fwd_stream, dec_stream = variant_streams(device, variant.decode_priority)
    codec = setup.codecs[variant.codec_dtype]
    alone = forward_ms(setup.state, setup.passes, fwd_stream)
    frames = variant.decode_frames_per_call
    with DecodeLoop(codec, setup.codes, frames, dec_stream) as solo:
        since = time.perf_counter()
        while time.perf_counter() - since < setup.seconds / 2 or len(solo.calls) < 3:
            time.sleep(0.01)
    pace = setup.mixed_x if variant.paced else None
    with DecodeLoop(codec, setup.codes, frames, dec_stream, pace) as loop:
        since, beside = time.perf_counter(), []
        if pace:  # three of the decode's cycles, whatever part of them it works
            cycles = 3 * loop.audio_s / pace / setup.seconds
            beside.append(forward_ms(setup.state, math.ceil(setup.passes * cycles), fwd_stream))
        while len(beside) < 4 and (not beside or loop.calls_within(since) < 2):
            beside.append(forward_ms(setup.state, setup.passes, fwd_stream))
        until = time.perf_counter()
    return {
        "forward_ms_alone": alone,
        "forward_ms_beside": statistics.fmean(beside),
        "decode_x_alone": solo.x_realtime(0.0, float("inf")),
        "decode_x_beside": loop.x_realtime(since, until),
    }


def summarise(variant: Variant, rounds: list[dict[str, float | None]], mixed_x: float) -> dict:
    """The rounds' means. `forward_loss_pct`: the share of the forward's throughput lost while the
    decode runs; `mixed_loss_estimate_pct`: that loss over the share of the time the decode runs
    when it decodes `mixed_x` audio seconds a second, as in the mixed run (a paced variant
    decodes at that rate: its loss is the estimate)."""

    def mean(key: str) -> float | None:
        values = [x for x in (r[key] for r in rounds) if x is not None]
        return statistics.fmean(values) if values else None

    losses = [
        100 * (1 - _num(r["forward_ms_alone"]) / _num(r["forward_ms_beside"])) for r in rounds
    ]
    loss = statistics.fmean(losses)
    x_alone, x_beside = mean("decode_x_alone"), mean("decode_x_beside")
    duty = 1.0 if variant.paced else min(1.0, mixed_x / x_beside) if x_beside else None
    return {
        **asdict(variant),
        "forward_ms_alone": _round(mean("forward_ms_alone"), 3),
        "forward_ms_beside": _round(mean("forward_ms_beside"), 3),
        "forward_loss_pct": round(loss, 2),
        "forward_loss_pct_rounds": [round(x, 2) for x in losses],
        "decode_x_alone": _round(x_alone),
        "decode_share_pct": _round(100 * mixed_x / x_alone) if x_alone else None,
        "decode_x_beside": _round(x_beside),
        "decode_keeps_up": x_beside is not None and x_beside >= mixed_x,
        "mixed_loss_estimate_pct": round(loss * duty, 2) if duty is not None else None,
    }


def _num(x: float | None) -> float:
    assert x is not None
    return x


def _round(x: float | None, digits: int = 1) -> float | None:
    return round(x, digits) if x is not None else None


# ---------------------------------------------------------------- parity


@contextlib.contextmanager
def tf32(allowed: bool) -> Iterator[None]:
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def decode_all(codec: Codec, codes: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.inference_mode():
        return [a.double().cpu() for a in codec.decode_many(codes)]


def compare(ref: list[torch.Tensor], got: list[torch.Tensor]) -> dict[str, float | bool]:
    """Each item at the output's level (the reference's peak at 0.5, the same gain on both): the
    largest sample difference; the pooled and the worst item's signal-to-difference ratio."""
    worst, signal, noise, item_snr = 0.0, 0.0, 0.0, []
    for r, g in zip(ref, got, strict=True):
        gain = OUTPUT_PEAK / max(float(r.abs().max()), 1e-12)
        diff = (g - r) * gain
        worst = max(worst, float(diff.abs().max()))
        s, n = float((r * gain).pow(2).sum()), float(diff.pow(2).sum())
        signal, noise = signal + s, noise + n
        item_snr.append(_snr(s, n))
    return {
        "max_abs_diff": float(f"{worst:.3g}"),
        "snr_db": _finite(_snr(signal, noise)),  # None: equal
        "min_item_snr_db": _finite(min(item_snr)),
        "within_parity": worst <= PARITY_TOL,
    }


def _finite(db: float) -> float | None:
    return round(db, 1) if math.isfinite(db) else None


def _snr(signal: float, noise: float) -> float:
    return 10 * math.log10(signal / noise) if noise > 0 else math.inf


def parity(codecs: dict[str, Codec], codes: list[torch.Tensor]) -> dict[str, object]:
    """Each precision's decode, as the runtime runs it (TF32 convolutions on a GPU, PyTorch's
    default), against the float32 decode with TF32 off, the arithmetic the fixtures record."""
    with tf32(False):
        strict = decode_all(codecs["float32"], codes)
    out: dict[str, object] = {"reference": "float32, TF32 off", "tolerance": PARITY_TOL}
    for name, codec in codecs.items():
        out[name] = compare(strict, decode_all(codec, codes))
    return out


# ---------------------------------------------------------------- the run


def load(args: argparse.Namespace, names: set[str]) -> tuple[OmniVoice, dict[str, Codec]]:
    # The batch's bucket is captured at its first pass (graphs_at_load 0): the one graph it needs.
    model = OmniVoice.load(
        args.checkpoint, args.device, args.dtype, options=RuntimeOptions(graphs_at_load=0)
    )
    codecs = {"float32": model.codec}
    for dtype in {v.codec_dtype for v in VARIANTS if v.name in names} - {"float32"}:
        root = resolve_checkpoint(args.checkpoint)
        codec = load_codec(
            root / "audio_tokenizer", model.device, DTYPES[args.dtype], DTYPES[dtype]
        )
        if model.runner.options.compile:
            codec.fuse_activations()
        codecs[dtype] = codec
    return model, codecs


def prepare(
    args: argparse.Namespace, model: OmniVoice, codecs: dict[str, Codec]
) -> tuple[Setup, dict]:
    torch.manual_seed(0)
    prompts, requests = mixed_batch(model, args.tokens)
    frames = [min(p.target_len, DRY_RUN_FRAMES) if args.dry_run else p.target_len for p in prompts]
    codes = [
        torch.randint(0, model.mask_id, (model.num_codebooks, t), device=model.device)
        for t in frames
    ]
    with torch.inference_mode():
        state = BatchState(model.model, prompts, model.runner)
        forward_ms(state, 2, None)  # compiles and captures the bucket's graph
        for codec in codecs.values():  # each codec's first call at these lengths
            decode_all(codec, codes[:2])
        estimate = forward_ms(state, 3, None)
    passes = max(2, round(args.seconds * 1e3 / estimate))
    batch = {
        "requests": requests,
        "chunks": len(prompts),
        "tokens": state.packed.num_tokens,
        "audio_s": round(sum(frames) / model.frame_rate, 1),
        "forward_passes_timed": passes,
    }
    return Setup(model, state, codes, codecs, passes, args.seconds, args.mixed_x_realtime), batch


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dtype", default="auto", help="the model's; auto: bfloat16 on a GPU")
    ap.add_argument(
        "--tokens",
        type=int,
        default=MIXED_TOKENS,
        help="the batch's size: mixed requests are added while its tokens stay within this",
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="forward passes timed per window")
    ap.add_argument("--rounds", type=int, default=2, help="alone/beside rounds per variant")
    ap.add_argument("--variants", nargs="+", choices=[v.name for v in VARIANTS])
    ap.add_argument("--mixed-x-realtime", type=float, default=205.0, help="the decode's demand")
    ap.add_argument("--dry-run", action="store_true", help="a few items and passes: the code path")
    ap.add_argument("--commit", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.dry_run:
        args.tokens, args.seconds, args.rounds = min(args.tokens, 600), 0.01, 1
    if args.dtype == "auto":
        args.dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    return args


def main() -> int:
    args = arguments()
    names = set(args.variants or [v.name for v in VARIANTS])
    started = time.perf_counter()
    model, codecs = load(args, names)
    print(f"loaded in {time.perf_counter() - started:.1f} s", flush=True)
    setup, batch = prepare(args, model, codecs)
    print(f"batch {json.dumps(batch)} ready at {time.perf_counter() - started:.1f} s", flush=True)
    out: dict[str, object] = {
        "commit": args.commit,
        "device": args.device,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "dry_run": args.dry_run,
    }
    if model.device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(model.device)
        lowest, highest = (torch.cuda.Stream(priority=p).priority for p in (0, streams.HIGHEST))
        out["stream_priorities"] = {"lowest": lowest, "highest": highest}
    out.update(batch=batch, mixed_x_realtime=args.mixed_x_realtime)
    out["parity"] = parity(codecs, setup.codes)
    print(json.dumps(out["parity"]), flush=True)
    out["variants"] = rows = []
    for variant in (v for v in VARIANTS if v.name in names):
        rounds = [measure(setup, variant) for _ in range(args.rounds)]
        rows.append(summarise(variant, rounds, args.mixed_x_realtime))
        print(json.dumps(rows[-1]), flush=True)
        out["seconds"] = round(time.perf_counter() - started, 1)
        if args.out:  # after every variant: a run cut short keeps what it measured
            args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
