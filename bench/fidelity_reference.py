"""The reference's side of the fidelity run: the states it captured, and its own bf16 variants.

A variant is a way the reference itself runs in bf16 that is as valid as any other: the spread
of their logits against float32 is rounding, not defect, and makes the gate's band
(`bench/fidelity_gate.py`). Each gives the target logits of the same captured states:

- `sdpa`: the reference as it runs (transformers' SDPA attention, PyTorch's choice of kernel);
- `sdpa_math`, `sdpa_efficient`, `sdpa_cudnn`: SDPA held to one backend (one that cannot take
  the reference's boolean mask, or is not there, is skipped and the result says why);
- `eager`: transformers' eager attention (matrix products and a float32 softmax), the boolean
  mask given as the additive mask eager attention needs;
- `compiled`: the SDPA model under `torch.compile` (Inductor, dynamic shapes);
- `batch_seed1`, `batch_seed2`: the same items batched otherwise, shuffled by the seed into
  generate() calls of BATCH_ITEMS: other companions, other padding, other matrix shapes.

Bench only: drives the reference's model (omnivoice 0.2.1), imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from sidecar.runtime.generate import Prompt

GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}
NUM_STEP = 32
DEFAULT = "sdpa"
VARIANTS = (
    "sdpa",
    "sdpa_math",
    "sdpa_efficient",
    "sdpa_cudnn",
    "eager",
    "compiled",
    "batch_seed1",
    "batch_seed2",
)
BATCH_ITEMS = 16  # the batch_seed variants' generate() calls (the capture's are 32)


@dataclass
class State:
    """The reference's padded batch as it entered the network at one step of one generate()."""

    group: int
    step: int
    input_ids: torch.Tensor  # [2B, C, L]
    audio_mask: torch.Tensor  # [2B, L]
    attention_mask: torch.Tensor  # [2B, 1, L, L]

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0] // 2

    def layout(self) -> list[tuple[int, int, int]]:
        """(c_len, target_len, audio_start) per item, read off the reference's masks."""
        b, out = self.rows, []
        for i in range(b):
            c_len = int(self.attention_mask[i, 0, 0].sum())
            t_len = int(self.attention_mask[b + i, 0, 0].sum())
            out.append((c_len, t_len, int(self.audio_mask[i].nonzero()[0])))
        return out

    def prompts(self) -> list[Prompt]:
        """Our prompts holding this state: cond ids with the target revealed so far."""
        return [
            Prompt(self.input_ids[i, :, :c].cpu(), a, t, num_step=NUM_STEP, **GREEDY)
            for i, (c, t, a) in enumerate(self.layout())
        ]

    def item(self, i: int) -> Item:
        """Item i's cond and uncond rows, unpadded."""
        b, (c, t, _) = self.rows, self.layout()[i]
        return Item(
            self.input_ids[i, :, :c],
            self.audio_mask[i, :c],
            self.input_ids[b + i, :, :t],
            self.audio_mask[b + i, :t],
        )

    def to_targets(self, logits: torch.Tensor) -> torch.Tensor:
        """Reference logits [2B, C, L, V] -> our target layout [2S, C, V] (cond, then uncond)."""
        b, lay = self.rows, self.layout()
        cond = [logits[i, :, c - t : c] for i, (c, t, _) in enumerate(lay)]
        uncond = [logits[b + i, :, :t] for i, (_, t, _) in enumerate(lay)]
        return targets(cond, uncond)


@dataclass
class Item:
    """One item's rows as the reference batches them: cond (the whole prompt) and uncond (the
    target alone)."""

    cond_ids: torch.Tensor  # [C, c_len]
    cond_audio: torch.Tensor  # [c_len]
    uncond_ids: torch.Tensor  # [C, t_len]
    uncond_audio: torch.Tensor  # [t_len]


def targets(cond: list[torch.Tensor], uncond: list[torch.Tensor]) -> torch.Tensor:
    """Per-item target logits [C, t, V] -> [2S, C, V], every cond row first (our layout)."""
    return torch.cat(cond + uncond, dim=1).permute(1, 0, 2).float()


def pad(items: list[Item], pad_id: int) -> State:
    """A batch as the reference's generate() pads it: cond rows, then uncond rows, padded on
    the right with pad_id; each row attends within itself, an uncond row's padding to itself."""
    b, c = len(items), items[0].cond_ids.shape[0]
    length = max(it.cond_ids.shape[-1] for it in items)
    dev = items[0].cond_ids.device
    ids = torch.full((2 * b, c, length), pad_id, dtype=torch.long, device=dev)
    audio = torch.zeros((2 * b, length), dtype=torch.bool, device=dev)
    mask = torch.zeros((2 * b, 1, length, length), dtype=torch.bool, device=dev)
    for i, it in enumerate(items):
        c_len, t_len = it.cond_ids.shape[-1], it.uncond_ids.shape[-1]
        ids[i, :, :c_len], audio[i, :c_len] = it.cond_ids, it.cond_audio
        mask[i, :, :c_len, :c_len] = True
        ids[b + i, :, :t_len], audio[b + i, :t_len] = it.uncond_ids, it.uncond_audio
        mask[b + i, :, :t_len, :t_len] = True
        diag = torch.arange(t_len, length, device=dev)
        mask[b + i, :, diag, diag] = True
    return State(-1, -1, ids, audio, mask)


Forward = Callable[[State], torch.Tensor]  # a state -> the network's logits [2B, C, L, V]


def regrouped(forward: Forward, states: list[State], seed: int, size: int, pad_id: int) -> list:
    """Target logits of each state's items, run in other batches: all items of the states
    shuffled by `seed`, `size` a batch; returned in each state's own layout."""
    where = [(k, i) for k, s in enumerate(states) for i in range(s.rows)]
    order = torch.randperm(len(where), generator=torch.Generator().manual_seed(seed)).tolist()
    cond: dict[tuple[int, int], torch.Tensor] = {}
    uncond: dict[tuple[int, int], torch.Tensor] = {}
    for at in range(0, len(order), size):
        part = [where[j] for j in order[at : at + size]]
        batch = pad([states[k].item(i) for k, i in part], pad_id)
        logits, b = forward(batch), len(part)
        for r, ((c, t, _), key) in enumerate(zip(batch.layout(), part)):
            cond[key] = logits[r, :, c - t : c].float()  # copies: the batch's logits can go
            uncond[key] = logits[b + r, :, :t].float()
        del logits
    return [
        targets([cond[k, i] for i in range(s.rows)], [uncond[k, i] for i in range(s.rows)])
        for k, s in enumerate(states)
    ]


@contextmanager
def attention(model: Any, implementation: str) -> Iterator[None]:
    """The reference's backbone on another transformers attention implementation, for a while."""
    llm = model.llm
    before = llm.config._attn_implementation
    llm.set_attn_implementation(implementation)
    try:
        yield
    finally:
        llm.set_attn_implementation(before)


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask as eager attention adds it to the scores (transformers passes a
    4-D mask through untouched, and eager attention adds it)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
        ~mask, torch.finfo(dtype).min
    )


def sdpa_backend(name: str) -> AbstractContextManager[Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {
        "sdpa_math": SDPBackend.MATH,
        "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
        "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
    }[name]
    return sdpa_kernel([backend])


def finite(logits: Any) -> Any:
    """The logits (a tensor, or a list of them), or ValueError where one is NaN or infinite: such
    a variant is a failed kernel, and a NaN would slip through every comparison of the gate."""
    for x in logits if isinstance(logits, list) else [logits]:
        if not bool(torch.isfinite(x).all()):
            raise ValueError("logits not finite")
    return logits


class Variants:
    """The reference's bf16 variants over one model; those that cannot run are skipped, with
    the reason, and measured nowhere."""

    def __init__(self, model: Any, names: list[str]) -> None:
        if DEFAULT not in names:
            names = [DEFAULT, *names]
        self.model = model
        self.names = [n for n in VARIANTS if n in names]
        unknown = set(names) - set(VARIANTS)
        if unknown:
            raise ValueError(f"unknown variants: {sorted(unknown)}")
        self.skipped: dict[str, str] = {}
        self.compiled: Any = None
        self.pad_id = int(model.config.audio_mask_id)

    def forward(self, state: State, module: Any = None, eager_mask: bool = False) -> torch.Tensor:
        mask = state.attention_mask
        if eager_mask:
            mask = additive(mask, self.model.dtype)
        with torch.inference_mode():
            return (self.model if module is None else module)(
                input_ids=state.input_ids, audio_mask=state.audio_mask, attention_mask=mask
            ).logits

    def _one(self, name: str, state: State) -> torch.Tensor:
        """One state's target logits in one (not batch_seed) variant."""
        if name == "eager":
            with attention(self.model, "eager"):
                return state.to_targets(self.forward(state, eager_mask=True))
        if name == "compiled":
            if self.compiled is None:
                self.compiled = torch.compile(self.model, dynamic=True)
            return state.to_targets(self.forward(state, self.compiled))
        scope = sdpa_backend(name) if name.startswith("sdpa_") else nullcontext()
        with scope:
            return state.to_targets(self.forward(state))

    def _guard(self, name: str, run: Callable[[], Any]) -> Any:
        """run(), or None with `name` skipped from now on when the variant cannot run here."""
        if name in self.skipped:
            return None
        try:
            return finite(run())
        except (RuntimeError, NotImplementedError, ValueError, AssertionError) as e:
            if name == DEFAULT:
                raise
            self.skipped[name] = f"{type(e).__name__}: {e}"[:400]
            return None

    def at_step(
        self, states: list[State]
    ) -> Iterator[tuple[State, Iterator[tuple[str, torch.Tensor]]]]:
        """For each of one step's states, its (variant, target logits) pairs, lazily: the
        batch_seed variants run over all the step's states first."""
        batched = {
            n: self._guard(
                n,
                lambda n=n: regrouped(
                    self.forward,
                    states,
                    int(n.removeprefix("batch_seed")),
                    BATCH_ITEMS,
                    self.pad_id,
                ),
            )
            for n in self.names
            if n.startswith("batch_seed")
        }
        for k, state in enumerate(states):
            yield state, self._each(state, {n: r[k] for n, r in batched.items() if r is not None})

    def _each(
        self, state: State, batched: dict[str, torch.Tensor]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        for name in self.names:
            if name in batched:
                yield name, batched[name]
            elif not name.startswith("batch_seed"):
                logits = self._guard(name, lambda name=name: self._one(name, state))
                if logits is not None:
                    yield name, logits
