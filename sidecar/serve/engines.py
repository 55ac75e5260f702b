"""What a sidecar serves: the OmniVoice runtime, or the no-model null engine.

The null engine (`--engine null`) answers every request with silence of the estimated
duration after calling `on_step` for each of its steps. It loads in milliseconds and needs no
checkpoint or torch, so it measures the supervisor's own overhead and lets the process
machinery be exercised without a model. The sidecar talks to either through `Engine`.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from sidecar.runtime.priority import choose
from sidecar.runtime.request import GenerationRequest, GenerationResult, VoicePrompt
from sidecar.shared.duration import FRAME_RATE, target_tokens
from sidecar.shared.options import ATTENTION, INTERACTIVE_STREAM
from sidecar.shared.tiers import Tier

ProgressCallback = Callable[[str], None]
StepCallback = Callable[[int, int], None]

ENGINES = ("omnivoice", "null")


class Stepper(Protocol):
    """`sidecar.runtime.stepper.Stepper`'s surface: add groups of requests, step until idle;
    each finished group comes back with one opaque `pending` per request that was not refused."""

    @property
    def busy(self) -> bool: ...

    @property
    def holds_bulk(self) -> bool: ...  # a group of the bulk tier is not yet denoised

    def add(
        self,
        key: Hashable,
        requests: Sequence[GenerationRequest],
        tier: Tier = Tier.BULK,
        on_step: StepCallback | None = None,
    ) -> list[Exception | None]: ...

    def step(self) -> Sequence[tuple[Hashable, Sequence[Any]]]: ...

    def abandon(self) -> list[Hashable]: ...


class Engine(Protocol):
    """`generate` = `decode(denoise(...))`. The sidecar calls the halves apart, so that one batch
    decodes (in a thread) while the next denoises; `denoise` returns one opaque value per request."""

    @property
    def sample_rate(self) -> int: ...

    def generate(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> list[GenerationResult]: ...

    def denoise(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> Sequence[object]: ...

    def decode(
        self,
        denoised: Sequence[Any],
        timings: dict[str, float] | None = None,
        tier: Tier = Tier.BULK,
    ) -> list[GenerationResult]: ...

    def stepper(self, step_tokens: int) -> Stepper:
        """A running batch that requests join between steps (`sidecar.runtime.stepper`)."""
        ...

    def wait_denoised(self, denoised: Sequence[Any]) -> None:
        """Return once the device has run the steps that made these tokens."""
        ...

    def encode_voice(
        self, audio: np.ndarray, sample_rate: int, ref_text: str, preprocess: bool = True
    ) -> VoicePrompt: ...

    def stats(self) -> dict[str, float | int]: ...

    def device_times(self) -> dict[str, float]: ...


class NullEngine:
    """Silence of the estimated duration; no model, no torch."""

    sample_rate = 24000
    num_codebooks = 8

    def stats(self) -> dict[str, float | int]:
        return {}  # no forward passes to count

    def device_times(self) -> dict[str, float]:
        return {}

    def wait_denoised(self, denoised: Sequence[Any]) -> None:
        pass  # denoise ran on the host, to the end

    def generate(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> list[GenerationResult]:
        return self.decode(self.denoise(requests, on_step))

    def denoise(
        self, requests: Sequence[GenerationRequest], on_step: StepCallback | None = None
    ) -> list[GenerationRequest]:
        num_step = max((r.num_step for r in requests), default=0)
        for step in range(1, num_step + 1):
            if on_step is not None:
                on_step(step, num_step)
        return list(requests)

    def stepper(self, step_tokens: int) -> NullStepper:
        return NullStepper(step_tokens)

    def decode(
        self,
        requests: Sequence[GenerationRequest],
        timings: dict[str, float] | None = None,
        tier: Tier = Tier.BULK,
    ) -> list[GenerationResult]:
        results = []
        for r in requests:
            frames = null_frames(r)
            audio = np.zeros(frames * self.sample_rate // FRAME_RATE, dtype=np.float32)
            tokens = (
                [np.zeros((self.num_codebooks, frames), dtype=np.int64)] if r.return_tokens else []
            )
            results.append(
                GenerationResult(
                    audio=audio, sample_rate=self.sample_rate, tokens=tokens, seed=r.seed
                )
            )
        return results

    def encode_voice(
        self, audio: np.ndarray, sample_rate: int, ref_text: str, preprocess: bool = True
    ) -> VoicePrompt:
        frames = max(1, len(audio) * FRAME_RATE // max(1, sample_rate))
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if len(audio) else 0.0
        return VoicePrompt(
            tokens=np.zeros((self.num_codebooks, frames), dtype=np.int64),
            ref_text=ref_text,
            ref_rms=rms,
        )


def null_frames(r: GenerationRequest) -> int:
    """The frames of the null engine's silence: the duration asked for, or the estimate."""
    if r.duration is not None:
        return max(1, int(r.duration * FRAME_RATE))
    num_ref = r.voice.tokens.shape[1] if r.voice is not None else None
    return target_tokens(r.text, r.voice.ref_text if r.voice else None, num_ref, speed=r.speed)


@dataclass(eq=False)
class _NullMember:
    key: Hashable
    request: GenerationRequest
    tier: Tier
    on_step: StepCallback | None
    step: int = 0

    @property
    def cost(self) -> int:
        return 2 * null_frames(self.request)


class NullStepper:
    """The `Stepper` of the null engine: each request counts its steps, under the same
    priority rule (`sidecar.runtime.priority`), so joins and pauses behave as on a model."""

    def __init__(self, step_tokens: int, max_members: int = 64) -> None:
        self.step_tokens, self.max_members = step_tokens, max_members
        self.members: list[_NullMember] = []
        self.groups: dict[Hashable, list[_NullMember]] = {}

    @property
    def busy(self) -> bool:
        return bool(self.groups)

    @property
    def holds_bulk(self) -> bool:
        return any(group[0].tier is Tier.BULK for group in self.groups.values())

    def add(
        self,
        key: Hashable,
        requests: Sequence[GenerationRequest],
        tier: Tier = Tier.BULK,
        on_step: StepCallback | None = None,
    ) -> list[Exception | None]:
        group = [_NullMember(key, r, tier, on_step) for r in requests]
        if group:
            self.groups[key] = group
            self.members += group
        return [None] * len(requests)  # silence of any text

    def step(self) -> list[tuple[Hashable, list[GenerationRequest]]]:
        chosen = choose(self.members, self.step_tokens, self.max_members, 1 << 62)
        for member in chosen:
            member.step += 1
        for key in dict.fromkeys(m.key for m in chosen):
            group = self.groups[key]
            if group[0].on_step is not None:
                group[0].on_step(max(m.step for m in group), max(m.request.num_step for m in group))
        done = [k for k, g in self.groups.items() if all(m.step >= m.request.num_step for m in g)]
        finished = []
        for key in done:
            group = self.groups.pop(key)
            self.members = [m for m in self.members if m.key != key]
            finished.append((key, [m.request for m in group]))
        return finished

    def abandon(self) -> list[Hashable]:
        keys = list(self.groups)
        self.groups, self.members = {}, []
        return keys


@dataclass(frozen=True)
class EngineSpec:
    """Which engine a sidecar loads, from what, where: its command line's choices."""

    name: str  # one of ENGINES
    source: str  # a checkpoint directory or Hugging Face id
    device: str  # a torch device: cpu, cuda:0
    dtype: str  # resolved (`resolve_dtype`)
    attention: str = ATTENTION.default  # `RuntimeOptions.attention`
    interactive_stream: str = INTERACTIVE_STREAM.default  # `RuntimeOptions.interactive_stream`


def load_engine(
    spec: EngineSpec, on_progress: ProgressCallback, park: Callable[[], None] | None = None
) -> Engine:
    """Load the named engine; the OmniVoice runtime (and torch) is imported only here. With
    `park` (a spare, sidecar/serve/spare.py), what needs no device is loaded first, then `park`
    returns once the device may be used (or raises to end the start)."""
    if spec.name == "null":
        on_progress("null engine")
        if park is not None:
            park()
        return NullEngine()
    on_progress("torch")  # the import alone: the start's log tells it from the rest
    import torch  # noqa: F401

    on_progress("import")
    from sidecar.runtime.omnivoice import OmniVoice
    from sidecar.runtime.options import DEFAULT_OPTIONS

    options = replace(
        DEFAULT_OPTIONS, attention=spec.attention, interactive_stream=spec.interactive_stream
    )
    host = None
    if park is not None:
        from sidecar.runtime.preload import load_on_host

        host = load_on_host(spec.source, spec.dtype, on_progress)
        park()
    return OmniVoice.load(
        spec.source, spec.device, spec.dtype, on_progress, options=options, host=host
    )


def resolve_dtype(dtype: str, device: str) -> str:
    """'auto' is bfloat16 on a GPU and float32 on the CPU."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if device.startswith("cuda") else "float32"


# ---------------------------------------------------------------- device facts
#
# torch is consulted only when the engine already imported it, so the null engine stays light.


def _torch() -> Any:  # the torch module, or None
    return sys.modules.get("torch")


def is_out_of_memory(exc: BaseException) -> bool:
    """A device or host allocation failure, which a smaller batch may avoid."""
    if isinstance(exc, MemoryError):
        return True
    torch = _torch()
    if torch is not None and isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def is_device_fatal(exc: BaseException) -> bool:
    """A CUDA error that poisons the context (illegal access, device assert): only a new process helps."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "illegal memory access" in text
        or "device-side assert" in text
        or "CUDA error: unspecified launch failure" in text
    )


def release_cached_memory() -> None:
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def memory_stats(device: str) -> dict[str, int]:
    """Peak host RSS, and the device allocator's figures on a GPU."""
    stats = {"max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    torch = _torch()
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
        stats["cuda_allocated_bytes"] = int(torch.cuda.memory_allocated())
        stats["cuda_reserved_bytes"] = int(torch.cuda.memory_reserved())
        stats["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    return stats
