"""Capturing the runner's CUDA graphs, and what a start spent on compiling and capturing.

`Recorder.record` is `torch.cuda.graph` without what that context does before every capture: a
device-wide synchronize and an `empty_cache`, which made each of a start's fifty captures give
back the memory the next warm-up pass then allocated again, and which in the middle of serving
would stall the queued work and drop the codec's cached blocks. Its capture mode is
thread-local: a graph captured at its bucket's first batch (`RuntimeOptions.graphs_at_load`)
leaves the finisher thread free to decode meanwhile, where the global mode would fail that
thread's CUDA calls. Forward passes and captures both run on the frame loop's thread, one after
the other, so a forward never races a capture.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

Run = Callable[[], None]  # one forward pass of a bucket at one attention cap


@dataclass
class StartTimes:
    """Where a start's graph work went, in seconds of the host's clock (the device waited for
    after each pass): the first forward pass, which traces and compiles the layer stack (or
    reads it from the compile cache); the other warm-up passes, one per graph; the recording."""

    compile_s: float = 0.0
    warmup_s: float = 0.0
    record_s: float = 0.0
    graphs: int = 0

    def summary(self) -> str:
        return (
            f"first pass (compilation) {self.compile_s:.1f} s, other warm-up passes "
            f"{self.warmup_s:.1f} s, recording {self.record_s:.1f} s"
        )


class Recorder:
    """Records graphs into one shared memory pool, on a capture stream of its own, whose
    `priority` the graphs' kernels keep wherever they are replayed (PyTorch instantiates them
    with per-node priorities)."""

    def __init__(self, priority: int = 0) -> None:
        self.priority = priority
        self.pool: Any = None  # the first graph's pool, once there is one
        self.stream: torch.cuda.Stream | None = None
        self.times = StartTimes()

    def record(self, run: Run) -> torch.cuda.CUDAGraph:
        """`run`'s kernels as a graph; nothing runs on the device."""
        if self.stream is None:
            self.stream = torch.cuda.Stream(priority=self.priority)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream):
            graph.capture_begin(pool=self.pool, capture_error_mode="thread_local")
            try:
                run()
            finally:
                graph.capture_end()
        self.pool = graph.pool()
        return graph

    def at_load(self, run: Run, warm: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
        """Warm up, off the default stream (twice for the first graph: torch.compile traces,
        compiles and autotunes there), then record; each part timed to the device's end."""
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            for i in range(2 if self.times.graphs == 0 else 1):
                began = time.perf_counter()
                run()
                warm.synchronize()
                seconds = time.perf_counter() - began
                if self.times.graphs == 0 and i == 0:
                    self.times.compile_s = seconds
                else:
                    self.times.warmup_s += seconds
        torch.cuda.current_stream().wait_stream(warm)
        began = time.perf_counter()
        graph = self.record(run)
        self.times.record_s += time.perf_counter() - began
        self.times.graphs += 1
        return graph

    def late(self, run: Run, what: str) -> tuple[torch.cuda.CUDAGraph | None, float]:
        """A graph captured while serving (after the pass ran eagerly), and the seconds it
        took; None when the capture failed: the pass then keeps running eagerly, a graph being
        an optimisation and never a reason to fail a batch."""
        began = time.perf_counter()
        try:
            graph = self.record(run)
        except Exception as exc:
            log.warning(
                "no CUDA graph for %s: %s: %s; it runs without one", what, type(exc).__name__, exc
            )
            return None, 0.0
        seconds = time.perf_counter() - began
        log.info("captured the graph of %s at its first batch in %.3f s", what, seconds)
        return graph, seconds

    def report(self, capture_s: float, late: list[int], compiled: bool) -> None:
        """The start's log line: where the time went, and what torch.compile did."""
        log.info(
            "captured %d CUDA graphs in %.1f s (%s); at their first batch: %s; torch.compile: %s",
            self.times.graphs,
            capture_s,
            self.times.summary(),
            f"buckets {','.join(map(str, late))}" if late else "none",
            compile_counts() if compiled else "off",
        )
        if compiled:
            log.info("compile phases: %s", compile_phases())


COMPILE_COUNTERS = (
    ("stats", "unique_graphs", "graphs traced"),
    ("inductor", "fxgraph_cache_hit", "FX graph cache hits"),
    ("inductor", "fxgraph_cache_miss", "misses"),
    ("inductor", "fxgraph_cache_bypass", "bypasses"),
    ("aot_autograd", "autograd_cache_hit", "AOTAutograd cache hits"),
    ("aot_autograd", "autograd_cache_miss", "misses"),
    ("aot_autograd", "autograd_cache_guard_miss", "of them guard misses"),
    ("aot_autograd", "autograd_cache_bypass", "bypasses"),
)
# torch.compile's phases (its `dynamo_timed` regions, seconds summed over the process), for the
# start's second log line: where a compilation that hits the cache still spends its time.
COMPILE_PHASES = (
    ("bytecode_tracing", "dynamo tracing"),
    ("compile_attempt_1", "a second trace"),
    ("create_aot_dispatcher_function", "AOTAutograd"),
    ("compile_fx.<locals>.fw_compiler_base", "Inductor"),
    ("async_compile.wait", "of it kernels compiled or loaded"),
    ("build_guards", "guards"),
)


def compile_counts() -> str:
    """torch.compile's counters so far, for the log: more graphs traced than compiled functions
    means recompilations, and a warm compile cache shows as hits."""
    from torch._dynamo.utils import counters

    return ", ".join(f"{what} {counters[group][key]}" for group, key, what in COMPILE_COUNTERS)


def compile_phases() -> str:
    """torch.compile's time so far by phase, those that ran, for the log (never an error: a
    start must not fail, or compile again, for a log line)."""
    from torch._dynamo.utils import compile_times

    try:
        names, seconds = compile_times("csv", aggregate=True)
        spent = {name: float(str(s)) for name, s in zip(names, seconds, strict=True)}
    except Exception as exc:  # a torch whose timing tables differ
        return f"unknown ({type(exc).__name__}: {exc})"
    return (
        ", ".join(f"{what} {spent[key]:.1f} s" for key, what in COMPILE_PHASES if key in spent)
        or "none"
    )
