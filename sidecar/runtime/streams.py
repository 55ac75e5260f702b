"""The CUDA streams of the denoising and of the codec's decode, by `RuntimeOptions.decode_priority`.

Where kernels of several streams wait, the GPU starts those of the stream of higher priority
first as its SMs free up (lower numbers are sooner; 0 is the lowest, the default stream's). The
decode runs on a stream of its own, in the finisher thread, beside the denoising of the next
batch; how the two share the device is the choice:

- `above`: the denoising on the default stream, the decode at DECODE_STREAM_PRIORITY, before it.
  Under load the denoising keeps every SM busy, and at equal priority a batch's decoding
  outlasted the denoising of the next, so the sidecar went without work (docs/PERFORMANCE.md).
- `equal`: both at 0.
- `below`: the denoising on a stream of the device's highest priority, the decode at 0, in the
  denoising's gaps: the forward loses least, the decode waits most.

An interactive batch's decode (the interactive stream) runs at the highest priority in every case.
A CUDA graph's kernels keep the priority of the stream that *captured* it (PyTorch instantiates
graphs with per-node priorities), so the denoising stream's priority reaches only its eager
kernels: with `below` the graphed forward still runs at 0, level with the decode.
`bench/decode_cost.py` measures what each costs the forward and how fast the decode still goes.
"""

from __future__ import annotations

import torch

DECODE_STREAM_PRIORITY = -1
INTERACTIVE_DECODE_PRIORITY = -5  # the highest (torch maps it to the device's highest)
HIGHEST = -100  # past any device's range: torch maps it to the highest
_DECODE = {"above": DECODE_STREAM_PRIORITY, "equal": 0, "below": 0}


def decode_priority(choice: str) -> int:
    """The decode stream's priority for a `RuntimeOptions.decode_priority`."""
    return _DECODE[choice]


def denoising_stream(device: torch.device, choice: str) -> torch.cuda.Stream | None:
    """The stream to denoise on: one of the highest priority for `below` on a GPU, else None
    (the thread's current stream, the default one)."""
    if device.type != "cuda" or choice != "below":
        return None
    return torch.cuda.Stream(device, priority=HIGHEST)


def enter(stream: torch.cuda.Stream | None) -> None:
    """Make `stream` the calling thread's current stream (PyTorch keeps one per thread), after
    the work the thread queued before; nothing without a stream or where it is current."""
    if stream is None:
        return
    current = torch.cuda.current_stream(stream.device)
    if current != stream:
        stream.wait_stream(current)
        torch.cuda.set_stream(stream)
