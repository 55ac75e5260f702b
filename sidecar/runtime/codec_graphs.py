"""CUDA graphs of the codec's decode for the shapes a short request meets, one set per stream.

A short request's decode is one item padded to a length of whole LENGTH_STEPs, then its tail
decoded again from a window (`Codec.decode_many`). On a GPU each such decode is a few hundred
small kernels launched one by one, and their launches, not their arithmetic, set its time; a
graph launches them at once. Its time is first audio's last part (docs/PERFORMANCE.md, "Decode").

Each decode stream (the bulk batches' and the interactive one, each used by one finisher thread)
gets graphs of its own, captured on it, so that a graph's kernels keep that stream's priority
(sidecar/runtime/streams.py) and two threads never replay one graph, nor share its buffers or
its memory pool. A replay copies the codes into the graph's input and returns a copy of its
output, so that the next replay may overwrite it. Shapes and streams without a graph decode
eagerly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


class Replayable(Protocol):
    def replay(self) -> None: ...


@dataclass
class Captured:
    """One graph and its static input and output."""

    graph: Replayable
    codes: torch.Tensor  # [rows, codebooks, frames] int64
    audio: torch.Tensor


Key = tuple[int, int, int]  # the stream's handle, rows, frames


def stream_key() -> int:
    """The current stream's handle: which graphs a decode may replay."""
    return int(torch.cuda.current_stream().cuda_stream)


class DecodeGraphs:
    """Graphs of `decode` ([rows, codebooks, frames] codes -> audio) by stream and shape."""

    def __init__(self, decode: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.decode = decode
        self.captured: dict[Key, Captured] = {}

    def capture(
        self,
        streams: Sequence[torch.cuda.Stream],
        shapes: Sequence[tuple[int, int]],
        codebooks: int,
    ) -> int:
        """A graph of each shape on each stream, after two eager decodes there (the shape's
        set-up, and any compilation, happen outside the capture). Returns how many."""
        for stream in streams:
            pool = torch.cuda.graph_pool_handle()  # the stream's own: its graphs replay in turn
            for rows, frames in shapes:
                device = torch.cuda.current_device()
                codes = torch.zeros((rows, codebooks, frames), dtype=torch.long, device=device)
                with torch.cuda.stream(stream):
                    for _ in range(2):
                        self.decode(codes)
                stream.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(
                    graph, pool=pool, stream=stream, capture_error_mode="thread_local"
                ):
                    audio = self.decode(codes)
                self.captured[int(stream.cuda_stream), rows, frames] = Captured(graph, codes, audio)
        return len(self.captured)

    def replay(self, codes: torch.Tensor, stream: int) -> torch.Tensor | None:
        """The audio of `codes` from the graph of their shape on `stream`, or None if there is
        none (decode them eagerly)."""
        rows, _, frames = codes.shape
        captured = self.captured.get((stream, rows, frames))
        if captured is None:
            return None
        captured.codes.copy_(codes)
        captured.graph.replay()
        return captured.audio.clone()
