"""supervisor/supervision/gpu.py without a GPU: everything degrades to one CPU sidecar and 'cannot tell'."""

from __future__ import annotations

import pytest

from supervisor.supervision import gpu


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
