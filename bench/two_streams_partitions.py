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
  `cuDevSmResourceSplitByCount` on `cuDeviceGetDevResource`), so two contexts made so may share
  SMs (pytorch/pytorch#195378; a disjoint split, pytorch/pytorch#198178, is not in torch 2.13).
  Where cuda-python is installed (`cuda.bindings`) the arm splits the device once, as
  flashinfer's `green_ctx.py` does: the group for the small lane, the remainder for the bulk
  (`way: driver`, `disjoint: true`); else it falls back to two `create` calls (`way: torch`,
  `disjoint: false`: the small lane's time beside the bulk on its "rest" against beside the
  whole device then tells whether they overlapped).
- Current context. A CUDA event and the stream it is recorded on must belong to one context
  (`cudaEventRecord`), and the lanes time their passes with events. On the `driver` way each
  lane's work runs with its green context pushed current (`Green.current`), so its events and
  graphs are made in it. On the `torch` way they are not (torch's `set_context` makes the green
  context's default stream wait on the caller's, which would queue the small lane behind the
  bulk), so an event may cross contexts: a split that fails so records the driver's error.
- Granularity. A partition is rounded up to the architecture's granule (compute capability 9.0
  and later: 8 SMs, at least 8; 8.x: multiples of 2, at least 4; CUDA driver API, "Green
  Contexts"): the small lane asks for k rounded up; on the `torch` way the bulk asks for what
  remains rounded down. A split records the SMs each context got where the driver says.

Where green contexts are missing (a CPU, neither cuda-python nor torch's green contexts, a driver
before 12.4) or a split fails, the arm records why and the script goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch


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

    if driver() is None and not green_contexts.SUPPORTED:
        return "neither cuda.bindings nor torch's green contexts (green_contexts.SUPPORTED)"
    return None


def driver() -> Any:
    """cuda-python's driver bindings, or None where they are not installed."""
    try:
        from cuda.bindings import driver as bindings
    except ImportError:
        return None
    return bindings


@dataclass
class Green:
    """One lane's green context: its stream, its SMs, and `current`, what the lane's work runs
    under (the context made current, so the events and graphs made there are the context's)."""

    stream: Any  # torch.cuda.Stream
    sms: int
    current: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext
    keep: tuple[Any, ...] = ()  # handles alive while the stream and its graphs are


@dataclass
class Pair:
    """A split's two green contexts and how they were made: `driver`, one split of the device's
    SMs into the small lane's group and the rest (disjoint), or `torch`, `GreenContext.create`
    once for each (maybe not)."""

    small: Green
    bulk: Green
    way: str
    disjoint: bool


def pair(small_sms: int, bulk_sms: int, device: torch.device) -> tuple[Pair | None, str | None]:
    """The small lane's green context of `small_sms` SMs and the bulk's of the rest, or None
    and why not: through cuda-python where installed, else torch's `GreenContext`."""
    reason = unsupported(device)
    if reason is not None:
        return None, reason
    bindings = driver()
    try:
        if bindings is not None:
            return driver_pair(bindings, small_sms, device), None
        return torch_pair(small_sms, bulk_sms, device), None
    except Exception as exc:  # the driver's refusal is a result, not a failure of the run
        way = "cuda.bindings" if bindings is not None else "torch"
        return None, f"green contexts of {small_sms} SMs ({way}): {type(exc).__name__}: {exc}"


def ok(result: tuple[Any, ...]) -> Any:
    """A cuda-python call's value, or its error raised."""
    error, *values = result
    code = int(getattr(error, "value", error))  # a CUresult: an enum, its value an int
    if code != 0:
        raise RuntimeError(f"CUDA driver error {code}: {error}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


def driver_pair(drv: Any, small_sms: int, device: torch.device) -> Pair:
    """One `cuDevSmResourceSplitByCount` of the device's SMs: its group for the small lane, the
    remainder for the bulk, a green context and a stream (priority 0) for each."""
    dev = ok(drv.cuDeviceGet(device.index or 0))
    whole = ok(drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
    groups, _, rest = ok(drv.cuDevSmResourceSplitByCount(1, whole, 0, small_sms))
    lanes = []
    for resource in (groups[0], rest):
        desc = ok(drv.cuDevResourceGenerateDesc([resource], 1))
        flags = drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM
        green = ok(drv.cuGreenCtxCreate(desc, dev, flags))
        context = ok(drv.cuCtxFromGreenCtx(green))
        nonblocking = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        handle = ok(drv.cuGreenCtxStreamCreate(green, nonblocking, 0))
        stream = torch.cuda.get_stream_from_external(int(handle), device)
        current = functools.partial(pushed, drv, context)
        lanes.append(Green(stream, int(resource.sm.smCount), current, (green, context, handle)))
    return Pair(lanes[0], lanes[1], "driver", True)


@contextlib.contextmanager
def pushed(drv: Any, context: Any) -> Iterator[None]:
    """The green context current on this thread for the block."""
    ok(drv.cuCtxPushCurrent(context))
    try:
        yield
    finally:
        ok(drv.cuCtxPopCurrent())


def torch_pair(small_sms: int, bulk_sms: int, device: torch.device) -> Pair:
    """`GreenContext.create` for each lane: their streams, the contexts never made current
    (torch's `set_context` makes its default stream wait on the caller's, which would tie the
    small lane to the bulk's queue)."""
    from torch.cuda.green_contexts import GreenContext

    made = [
        GreenContext.create(num_sms=n, device_id=device.index or 0) for n in (small_sms, bulk_sms)
    ]
    small, bulk = (
        Green(ctx.Stream(), n, keep=(ctx,))
        for ctx, n in zip(made, (small_sms, bulk_sms), strict=True)
    )
    return Pair(small, bulk, "torch", False)


def header(device: torch.device, requested: list[int]) -> dict[str, Any]:
    """What the result's `partitions` starts with: the device's SMs and each split, or why the
    arm cannot run (`supported` false)."""
    reason = unsupported(device)
    out: dict[str, Any] = {"requested": requested, "supported": reason is None, "reason": reason}
    if reason is not None:
        return out
    props = torch.cuda.get_device_properties(device)
    out["way"] = "driver" if driver() is not None else "torch"
    return out | plan(requested, props.multi_processor_count, props.major)


def plan(requested: list[int], device_sms: int, major: int) -> dict[str, Any]:
    """The arm's record before it measures: each split of a device of `device_sms` SMs."""
    return {
        "device_sms": device_sms,
        "granule": granule(major)[0],
        "splits": [split(k, device_sms, major).summary() for k in requested],
        "alone": {},
        "rows": [],
    }
