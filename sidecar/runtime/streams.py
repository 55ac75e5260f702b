"""The CUDA streams' priorities: of the codec's decode, beside the denoising, and of interactive work.

Where kernels of several streams wait, the GPU starts those of the stream of higher priority
first as its SMs free up (lower numbers are sooner; 0 is the lowest, the default stream's). The
decode runs on a stream of its own, in the finisher thread, beside the denoising of the next
batch, which runs on the default stream: the decode's stream is at DECODE_STREAM_PRIORITY,
before it. Under load the denoising keeps every SM busy, and at equal priority a batch's decoding
outlasted the denoising of the next, so the sidecar went without work (docs/PERFORMANCE.md;
`bench/decode_cost.py` measures the other arrangements: both at 0, or the denoising above).

An interactive batch's decode (the interactive stream) runs at the highest priority. A CUDA
graph's kernels keep the priority of the stream that *captured* it (PyTorch instantiates graphs
with per-node priorities), so a stream's priority reaches only its eager kernels and the graphs
it captures.
"""

from __future__ import annotations

DECODE_STREAM_PRIORITY = -1
INTERACTIVE_DECODE_PRIORITY = -5  # the highest (torch maps it to the device's highest)
HIGHEST = -100  # past any device's range: torch maps it to the highest
