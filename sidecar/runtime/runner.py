"""`ModelRunner`: the packed forward pass on a device, replayed from CUDA graphs where it can be.

A packed batch is padded up to the smallest *bucket* (a token count) that holds it: the padding
tokens belong to no segment and the segment table is filled up with empty segments, so every
bucket has fixed tensor shapes. On a GPU the graphs of buckets up to `graphs_at_load` tokens are
captured when the sidecar starts, a larger bucket's after its first pass (runtime/capture.py; all
share one memory pool), and a forward pass is then a copy into the bucket's static inputs and
one replay. A graph fixes its attention *cap*, the longest segment its
attention launch grid covers: FlashAttention launches a row of blocks per 128 query positions of
the cap for every segment, and the rows past a segment's end only exit, so a cap far above the
batch's longest segment costs ~10 % of attention (bit-equal results either way). Buckets above
`SHORT_SEGMENT_LEN` tokens therefore have two graphs, one capped there (the batches of ordinary
text) and one at `MAX_SEGMENT_LEN`; smaller buckets one, capped at their own size. A batch that
fits no bucket (too many tokens or segments, or one segment longer than `MAX_SEGMENT_LEN`) runs
eagerly: an explicit condition, counted as a graph miss (as is a bucket's first, uncaptured pass).

With `RuntimeOptions.compile` the layer stack is compiled by torch.compile (dynamic shapes, one
compilation for every bucket) before capture, which fuses the element-wise work (norms, rotary,
SwiGLU) that otherwise costs as much as the matrix products at hidden size 1024. The rotary
tables are made just before it, eagerly, and passed in (`hidden_fn`), so the compiler cannot
compute their cos and sin again inside every layer. The fused kernels round every intermediate
to the model's dtype where eager PyTorch would (regions.py says why).
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from sidecar.runtime.attention import choose_kernel
from sidecar.runtime.capture import Recorder
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import DEFAULT_OPTIONS, RuntimeOptions
from sidecar.runtime.regions import compiled_stack
from sidecar.runtime.runner_stats import DEVICE_TIMES, RunnerStats

log = logging.getLogger(__name__)

Mark = torch.cuda.Event | float  # see ModelRunner._mark

MAX_SEGMENTS = 2 * 64  # both rows of up to 64 items
MAX_SEGMENT_LEN = 4096  # longest segment a graph attends over; longer segments run eagerly
# The tight cap of large buckets' second graph: above the longest segment of the harness's mixed
# texts (721 tokens); a clone with a long reference (30 s is 750 frames) takes the loose graph.
SHORT_SEGMENT_LEN = 1024


@dataclass
class _EndedBatch:
    timers: list[tuple[Mark, Mark]]  # its forward passes
    end: Mark  # after its last step
    after: Mark | None  # the previous batch's end


def _reached(mark: Mark) -> bool:
    """Whether the device has got past `mark` (without waiting for it)."""
    return isinstance(mark, float) or mark.query()


def _elapsed(start: Mark, end: Mark) -> float:
    if isinstance(start, float) and isinstance(end, float):
        return end - start
    assert not isinstance(start, float) and not isinstance(end, float)
    return start.elapsed_time(end) / 1000.0


@dataclass
class _Bucket:
    num_tokens: int
    inputs: dict[str, torch.Tensor]
    graphs: dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)  # by attention cap
    uncapturable: set[int] = field(default_factory=set)  # caps whose late capture failed
    # The batch layout last staged (the tensors themselves): the next step of the same batch
    # only changes input_ids, so `stage` copies the rest once per batch.
    layout: tuple[torch.Tensor, ...] = ()


class ModelRunner:
    """Runs `OmniVoiceModel.forward_packed` for packed batches, padded to fixed buckets."""

    def __init__(
        self,
        model: OmniVoiceModel,
        options: RuntimeOptions = DEFAULT_OPTIONS,
        max_segments: int = MAX_SEGMENTS,
        max_segment_len: int = MAX_SEGMENT_LEN,
        short_segment_len: int = SHORT_SEGMENT_LEN,
    ) -> None:
        self.model = model
        self.device = model.codebook_layer_offsets.device
        self.max_segments = max_segments
        self.max_segment_len = max_segment_len
        self.short_segment_len = short_segment_len
        self.stats = RunnerStats()
        half = model.llm.embed_tokens.weight.dtype in (torch.float16, torch.bfloat16)
        gpu_half = self.device.type == "cuda" and half  # where the fused forms below apply
        self.options = options = options.resolved(self.device.type == "cuda", half)
        self.use_graphs = options.cuda_graphs
        compile = bool(options.compile)
        # Compiled on a GPU in half precision, each projection onto the residual stream is one
        # addmm (sidecar/runtime/residual.py): in place, the same bits without a copy of the stream.
        # Elsewhere the layers keep adding as they round now (eager, and Inductor's CPU code in
        # half precision: a product, then a sum), which the in-place addmm would change.
        self.residual_in_place = compile and gpu_half
        for layer in model.llm.layers:
            layer.residual_in_place = self.residual_in_place
        # Attention's q/k norm and rotary as one Triton kernel: the same logits as the compiled
        # code it replaces (sidecar/runtime/kernels/norm_rope.py).
        self.fused_norm_rope = gpu_half
        if self.fused_norm_rope:
            import sidecar.runtime.kernels.norm_rope  # noqa: F401  (registers torch.ops.omnivoice.norm_rope)

            for layer in model.llm.layers:
                layer.self_attn.fused_norm_rope = True
        cfg = model.cfg
        self.attention_kernel = choose_kernel(
            options.attention,
            self.device,
            model.llm.embed_tokens.weight.dtype,
            (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim),
        )
        for layer in model.llm.layers:
            layer.self_attn.attention_kernel = self.attention_kernel
        self.stack_fn: Callable[..., torch.Tensor] = model.stack_packed
        if compile:
            self.stack_fn = compiled_stack(model)  # by regions (regions.py)
        # `OmniVoiceModel.hidden_packed` with that stack: the rotary tables are made first,
        # outside the compiled part (see `OmniVoiceModel.stack_packed`).
        self.hidden_fn: Callable[..., torch.Tensor] = functools.partial(
            model.hidden_packed, stack=self.stack_fn
        )
        # Each step's scoring in one Triton kernel (sidecar/runtime/kernels/scoring.py), on a GPU only.
        self.fused_scoring = self.device.type == "cuda"
        self.bucket_sizes = sorted(options.buckets)
        self.buckets: dict[int, _Bucket] = {}  # static inputs, allocated on first use
        self._timers: list[tuple[Mark, Mark]] = []  # this batch's forward passes
        self._last_batch_end: Mark | None = None
        # Batches ended but not yet timed (`settle`), oldest first, and the device seconds
        # settled since `settle` last returned them. The sidecar's finisher thread settles
        # while the frame loop ends the next batch, hence the lock.
        self._ended: collections.deque[_EndedBatch] = collections.deque()
        self._unreported = dict.fromkeys(DEVICE_TIMES, 0.0)
        self._settling = threading.Lock()
        self.recorder = Recorder(options.graph_priority)
        # Every graph writes its hidden states here, so only one output buffer stays allocated;
        # the audio head (one matrix product) runs after the replay.
        self.hidden_out = torch.zeros(
            (0, model.cfg.hidden_size), dtype=model.audio_heads.weight.dtype, device=self.device
        )

    def _allocate(self, n: int) -> _Bucket:
        num_cb = self.model.cfg.num_codebooks
        inputs = {
            "input_ids": torch.zeros((num_cb, n), dtype=torch.long, device=self.device),
            "audio_mask": torch.zeros(n, dtype=torch.bool, device=self.device),
            "positions": torch.zeros(n, dtype=torch.long, device=self.device),
            "cu_seqlens": torch.full(
                (self.max_segments + 1,), n, dtype=torch.int32, device=self.device
            ),
            "head_index": torch.zeros(n, dtype=torch.long, device=self.device),
        }
        inputs["cu_seqlens"][0] = 0
        return _Bucket(n, inputs)

    def bucket_for(
        self, num_tokens: int, num_segments: int, max_seqlen: int
    ) -> tuple[_Bucket, int] | None:
        """The smallest bucket that holds the batch, if any does, and the tightest of its
        attention caps that holds the batch's longest segment."""
        if num_segments > self.max_segments:
            return None
        for n in self.bucket_sizes:
            if n >= num_tokens:
                caps = [cap for cap in self.segment_caps(n) if cap >= max_seqlen]
                if caps:
                    return self._bucket(n), caps[0]
        return None

    def _bucket(self, n: int) -> _Bucket:
        if n not in self.buckets:
            self.buckets[n] = self._allocate(n)
            if self.hidden_out.shape[0] < n:
                self.hidden_out = torch.zeros(
                    (n, self.model.cfg.hidden_size), dtype=self.hidden_out.dtype, device=self.device
                )
        return self.buckets[n]

    def segment_caps(self, bucket_tokens: int) -> list[int]:
        """The attention caps a bucket has graphs for, ascending (see the module's docstring)."""
        caps = {min(bucket_tokens, self.short_segment_len, self.max_segment_len)}
        return sorted(caps | {min(bucket_tokens, self.max_segment_len)})

    def _run(self, bucket: _Bucket, cap: int) -> None:
        """The bucket's forward pass up to the hidden states, written into `hidden_out`."""
        i = bucket.inputs
        h = self.hidden_fn(
            i["input_ids"], i["audio_mask"], i["positions"], i["cu_seqlens"], cap, i["head_index"]
        )
        self.hidden_out[: bucket.num_tokens].copy_(h)

    @torch.inference_mode()
    def capture(self) -> None:
        """Warm up and capture the graphs of the buckets `graphs_at_load` names (all by default),
        largest first, in one shared memory pool; the others wait for their first batch."""
        if not self.use_graphs:
            return
        self.recorder = Recorder(self.options.graph_priority)  # anew if a start compiles again
        start = time.perf_counter()
        # Every graph writes into hidden_out: sized once for the largest bucket, since a graph
        # captured later must not move it from under the graphs before it.
        self._bucket(max(self.bucket_sizes))
        warm = torch.cuda.Stream()
        for n in sorted(filter(self._at_load, self.bucket_sizes), reverse=True):
            bucket = self._bucket(n)
            for cap in self.segment_caps(n):  # the tight cap first: see RuntimeOptions
                run = functools.partial(self._run, bucket, cap)
                bucket.graphs[cap] = self.recorder.at_load(run, warm)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # the warm-up passes' blocks, cached for a stream now unused
        self.stats.capture_s = round(time.perf_counter() - start, 2)
        self.stats.buckets = list(self.bucket_sizes)
        late = [n for n in self.bucket_sizes if not self._at_load(n)]
        self.recorder.report(self.stats.capture_s, late, bool(self.options.compile))

    def _at_load(self, n: int) -> bool:
        limit = self.options.graphs_at_load
        return limit is None or n <= limit

    @torch.inference_mode()
    def _capture_late(self, bucket: _Bucket, cap: int) -> None:
        self._run(bucket, cap)  # this batch's pass; its graph is for the passes after it
        if cap in bucket.uncapturable:
            return
        what = f"bucket {bucket.num_tokens} (cap {cap})"
        graph, seconds = self.recorder.late(functools.partial(self._run, bucket, cap), what)
        if graph is None:
            bucket.uncapturable.add(cap)
            return
        bucket.graphs[cap] = graph
        self.stats.late_captures += 1
        self.stats.late_capture_s += seconds

    def stage(
        self,
        bucket: _Bucket,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        positions: torch.Tensor,
        cu_seqlens: torch.Tensor,
        head_index: torch.Tensor,
    ) -> None:
        """Copy one packed batch into a bucket's static inputs and pad the rest. When the bucket
        last staged the same layout tensors (the same batch's previous step), only the input ids
        are copied: a batch never changes its layout tensors in place."""
        i, n, num_segments = bucket.inputs, input_ids.shape[1], cu_seqlens.numel() - 1
        i["input_ids"][:, :n].copy_(input_ids)
        layout = (audio_mask, positions, cu_seqlens, head_index)
        if len(bucket.layout) == len(layout) and all(
            a is b for a, b in zip(bucket.layout, layout, strict=True)
        ):
            return
        bucket.layout = layout
        i["audio_mask"][:n].copy_(audio_mask)
        i["positions"][:n].copy_(positions)
        # Padding tokens belong to no segment: attention never computes them (an extra segment
        # would cost a full attention of its own), and every other layer works row by row, so
        # whatever they hold stays in their rows, which are never read.
        i["input_ids"][:, n:].fill_(0)
        i["audio_mask"][n:].fill_(False)
        i["positions"][n:].fill_(0)
        i["cu_seqlens"][: num_segments + 1].copy_(cu_seqlens)
        i["cu_seqlens"][num_segments + 1 :].fill_(n)
        i["head_index"][: head_index.numel()].copy_(head_index)

    def forward(self, *inputs: Any) -> torch.Tensor:
        """Logits [len(head_index), C, V] for one packed batch (the arguments of
        `OmniVoiceModel.forward_packed`), timed on the device."""
        self.stats.forward_passes += 1
        start = self._mark()
        logits = self._forward(*inputs)
        self._timers.append((start, self._mark()))
        return logits

    def end_batch(self) -> None:
        """After a batch's last step has been queued: mark its end. Its times are read later
        (`settle`), once the device has got there: waiting for that here would leave the device
        idle while the host prepares the next batch."""
        if not self._timers:
            return
        end = self._mark()
        with self._settling:
            self._ended.append(_EndedBatch(self._timers, end, self._last_batch_end))
            self._settle_reached(wait=False)  # those already finished, so the queue stays short
        self._timers = []
        self._last_batch_end = end

    def settle(self, wait: bool = False) -> dict[str, float]:
        """Add the device times of the ended batches the device has finished (all of them,
        waiting for the device, with `wait`) to the stats: their forward passes', each whole
        batch's and the gap before it. Returns the seconds added since the last call, for the
        caller to report: the sidecar's finisher calls it once a batch's audio is decoded."""
        with self._settling:
            self._settle_reached(wait)
            added, self._unreported = self._unreported, dict.fromkeys(DEVICE_TIMES, 0.0)
        return added

    def _settle_reached(self, wait: bool) -> None:
        """`settle` without the report (the caller holds the lock)."""
        while self._ended and (wait or _reached(self._ended[0].end)):
            batch = self._ended.popleft()
            if wait and not isinstance(batch.end, float):
                batch.end.synchronize()
            first = batch.timers[0][0]
            times = {
                "forward_s": sum(_elapsed(a, b) for a, b in batch.timers),
                "batch_s": _elapsed(first, batch.end),
                "gap_s": _elapsed(batch.after, first) if batch.after is not None else 0.0,
            }
            for key, seconds in times.items():
                setattr(self.stats, key, getattr(self.stats, key) + seconds)
                self._unreported[key] += seconds

    def _mark(self) -> Mark:
        """A point in the device's timeline: an event recorded on the current stream on a GPU
        (timed without waiting for it), the host's clock elsewhere."""
        if self.device.type != "cuda":
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _forward(
        self,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        positions: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
        head_index: torch.Tensor,
    ) -> torch.Tensor:
        n, m = input_ids.shape[1], head_index.numel()
        found = self.bucket_for(n, cu_seqlens.numel() - 1, max_seqlen) if self.use_graphs else None
        self.stats.real_tokens += n
        bucket, cap = found if found is not None else (None, 0)
        if bucket is None:
            if self.use_graphs:
                self.stats.graph_misses += 1
            self.stats.padded_tokens += n
            return self.model.head(
                self.hidden_fn(input_ids, audio_mask, positions, cu_seqlens, max_seqlen, head_index)
            )
        self.stage(bucket, input_ids, audio_mask, positions, cu_seqlens, head_index)
        self.stats.padded_tokens += bucket.num_tokens
        graph = bucket.graphs.get(cap)
        if graph is not None:
            self.stats.graph_hits += 1
            graph.replay()
        else:  # a bucket left for its first batch: the graph's kernels, run eagerly, then captured
            self.stats.graph_misses += 1
            self._capture_late(bucket, cap)
        return self.model.head(self.hidden_out[:m])
