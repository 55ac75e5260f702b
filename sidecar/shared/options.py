"""The sidecar's options that the supervisor sets, each declared once: its flag, default, choices
and help.

The supervisor declares its settings from these (supervisor/settings/sidecar_fields.py) and
passes them on (supervisor/supervision/sidecar_command.py); the sidecar's command line reads
the same declarations (sidecar/serve/main.py), and its runtime the same defaults and choices
(sidecar/runtime/options.py), so a default or a choice list is written here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T", int, str)

# The registry of the packed attention kernels a GPU in half precision can run, by the name the
# command line takes (sidecar/runtime/attention.py runs them); the first is the default.
ATTENTION_KERNELS: dict[str, str] = {
    "fa2": "FlashAttention-2, PyTorch's own",
    "cudnn": "cuDNN's fused attention on Hopper (the cudnn extra)",
}

# Interactive work beside the bulk batch (sidecar/runtime/interleave.py): in the bulk batch's
# steps (off), or in a stepper, runner and CUDA stream of its own at the bulk's priority or at
# the device's highest.
INTERACTIVE_STREAMS = ("off", "equal", "high")


@dataclass(frozen=True)
class SidecarOption(Generic[T]):
    """One option of `python -m sidecar` that the supervisor passes on."""

    flag: str  # the sidecar's own flag
    default: T
    help: str
    choices: tuple[str, ...] | None = None


WARMUP_STEPS = SidecarOption[int](
    "--warmup-steps",
    2,
    "denoising steps of the warm-up generation before a sidecar reports ready (0: none)",
)
STEP_TOKENS = SidecarOption[int](
    "--step-tokens",
    4096,
    "while an interactive request runs beside a bulk batch, each denoising step holds it and "
    "bulk items up to this many tokens; the other bulk items wait (0: all wait)",
)
ATTENTION = SidecarOption[str](
    "--attention",
    next(iter(ATTENTION_KERNELS)),
    "GPU attention kernel: " + "; ".join(f"{k}: {v}" for k, v in ATTENTION_KERNELS.items()),
    choices=tuple(ATTENTION_KERNELS),
)
INTERACTIVE_STREAM = SidecarOption[str](
    "--interactive-stream",
    INTERACTIVE_STREAMS[0],
    "interactive work beside bulk on a CUDA stream of its own",
    choices=INTERACTIVE_STREAMS,
)

# The sidecar's command line, in this order (sidecar/serve/main.py).
SIDECAR_OPTIONS: tuple[SidecarOption[Any], ...] = (
    WARMUP_STEPS,
    STEP_TOKENS,
    ATTENTION,
    INTERACTIVE_STREAM,
)
