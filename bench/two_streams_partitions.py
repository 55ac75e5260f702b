"""(two_streams.py's part) SM partitions: CUDA green contexts for the small and the bulk lane.

A green context owns a share of the device's SMs; work on its stream runs on those SMs only
(CUDA programming guide, "Green Contexts"). The arm `--partitions` puts the small passes on a
green context of k SMs and the bulk on one of the rest, or on the whole device (the default
stream, as in serving now).

What the sources say, and what the arm does about it:
- Graphs. A kernel node records the context it runs in (`CUDA_KERNEL_NODE_PARAMS.ctx`, CUDA
  driver API; contexts of graph nodes: `cudaGraphAddNode`'s execution context, CUDA runtime API
  "Execution Context Management"), and a stream capture records the capturing stream's context.
  So the partition a graph's kernels keep is the one of the stream that *captured* it, as a
  stream's priority is (`sidecar/runtime/streams.py`); a graph captured on the primary context
  and launched onto a green context's stream would run on the whole device (inferred from the
  node's recorded context: no source states it; the arm does not depend on it). PyTorch made
  green contexts' streams capturable (pytorch/pytorch#170317; their streams exposed by #171116).
  Each lane's runner here records its graphs on its green context's stream (its `Recorder`'s
  stream set to it before any graph) and replays them there; `small_graphs` and `bulk_graphs`
  in a row count the graphs captured, 0 meaning a lane ran eagerly.
- Disjointness. `GreenContext.create(num_sms=n)` splits the device's whole SM resource anew at
  each call and keeps the first group (`aten/src/ATen/cuda/CUDAGreenContext.cpp`:
  `cuDevSmResourceSplitByCount` on `cuDeviceGetDevResource`), so two contexts may share SMs
  (pytorch/pytorch#195378; a disjoint split, `cuDevSmResourceSplit`, is pytorch/pytorch#198178,
  not in torch 2.13). The arm records `disjoint: false`: the small lane's time beside the bulk
  on its "rest" against beside the whole device tells whether the two overlapped.
- Granularity. A partition is rounded up to the architecture's granule (compute capability 9.0
  and later: 8 SMs, at least 8; 8.x: multiples of 2, at least 4; CUDA driver API, "Green
  Contexts"): the small lane gets k rounded up, the bulk what remains rounded down.

Where green contexts are missing (a CPU, torch built without them, a driver before 12.8) the
arm records why and the script goes on with its other arms.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch

PARTITIONS = (8, 16, 24, 32)  # the device script's: SMs for the small lane


def parse_partitions(text: str) -> list[int]:
    """`--partitions`' value: comma-separated SM counts, positive and distinct ("": none)."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of SM counts: {text!r}") from None
    if any(k < 1 for k in counts) or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"SM counts must be positive and distinct: {text!r}")
    return counts


def granule(major: int) -> tuple[int, int]:
    """The SM granule and least partition of a compute capability's major version."""
    if major >= 9:
        return 8, 8
    if major == 8:
        return 2, 4
    if major == 7:
        return 2, 2
    return 1, 1


@dataclass(frozen=True)
class Split:
    """One partition of `device_sms`: the small lane's SMs (k rounded up to the granule) and
    the bulk's (the rest rounded down); `error` says why there is none."""

    requested: int
    device_sms: int
    small_sms: int
    bulk_sms: int
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "interactive_sms": self.requested,
            "device_sms": self.device_sms,
            "small_sms": self.small_sms,
            "bulk_sms": self.bulk_sms,
            "error": self.error,
        }


def split(k: int, device_sms: int, major: int) -> Split:
    step, least = granule(major)
    small = max(least, -(-k // step) * step)
    bulk = (device_sms - small) // step * step
    if bulk < least:
        error = f"{small} SMs for the small lane leave {bulk} of {device_sms} for the bulk"
        return Split(k, device_sms, small, max(bulk, 0), error)
    return Split(k, device_sms, small, bulk)


def unsupported(device: torch.device) -> str | None:
    """Why green contexts cannot run here, or None."""
    if device.type != "cuda":
        return f"not a CUDA device: {device}"
    from torch.cuda import green_contexts

    if not green_contexts.SUPPORTED:
        return "torch was built without green contexts (torch.cuda.green_contexts.SUPPORTED)"
    return None


def create(num_sms: int, device: torch.device) -> tuple[Any, str | None]:
    """A green context of `num_sms` SMs on `device`, or None and why not."""
    reason = unsupported(device)
    if reason is not None:
        return None, reason
    from torch.cuda.green_contexts import GreenContext

    try:
        return GreenContext.create(num_sms=num_sms, device_id=device.index or 0), None
    except Exception as exc:  # the driver's refusal is a result, not a failure of the run
        return None, f"GreenContext.create(num_sms={num_sms}): {type(exc).__name__}: {exc}"


def header(device: torch.device, requested: list[int]) -> dict[str, Any]:
    """What the result's `partitions` starts with: the device's SMs and each split, or why the
    arm cannot run (`supported` false)."""
    reason = unsupported(device)
    out: dict[str, Any] = {"requested": requested, "supported": reason is None, "reason": reason}
    if reason is not None:
        return out
    props = torch.cuda.get_device_properties(device)
    return out | plan(requested, props.multi_processor_count, props.major)


def plan(requested: list[int], device_sms: int, major: int) -> dict[str, Any]:
    """The arm's record before it measures: each split of a device of `device_sms` SMs."""
    return {
        "device_sms": device_sms,
        "granule": granule(major)[0],
        "disjoint": False,
        "splits": [split(k, device_sms, major).summary() for k in requested],
        "alone": {},
        "rows": [],
    }
