"""supervisor/supervision/gpu.py without a GPU: everything degrades to one CPU sidecar and 'cannot tell'."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.supervision import gpu
from tests.helpers.ports import free_port


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "nvml", lambda: None)
    monkeypatch.setattr(gpu.shutil, "which", lambda name: None)


def test_cpu_and_explicit_indices(no_nvml: None) -> None:
    assert gpu.discover("cpu") == [gpu.CPU]
    devices = gpu.discover("0,2")
    assert [(d.id, d.name, d.index, d.torch_device) for d in devices] == [
        ("gpu0", "cuda:0", 0, "cuda:0"),
        ("gpu2", "cuda:2", 2, "cuda:0"),
    ]
    assert devices[1].environment() == {"CUDA_VISIBLE_DEVICES": "2"}
    assert gpu.CPU.environment() == {"CUDA_VISIBLE_DEVICES": ""}


def test_auto_without_a_gpu_is_one_cpu_sidecar(no_nvml: None) -> None:
    assert gpu.discover("auto") == [gpu.CPU]


def test_memory_checks_say_cannot_tell_without_nvml(no_nvml: None) -> None:
    assert gpu.memory_used(0) is None
    assert gpu.compute_pids(0) is None
    assert gpu.memory_is_back(0, 123, 0, 0) == (None, "NVML unavailable")


def test_real_nvml_probe_never_raises() -> None:
    # On this machine there may or may not be a driver; either way the answer is a list.
    assert gpu.discover("auto")


class FakeNvml:
    """Stands in for pynvml's three calls, to check the 'memory back' rule itself."""

    def __init__(self, used: int, pids: list[int]) -> None:
        self.used, self.pids = used, pids

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> object:
        return type("Info", (), {"used": self.used})()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list:
        return [type("P", (), {"pid": p})() for p in self.pids]


@pytest.mark.parametrize(
    ("used", "pids", "back"),
    [
        (1 << 30, [], True),  # at the pre-start level
        (1 << 30, [42], False),  # the dead pid still holds a context
        (3 << 30, [], False),  # 2 GiB more than before it started
        (int(1.25 * (1 << 30)), [7], True),  # within the slack; someone else's pid is fine
    ],
)
def test_memory_back_rule(
    monkeypatch: pytest.MonkeyPatch, used: int, pids: list[int], back: bool
) -> None:
    monkeypatch.setattr(gpu, "nvml", lambda: FakeNvml(used, pids))
    answer, figures = gpu.memory_is_back(0, 42, 1 << 30, 512 << 20)
    assert answer is back and "MiB used" in figures


def test_devices_that_are_not_there_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_count_gpus", lambda: 2)
    assert gpu.devices_problem("auto") is None and gpu.devices_problem("cpu") is None
    assert gpu.devices_problem("1,0") is None
    problem = gpu.devices_problem("0,3,2")
    assert problem is not None and problem.startswith("--devices 0,3,2: no GPU 2, 3: ")
    assert "this machine has 2 GPUs (0-1)" in problem
    monkeypatch.setattr(gpu, "_count_gpus", lambda: 0)
    problem = gpu.devices_problem("0")
    assert problem is not None and "has no GPU that NVML or nvidia-smi can see" in problem


def serve_on_devices(devices: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    port = free_port()
    argv = ["serve", "--engine", "null", "--port", str(port), "--devices", devices]
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", *argv, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    with socket.socket() as probe:  # never opened: nothing listens there now
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return done


def test_serve_on_a_gpu_this_machine_lacks_is_status_2_before_the_port_opens(
    tmp_path: Path,
) -> None:
    """Issue 49.4: `--devices 3` opened the port and crash-looped the sidecar. The real
    command line runs on this machine; GPU 999 is on none."""
    asked = ["999"] + (["0"] if gpu.devices_problem("0") else [])  # "0": a machine without GPUs
    for devices in asked:
        done = serve_on_devices(devices, tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and not done.stdout, done.stderr
        assert lines[0].startswith(f"omnivoice-supervisor serve: --devices {devices}: no GPU ")
        assert not (tmp_path / "data" / "jobs.sqlite3").exists()  # nothing started
