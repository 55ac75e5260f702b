"""`RunnerStats`: what a `ModelRunner` counts while it runs (forward passes, tokens, CUDA graph
hits, the device's and the host's seconds), which the sidecar reports with each batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEVICE_TIMES = ("forward_s", "batch_s", "gap_s")  # the fields that `ModelRunner.settle` adds to


@dataclass
class RunnerStats:
    """Cumulative figures since the runner started; the sidecar reports them with each batch."""

    forward_passes: int = 0
    graph_hits: int = 0
    graph_misses: int = 0
    padded_tokens: int = 0  # tokens computed, padding included
    real_tokens: int = 0
    useful_flops: float = 0.0  # 2 x real tokens x parameters + attention + head on targets
    # Device time (CUDA events on a GPU, the host's clock elsewhere), added up once the device
    # has finished each batch (ModelRunner.settle): its forward passes; the batch from its first
    # forward pass to the end of its last step; the gap before it since the previous batch's
    # end (host preparation, or no work).
    forward_s: float = 0.0
    batch_s: float = 0.0
    gap_s: float = 0.0
    # The host's seconds (its clock, not the device's) in the stepper: building batch states
    # (`Stepper._build`), and waiting for the device under the bound on queued steps
    # (`Stepper._pace`). Beside `gap_s` they say whether a gap was the host's work or the
    # host was ahead.
    build_s: float = 0.0
    paced_s: float = 0.0
    capture_s: float = 0.0  # the graphs captured at load, their compilation and warm-up included
    late_captures: int = 0  # graphs captured at their bucket's first batch (graphs_at_load)
    late_capture_s: float = 0.0
    buckets: list[int] = field(default_factory=list)

    def counts(self) -> dict[str, float | int]:
        """The figures the host adds up as it queues the work (not the settled device times)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("buckets", *DEVICE_TIMES)}
