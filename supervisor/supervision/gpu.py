"""Which devices to run sidecars on, and whether a GPU's memory is back after a kill. No torch.

NVML (nvidia-ml-py) is the source; `nvidia-smi` is the fallback for discovery. Without a
driver, or without either tool, there are no GPUs: one sidecar runs on the CPU, and memory
checks answer None ("cannot tell"), which the pool treats as "back".
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("omnivoice.gpu")

_nvml: Any = None
_nvml_failed = False
_nvml_error = ""  # why NVML is not usable, said where it matters (no GPU found)


@dataclass(frozen=True)
class Device:
    """One place a sidecar can run."""

    id: str  # "gpu0", "cpu0": the sidecar's name in logs and /health
    name: str  # "cuda:1" (the physical index) or "cpu", as /health shows it
    index: int | None  # the physical GPU index (CUDA_VISIBLE_DEVICES), None for the CPU

    @property
    def is_gpu(self) -> bool:
        return self.index is not None

    @property
    def torch_device(self) -> str:
        """The device as the sidecar sees it: pinned to one GPU, that GPU is always cuda:0."""
        return "cpu" if self.index is None else "cuda:0"

    def environment(self) -> dict[str, str]:
        """Pin the sidecar to this device and nothing else."""
        return {"CUDA_VISIBLE_DEVICES": "" if self.index is None else str(self.index)}


CPU = Device("cpu0", "cpu", None)


def nvml() -> Any:
    """The initialised pynvml module, or None when NVML is not usable here."""
    global _nvml, _nvml_failed, _nvml_error
    if _nvml is None and not _nvml_failed:
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception as exc:  # no package, no driver, no device: all mean "no NVML"
            _nvml_failed, _nvml_error = True, str(exc) or type(exc).__name__
    return _nvml


def _count_gpus() -> int:
    lib = nvml()
    if lib is not None:
        try:
            return int(lib.nvmlDeviceGetCount())
        except Exception as exc:
            log.warning("NVML device count failed: %s", exc)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run(
            [smi, "-L"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("nvidia-smi -L failed: %s", exc)
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def discover(spec: str, count: int | None = None) -> list[Device]:
    """Devices for the --devices setting: 'auto', 'cpu', or indices such as '0,1'; at most `count`
    GPUs (--gpu-inferer: the first ones, clamped to those there are)."""
    asked = (
        f" (--gpu-inferer {count} asks for {count} GPU sidecar{'s' if count != 1 else ''})"
        if count is not None
        else ""
    )
    if spec == "cpu":
        if count is not None:
            log.info("--devices cpu: one sidecar runs on the CPU%s", asked)
        return [CPU]
    if spec == "auto":
        indices = list(range(_count_gpus()))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and indices:
            wanted = [int(p) for p in visible.split(",") if p.strip().isdigit()]
            indices = [i for i in wanted if i in indices]
        if not indices:
            if _nvml_error:
                log.info("NVML not available (%s)", _nvml_error)
            log.info("no GPU found: one sidecar runs on the CPU%s", asked)
            return [CPU]
    else:
        indices = [int(p) for p in spec.split(",")]
    if count is not None and count < len(indices):
        log.info(
            "--gpu-inferer %d: sidecars on GPUs %s of %s",
            count,
            ",".join(map(str, indices[:count])),
            ",".join(map(str, indices)),
        )
        indices = indices[:count]
    elif count is not None and count > len(indices):
        log.warning(
            "clamping --gpu-inferer from %d to the %d GPU%s there %s",
            count,
            len(indices),
            "s" if len(indices) != 1 else "",
            "are" if len(indices) != 1 else "is",
        )
    return [Device(f"gpu{i}", f"cuda:{i}", i) for i in indices]


def devices_problem(spec: str) -> str | None:
    """What is wrong with --devices on this machine, in one line, or None: GPU indices that are
    not there (a sidecar on one would crash-loop), checked before the port opens."""
    if spec in ("auto", "cpu"):
        return None
    count = _count_gpus()
    missing = sorted({i for i in map(int, spec.split(",")) if i >= count})
    if not missing:
        return None
    names = ", ".join(map(str, missing))
    if count == 0:
        there = "this machine has no GPU that NVML or nvidia-smi can see" + (
            f" (NVML: {_nvml_error})" if _nvml_error else ""
        )
    else:
        there = f"this machine has {count} GPU{'s' if count != 1 else ''} (0-{count - 1})"
    return (
        f"--devices {spec}: no GPU {names}: {there}; give the indices of GPUs there are, "
        "auto (every GPU, else the CPU) or cpu"
    )


def memory_used(index: int) -> int | None:
    """Bytes in use on a GPU, or None when NVML cannot tell."""
    lib = nvml()
    if lib is None:
        return None
    try:
        return int(lib.nvmlDeviceGetMemoryInfo(lib.nvmlDeviceGetHandleByIndex(index)).used)
    except Exception as exc:
        log.warning("NVML memory query on GPU %d failed: %s", index, exc)
        return None


def compute_pids(index: int) -> set[int] | None:
    """Pids holding a compute context on a GPU, or None when NVML cannot tell."""
    lib = nvml()
    if lib is None:
        return None
    try:
        procs = lib.nvmlDeviceGetComputeRunningProcesses(lib.nvmlDeviceGetHandleByIndex(index))
    except Exception as exc:
        log.warning("NVML process query on GPU %d failed: %s", index, exc)
        return None
    return {int(p.pid) for p in procs}


def memory_is_back(
    index: int, pid: int | None, baseline: int | None, slack: int
) -> tuple[bool | None, str]:
    """Whether a dead sidecar's memory has been released: its pid holds no context any more and
    the used memory is within `slack` of what it was before the sidecar started.

    Returns (answer, figures); answer None means NVML cannot tell.
    """
    used = memory_used(index)
    pids = compute_pids(index)
    if used is None:
        return None, "NVML unavailable"
    figures = f"{used / 2**20:.0f} MiB used" + (
        f", {baseline / 2**20:.0f} MiB before start" if baseline is not None else ""
    )
    if pids is not None and pid is not None and pid in pids:
        return False, figures + f", pid {pid} still holds a context"
    if baseline is not None and used > baseline + slack:
        return False, figures
    return True, figures
