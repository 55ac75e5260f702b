"""The reference decoding algorithm, run for a whole packed batch at once.

Each step: one forward pass over the packed batch (`sidecar.runtime.batch`), the network's head on the
target columns only, then for every item together: guidance on log-probabilities, MASK
forbidden, a token per position (argmax, or Gumbel over the top 10 % of classes), a confidence
score with the codebook layer penalty (plus Gumbel noise on positions), and each item's k most
confident masked positions revealed. No Python loop runs over items on this path.

Random numbers come from a counter-based hash of (the item's seed, step, position, class)
(`sidecar.runtime.noise`) rather than from a shared generator stream, so an item's output
depends on its own seed alone, never on the rest of its batch. With both temperatures 0 (the
deterministic settings) no random numbers are used and the tokens equal the reference's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import torch

from sidecar.runtime.batch import pack, padded_index
from sidecar.runtime.config import ModelConfig
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.noise import COUNTER_STRIDE, NOISE_CLASS, NOISE_POSITION, gumbel, uniform_noise

if TYPE_CHECKING:  # for annotations only
    from sidecar.runtime.runner import ModelRunner

TOP_K_RATIO = 0.1  # share of classes kept when sampling a token (class_temperature > 0)
# Position noise is made for this many steps at once: the hash and the Gumbel transform are ~20
# small launches, which at one item cost more than the step's scoring itself.
NOISE_STEPS = 8


@dataclass
class Prompt:
    """One item ready for the network: its conditional ids and how to decode it."""

    input_ids: torch.Tensor  # [C, c_len] long: style, text, reference audio, then MASK target
    audio_start: int  # first column of reference audio (or of the target)
    target_len: int
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    seed: int = 0
    schedule: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.schedule = unmask_schedule(
            self.target_len * self.input_ids.shape[0], self.num_step, self.t_shift
        )


@lru_cache(maxsize=64)
def _time_steps(num_step: int, t_shift: float) -> tuple[float, ...]:
    # float32 throughout, like the reference (torch's symmetric linspace, float32 shift).
    t = torch.linspace(0.0, 1.0, num_step + 1)
    t = t_shift * t / (1 + (t_shift - 1) * t)
    return tuple(t.tolist())


def unmask_schedule(num_masked: int, num_step: int, t_shift: float) -> list[int]:
    """How many positions each step reveals; the last step reveals whatever remains."""
    t = _time_steps(num_step, t_shift)
    remaining, counts = num_masked, []
    for step in range(num_step):
        if step == num_step - 1:
            k = remaining
        else:
            k = min(math.ceil(num_masked * (t[step + 1] - t[step])), remaining)
        counts.append(k)
        remaining -= k
    return counts


def upload(device: torch.device, **host: torch.Tensor) -> dict[str, torch.Tensor]:
    """Host tensors on `device`, by name: one copy per dtype (`to_device`), each tensor a view
    of its part. A copy costs the host tens of microseconds whatever its size, and a new batch
    state has some twenty tensors."""
    by_dtype: dict[torch.dtype, list[str]] = {}
    for name, tensor in host.items():
        by_dtype.setdefault(tensor.dtype, []).append(name)
    out: dict[str, torch.Tensor] = {}
    for names in by_dtype.values():
        flat = torch.cat([host[name].reshape(-1) for name in names])
        sizes = [host[name].numel() for name in names]
        for name, part in zip(names, to_device(flat, device).split(sizes)):
            out[name] = part.view(host[name].shape)
    return out


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`. On a GPU it is copied from pinned memory in the stream's order,
    without the host waiting: a plain copy from pageable memory would first wait for all the
    work already queued (a previous batch's last steps)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


class BatchState:
    """Device tensors of one running batch: the packed inputs, token state and per-item settings.

    Each item carries its own step. `start` (one per prompt: steps already run, and the target's
    tokens after them, or None for all MASK) lets an item continue in another batch where it
    left one; the batch's iterations are then counted from 0 and item i is at step
    `start[i][0] + iteration`. Its tokens come out the same as in one batch from the start,
    because nothing an item computes depends on the others (random numbers are a hash of its
    seed and its own step).
    """

    def __init__(
        self,
        model: OmniVoiceModel,
        prompts: Sequence[Prompt],
        runner: ModelRunner | None = None,
        start: Sequence[tuple[int, torch.Tensor | None]] | None = None,
    ) -> None:
        cfg = model.cfg
        self.runner = runner
        self.forward_packed = runner.forward if runner is not None else model.forward_packed
        device = model.codebook_layer_offsets.device
        self.model, self.prompts, self.mask_id = model, prompts, cfg.audio_mask_id
        packed = pack([(p.input_ids, p.audio_start, p.target_len) for p in prompts])
        self.packed = packed
        s = packed.num_targets
        start = start or [(0, None)] * len(prompts)
        first_steps = [done for done, _ in start]
        index, valid = padded_index(packed.target_offsets)
        # Everything a step indexes with is made here, once: a boolean mask, a repeat count or a
        # list made into a device tensor inside the loop would make the host wait for the GPU at
        # every step (a synchronisation), and the next step's launches would then start late.
        rows, cols = valid.nonzero(as_tuple=True)
        # Each target column's item, and its column within that item (class-sampling noise). In
        # numpy: torch's repeat_interleave on the host took most of a millisecond here, a third
        # of the host's work on a new batch state (bench/join_host.py --profile).
        item = np.repeat(np.arange(len(prompts)), [p.target_len for p in prompts])
        column = np.arange(s) - np.asarray(packed.target_offsets[:-1])[item]
        # Iterations until the last item's last step; k[j][i]: what item i reveals at iteration j.
        self.num_steps = max(p.num_step - done for p, done in zip(prompts, first_steps))
        self.k = [
            [
                p.schedule[done + j] if done + j < p.num_step else 0
                for p, done in zip(prompts, first_steps)
            ]
            for j in range(self.num_steps)
        ]

        def per_item(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32)

        # The host's tensors go up together (`upload`): the host prepares this batch while the
        # device still runs the previous one's last steps.
        up = upload(
            device,
            input_ids=packed.input_ids,
            audio_mask=packed.audio_mask,
            positions=packed.positions,
            cu_seqlens=packed.cu_seqlens,
            head_index=packed.head_index,
            pad_index=index,  # [B, Tmax]
            pad_valid=valid,
            valid_rows=rows,  # row-major, as a mask
            valid_cols=cols,
            target_cols=index[rows, cols],  # each item's real columns, in order
            target_item=torch.from_numpy(item.astype(np.int64)),
            target_t=torch.from_numpy(column.astype(np.int64)),
            guidance=per_item([p.guidance_scale for p in prompts]),
            class_temp=per_item([p.class_temperature for p in prompts]),
            position_temp=per_item([p.position_temperature for p in prompts]),
            penalty=per_item([p.layer_penalty_factor for p in prompts]),
            # Each item's step at iteration 0, for the noise (a function of the item's own step).
            first_step=torch.tensor(first_steps, dtype=torch.long),
            seed32=torch.tensor(
                [(p.seed ^ (p.seed >> 32)) & 0xFFFFFFFF for p in prompts], dtype=torch.long
            ),
            k_table=torch.tensor(self.k, dtype=torch.long),  # [steps, B]
        )
        self.input_ids, self.audio_mask = up["input_ids"], up["audio_mask"]
        self.positions, self.cu_seqlens = up["positions"], up["cu_seqlens"]
        self.head_index = up["head_index"]
        self.cond_cols = self.head_index[:s]
        self.uncond_cols = self.head_index[s:]
        self.pad_index, self.pad_valid = up["pad_index"], up["pad_valid"]
        self.valid_rows, self.valid_cols = up["valid_rows"], up["valid_cols"]
        self.target_cols = up["target_cols"]
        self.tokens = torch.full(
            (cfg.num_codebooks, s + 1), self.mask_id, dtype=torch.long, device=device
        )
        if any(tokens is not None for _, tokens in start):
            self._carry_tokens([tokens for _, tokens in start])
        self.target_item, self.target_t = up["target_item"], up["target_t"]
        self.guidance = up["guidance"][self.target_item]
        self.class_temp = up["class_temp"][self.target_item]
        self.position_temp = up["position_temp"].view(-1, 1, 1)
        self.position_noisy = self.position_temp > 0
        self.position_divisor = torch.where(self.position_noisy, self.position_temp, 1.0)
        self.penalty = up["penalty"].view(-1, 1, 1)
        self.first_step, self.seed32 = up["first_step"], up["seed32"]
        self.k_table = up["k_table"]
        self.layer = torch.arange(cfg.num_codebooks, device=device).view(1, -1, 1)
        self.layer_penalty = self.layer * self.penalty  # [B, C, 1]
        self.pad_invalid = ~self.pad_valid.unsqueeze(1)  # [B, 1, Tmax]
        t_max = index.shape[1]
        # (codebook, column) -> counter; independent of the batch's shape, so noise is per item.
        self.position_counter = self.layer * COUNTER_STRIDE + torch.arange(
            t_max, device=device
        ).view(1, 1, -1)
        self.any_guided = any(p.guidance_scale != 0 for p in prompts)
        self.all_guided = all(p.guidance_scale != 0 for p in prompts)
        self.any_class_sampling = any(p.class_temperature > 0 for p in prompts)
        # The scoring in one Triton kernel (sidecar/runtime/kernels/scoring.py) where the runner asks for it;
        # class sampling (top-k and noise) keeps the eager path.
        self.fused_scoring = (
            runner is not None and runner.fused_scoring and not self.any_class_sampling
        )
        self.any_position_noise = any(p.position_temperature > 0 for p in prompts)
        # Made once rather than at every step: each would be a launch of its own.
        self.sentinel = torch.full((1, cfg.num_codebooks), -float("inf"), device=device)
        self.rank = torch.arange(max(map(max, self.k), default=0), device=device).unsqueeze(0)
        self._noise_first, self._noise = -1, torch.empty(0, device=device)

    def _carry_tokens(self, carried: Sequence[torch.Tensor | None]) -> None:
        """Put each item's tokens so far into the token state and both rows' target columns."""
        parts = [
            t if t is not None else self.tokens[:, a:b]
            for t, a, b in zip(carried, self.packed.target_offsets, self.packed.target_offsets[1:])
        ]
        self.tokens[:, :-1] = torch.cat(parts, dim=1)
        new = self.tokens[:, :-1]
        self.input_ids[:, self.cond_cols] = new
        self.input_ids[:, self.uncond_cols] = new

    def logits(self) -> torch.Tensor:
        """Logits [2S, C, V] in the model's dtype: cond target columns, then uncond ones."""
        return self.forward_packed(
            self.input_ids,
            self.audio_mask,
            self.positions,
            self.cu_seqlens,
            self.packed.max_seqlen,
            self.head_index,
        )

    def forward(self) -> torch.Tensor:
        """The same logits in float32."""
        return self.logits().float()

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The distribution each target position decides from ([S, C, V] float32, from [2S, C, V]
        logits: cond target columns, then uncond ones): guided log-probabilities where the item's
        guidance is not 0, conditional ones where it is, MASK forbidden."""
        s = logits.shape[0] // 2
        lc = torch.log_softmax(logits[:s].float(), dim=-1)
        if self.any_guided:
            lu = torch.log_softmax(logits[s:].float(), dim=-1)
            g = self.guidance.view(-1, 1, 1)
            guided = torch.log_softmax(lc + g * (lc - lu), dim=-1)
            log_probs = guided if self.all_guided else torch.where(g != 0, guided, lc)
        else:
            log_probs = lc
        log_probs[..., self.mask_id] = -float("inf")
        return log_probs

    def choose(self, logits: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Token and confidence per target position ([S, C] each), as the reference scores them
        (`step`: the batch's iteration; each item's own step adds its `first_step`)."""
        if self.fused_scoring:
            from sidecar.runtime.kernels import scoring  # Triton: imported only where it runs

            return scoring.choose(logits, self.guidance, self.mask_id, self.any_guided)
        log_probs = self.log_probs(logits)
        tokens = log_probs.argmax(dim=-1)
        if self.any_class_sampling:
            k = math.ceil(TOP_K_RATIO * log_probs.shape[-1])
            values, classes = log_probs.topk(k, dim=-1)
            temp = self.class_temp.view(-1, 1, 1)
            item, t = self.target_item, self.target_t
            u = uniform_noise(
                self.seed32[item].view(-1, 1, 1),
                (self.first_step[item] + step).view(-1, 1, 1),
                NOISE_CLASS,
                (self.layer.view(1, -1, 1) * COUNTER_STRIDE + t.view(-1, 1, 1)),
                classes,
            )
            pick = (values / torch.where(temp > 0, temp, 1.0) + gumbel(u)).argmax(
                dim=-1, keepdim=True
            )
            tokens = torch.where(temp.view(-1, 1) > 0, classes.gather(-1, pick).squeeze(-1), tokens)
        return tokens, log_probs.max(dim=-1)[0]

    def position_gumbel(self, step: int) -> torch.Tensor:
        """The Gumbel noise of every position at `step` ([B, C, Tmax]), made for `NOISE_STEPS`
        steps at a time: bit for bit what `uniform_noise` and `gumbel` give for the step alone."""
        first = step - step % NOISE_STEPS
        if first != self._noise_first:
            last = min(first + NOISE_STEPS, self.num_steps)
            iterations = torch.arange(first, last, device=self.seed32.device).view(-1, 1, 1, 1)
            steps = iterations + self.first_step.view(1, -1, 1, 1)  # each item's own steps
            u = uniform_noise(
                self.seed32.view(1, -1, 1, 1), steps, NOISE_POSITION, self.position_counter
            )
            self._noise_first, self._noise = first, gumbel(u)
        return self._noise[step - first]

    def reveal(self, tokens: torch.Tensor, confidence: torch.Tensor, step: int) -> None:
        """Write each item's k most confident masked positions into the token state and inputs."""
        k = self.k[step]
        b, t_max = self.pad_index.shape
        num_cb = tokens.shape[1]
        # [B, C, Tmax]: each item's columns, padded with -inf confidence
        conf = torch.cat([confidence, self.sentinel])[self.pad_index].permute(0, 2, 1)
        pred = torch.cat([tokens, tokens[:1]])[self.pad_index].permute(0, 2, 1)
        current = self.tokens[:, self.pad_index].permute(1, 0, 2)  # [B, C, Tmax]
        scores = conf - self.layer_penalty
        if self.any_position_noise:
            noisy = scores / self.position_divisor + self.position_gumbel(step)
            scores = torch.where(self.position_noisy, noisy, scores)
        scores = scores.masked_fill((current != self.mask_id) | self.pad_invalid, -float("inf"))
        k_max = max(k)
        chosen = torch.topk(scores.reshape(b, -1), k_max, dim=1).indices  # [B, k_max]
        wanted = self.rank[:, :k_max] < self.k_table[step].unsqueeze(1)
        reveal = torch.zeros((b, num_cb * t_max), dtype=torch.bool, device=scores.device)
        reveal.scatter_(1, chosen, wanted)
        updated = torch.where(reveal.view(b, num_cb, t_max), pred, current)
        real = updated.permute(1, 0, 2)[:, self.valid_rows, self.valid_cols]  # [C, S]
        self.tokens[:, self.target_cols] = real
        new = self.tokens[:, :-1]
        self.input_ids[:, self.cond_cols] = new
        self.input_ids[:, self.uncond_cols] = new

    def item_tokens(self, i: int) -> torch.Tensor:
        """Item i's target tokens as they stand ([C, T_i], a view on the device)."""
        off = self.packed.target_offsets
        return self.tokens[:, off[i] : off[i + 1]]

    def result(self) -> list[torch.Tensor]:
        off = self.packed.target_offsets
        return [self.tokens[:, off[i] : off[i + 1]] for i in range(len(self.prompts))]


@torch.inference_mode()
def generate_tokens(
    model: OmniVoiceModel,
    prompts: Sequence[Prompt],
    on_step: Callable[[int, int], None] | None = None,
    runner: ModelRunner | None = None,
) -> list[torch.Tensor]:
    """Run one batch to completion; returns each item's tokens as a [C, T] long tensor."""
    state = BatchState(model, prompts, runner)
    passes = 0
    for step in range(state.num_steps):
        if max(state.k[step]) > 0:  # a step that reveals nothing would change nothing
            tokens, confidence = state.choose(state.logits(), step)
            state.reveal(tokens, confidence, step)
            passes += 1
        if on_step is not None:
            on_step(step + 1, state.num_steps)
    if runner is not None:
        runner.stats.useful_flops += passes * useful_flops(
            model.cfg, state.packed.segment_lens, state.packed.num_targets
        )
        runner.end_batch()
    return state.result()


def useful_flops(cfg: ModelConfig, segment_lens: Sequence[int], num_targets: int) -> float:
    """FLOPs of one packed forward pass with no padding: the matrix products of every token,
    bidirectional attention inside each segment, and the audio head on both rows' targets."""
    tokens = sum(segment_lens)
    head = 2 * (2 * num_targets) * cfg.hidden_size * cfg.num_codebooks * cfg.audio_vocab_size
    return 2.0 * tokens * cfg.num_parameters + attention_flops(cfg, segment_lens) + head


def attention_flops(cfg: ModelConfig, segment_lens: Sequence[int]) -> float:
    """The attention part of `useful_flops`: scores and weighted values inside each segment."""
    return 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * sum(n * n for n in segment_lens)
