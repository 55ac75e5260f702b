"""Scoring in the fidelity measurement (`bench/fidelity.py`): every arm's logits through the same
decision code (`sidecar.runtime.generate.BatchState`: guidance, MASK forbidden, per-item top-k
reveal), and the sums over a step's states: each arm against the float32 reference (`Tally`),
ours against the reference's bf16 paired position by position (`Discord`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sidecar.runtime.generate import BatchState, Prompt
from sidecar.runtime.omnivoice import OmniVoice as Ours


def batch_state(ours: Ours, prompts: list[Prompt]) -> BatchState:
    """Our batch holding the prompts' partially revealed targets, in the sidecar's runner."""
    state = BatchState(ours.model, prompts, ours.runner)
    state.tokens[:, :-1] = state.input_ids[:, state.cond_cols]
    return state


def decide(state: BatchState, logits: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(guided log-probs [S, C, V], the tokens after this step's reveal [S, C]); state unchanged."""
    tokens_before, ids_before = state.tokens.clone(), state.input_ids.clone()
    log_probs = state.log_probs(logits.clone())
    state.reveal(*state.choose(logits.clone(), step), step)
    after = state.tokens[:, :-1].T.clone()
    state.tokens.copy_(tokens_before)
    state.input_ids.copy_(ids_before)
    return log_probs, after


@dataclass
class Tally:
    """Sums over the states of one step, for one arm against the float32 reference."""

    kl_sum: float = 0.0
    masked: int = 0
    top1_hits: int = 0
    revealed: int = 0
    argmax_equal: int = 0
    max_abs_logit_diff: float = 0.0
    hits: torch.Tensor | None = None  # the last add()'s positions revealed as (a) did

    def add(
        self,
        ref: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        arm: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        masked: torch.Tensor,
        mask_id: int,
    ) -> int:
        """Count one state; returns the number of positions (a) reveals in it."""
        (logits_a, lp_a, after_a), (logits_x, lp_x, after_x) = ref, arm
        keep = torch.arange(lp_a.shape[-1], device=lp_a.device) != mask_id
        la, lx = lp_a[..., keep], lp_x[..., keep]
        kl = (la.exp() * (la - lx)).sum(-1)  # [S, C]
        self.kl_sum += float(kl[masked].double().sum())
        self.masked += int(masked.sum())
        revealed_a = masked & (after_a != mask_id)
        revealed_x = masked & (after_x != mask_id)
        self.hits = revealed_a & revealed_x & (after_a == after_x)  # for the paired comparison
        self.top1_hits += int(self.hits.sum())
        self.revealed += int(revealed_a.sum())
        self.argmax_equal += int((lp_a.argmax(-1) == lp_x.argmax(-1))[masked].sum())
        diff = float((logits_x - logits_a).abs().max())
        self.max_abs_logit_diff = max(self.max_abs_logit_diff, diff)
        return int(revealed_a.sum())

    def result(self) -> dict[str, float]:
        return {
            "kl": self.kl_sum / self.masked,
            "top1": self.top1_hits / self.revealed,
            "argmax_agreement": self.argmax_equal / self.masked,
            "max_abs_logit_diff": self.max_abs_logit_diff,
            "masked": self.masked,
            "revealed": self.revealed,
        }


@dataclass
class Discord:
    """The revealed positions where exactly one of (b) and (c) chose as (a) did: the paired
    difference of their top1 and its standard error (as McNemar's test counts them)."""

    ref_only: int = 0
    ours_only: int = 0
    revealed: int = 0

    def add(self, ref: Tally, ours: Tally, revealed: int) -> None:
        assert ref.hits is not None and ours.hits is not None
        self.ref_only += int((ref.hits & ~ours.hits).sum())
        self.ours_only += int((ours.hits & ~ref.hits).sum())
        self.revealed += revealed

    def merged(self, other: Discord) -> Discord:
        return Discord(
            self.ref_only + other.ref_only,
            self.ours_only + other.ours_only,
            self.revealed + other.revealed,
        )

    def result(self) -> dict[str, float]:
        n, b, c = self.revealed, self.ref_only, self.ours_only
        se = math.sqrt(max(0.0, b + c - (c - b) ** 2 / n)) / n if n else 0.0
        return {
            "ours_minus_ref": (c - b) / n if n else 0.0,
            "standard_error": se,
            "ref_only": b,
            "ours_only": c,
        }
