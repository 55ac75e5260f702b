"""bench/two_streams_partitions.py: `--partitions`' parsing, the SM arithmetic of a split, and the
record where green contexts cannot run (this machine: a CPU and torch's CPU build), and the
arm's measuring path on the CPU with the green contexts faked (creating one needs a GPU)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import two_streams
from bench import two_streams_partitions as part
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.options import RuntimeOptions


def test_parse_partitions() -> None:
    assert part.parse_partitions("8,16,24,32") == [8, 16, 24, 32]
    assert part.parse_partitions(" 8, 16 ") == [8, 16]
    assert part.parse_partitions("") == []
    for bad in ("8,x", "0", "-8", "8,8"):
        with pytest.raises(argparse.ArgumentTypeError):
            part.parse_partitions(bad)


def test_arguments_take_partitions() -> None:
    assert two_streams.arguments(["/ckpt"]).partitions == []
    args = two_streams.arguments(["/ckpt", "--partitions", "8,16", "--partitions", "24"])
    assert args.partitions == [24]  # the last wins: the device script's default is overridden
    assert (
        two_streams.arguments(["/ckpt", "--partitions", "8", "--partitions", ""]).partitions == []
    )
    with pytest.raises(SystemExit):
        two_streams.arguments(["/ckpt", "--partitions", "8,0"])


def test_granule_by_architecture() -> None:
    assert part.granule(9) == (8, 8) and part.granule(10) == (8, 8)
    assert part.granule(8) == (2, 4)
    assert part.granule(7) == (2, 2) and part.granule(6) == (1, 1)


def test_split_rounds_the_small_lane_up_and_the_bulk_down() -> None:
    # An H200: 132 SMs, compute capability 9.0, a granule of 8.
    assert [
        (s.small_sms, s.bulk_sms) for s in (part.split(k, 132, 9) for k in (8, 16, 24, 32))
    ] == [
        (8, 120),
        (16, 112),
        (24, 104),
        (32, 96),
    ]
    odd = part.split(10, 132, 9)
    assert (odd.small_sms, odd.bulk_sms, odd.error) == (16, 112, None)
    assert part.split(1, 108, 8).small_sms == 4  # at least the architecture's least partition
    assert part.split(3, 108, 8).bulk_sms == 104
    for s in (part.split(k, 132, 9) for k in (1, 8, 60, 124)):
        assert s.small_sms + s.bulk_sms <= s.device_sms and s.small_sms >= s.requested
    full = part.split(128, 132, 9)
    assert full.error is not None and "0 of 132" in full.error
    assert full.summary() == {
        "interactive_sms": 128,
        "device_sms": 132,
        "small_sms": 128,
        "bulk_sms": 0,
        "error": full.error,
    }


def test_unsupported_is_recorded_not_raised() -> None:
    cpu = torch.device("cpu")
    made, why = part.pair(8, 120, cpu)
    assert made is None and why is not None and "not a CUDA device" in why
    header = part.header(cpu, [8, 16])
    assert header == {"requested": [8, 16], "supported": False, "reason": why}


def test_without_green_contexts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA device with neither cuda-python nor torch's green contexts (faked: this machine
    has no GPU)."""
    from torch.cuda import green_contexts

    monkeypatch.setattr(green_contexts, "SUPPORTED", False)
    monkeypatch.setattr(part, "driver", lambda: None)
    made, why = part.pair(8, 120, torch.device("cuda", 0))
    assert made is None and why is not None and "SUPPORTED" in why
    assert part.header(torch.device("cuda", 0), [8])["supported"] is False


class Fails:
    """A CUresult's stand-in (cuda-python's enum; its `value` the driver's code)."""

    def __init__(self, value: int) -> None:
        self.value = value


def test_ok_unpacks_a_driver_result() -> None:
    assert part.ok((Fails(0),)) is None
    assert part.ok((Fails(0), "dev")) == "dev"
    assert part.ok((Fails(0), ["group"], 1, "rest")) == (["group"], 1, "rest")
    with pytest.raises(RuntimeError, match="CUDA driver error 201"):
        part.ok((Fails(201), None))
    assert part.ok((0, "plain int")) == "plain int"


def test_arm_measures_each_split(
    checkpoint_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arm's whole path on the CPU with the tiny checkpoint, the green contexts faked (they
    need a GPU) on an H200's 132 SMs: a split that fails is recorded and skipped, each other
    gets its alone record and a row per small size and bulk placement, its lanes' work under
    their contexts."""
    asked: list[tuple[int, int]] = []
    entered: list[str] = []

    @contextlib.contextmanager
    def current(name: str) -> Iterator[None]:
        entered.append(name)
        yield

    def pair(small_sms: int, bulk_sms: int, device: torch.device) -> tuple[Any, str | None]:
        asked.append((small_sms, bulk_sms))
        if small_sms == 16:
            return None, "green contexts of 16 SMs (torch): refused"
        small = part.Green(None, small_sms, functools.partial(current, "small"))
        bulk = part.Green(None, 132 - small_sms, functools.partial(current, "bulk"))
        return part.Pair(small, bulk, "driver", True), None

    def header(device: torch.device, requested: list[int]) -> dict[str, Any]:
        return {"requested": requested, "supported": True, "reason": None} | part.plan(
            requested, 132, 9
        )

    monkeypatch.setattr(part, "pair", pair)
    monkeypatch.setattr(part, "header", header)
    out_path = tmp_path / "two-streams.json"
    argv = [str(checkpoint_dir), "--device", "cpu", "--dry-run", "--priorities", "high"]
    argv += ["--kinds", "forward", "--hosts", "queued", "--partitions", "8,16"]
    args = two_streams.arguments([*argv, "--out", str(out_path)])
    model = OmniVoice.load(args.checkpoint, args.device, args.dtype, options=RuntimeOptions())
    out: dict[str, Any] = {}
    two_streams.run(two_streams.prepare(model, args), args, out)
    record = out["partitions"]
    assert json.loads(out_path.read_text())["partitions"] == record
    assert asked == [(8, 120), (16, 112)]
    first, second = record["splits"]
    assert second["error"] == "green contexts of 16 SMs (torch): refused"
    assert first["error"] is None and list(record["alone"]) == ["8"]
    assert (first["small_sms"], first["bulk_sms"]) == (8, 124)  # as the driver made them
    assert first["way"] == "driver" and first["disjoint"] is True
    assert {"small", "bulk"} <= set(entered)
    alone = record["alone"]["8"]
    assert alone["bulk"]["bulk_passes"] >= 2 and alone["bulk_partition_share"] > 0
    assert set(alone["small"]) == {str(t) for t in args.small_tokens}
    rows = record["rows"]
    assert {(r["bulk_on"], r["small_tokens"]) for r in rows} == {
        (on, t) for on in ("rest", "whole") for t in args.small_tokens
    }
    for row in rows:
        assert (row["interactive_sms"], row["small_sms"], row["bulk_sms"]) == (8, 8, 124)
        assert row["small_passes"] >= 1 and row["bulk_share"] > 0 and row["small_p50_ms"] > 0
        assert row["small_graphs"] == row["bulk_graphs"] == 0  # no graphs on the CPU


class FakeDriver:
    """cuda-python's driver calls the arm makes, as their documented results (the driver needs
    a GPU): a device of 132 SMs, one split, every call logged."""

    class CUdevResourceType:
        CU_DEV_RESOURCE_TYPE_SM = "sm"

    class CUgreenCtxCreate_flags:
        CU_GREEN_CTX_DEFAULT_STREAM = 1

    class CUstream_flags:
        CU_STREAM_NON_BLOCKING = 1

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.current: list[str] = []

    @staticmethod
    def resource(sms: int) -> Any:
        return argparse.Namespace(sm=argparse.Namespace(smCount=sms))

    def cuDeviceGet(self, index: int) -> tuple[int, str]:
        return 0, f"dev{index}"

    def cuDeviceGetDevResource(self, dev: str, kind: str) -> tuple[int, Any]:
        return 0, self.resource(132)

    def cuDevSmResourceSplitByCount(
        self, groups: int, whole: Any, flags: int, least: int
    ) -> tuple[int, list[Any], int, Any]:
        sms = -(-least // 8) * 8
        return 0, [self.resource(sms)] * groups, groups, self.resource(whole.sm.smCount - sms)

    def cuDevResourceGenerateDesc(self, resources: list[Any], n: int) -> tuple[int, int]:
        return 0, resources[0].sm.smCount

    def cuGreenCtxCreate(self, desc: int, dev: str, flags: int) -> tuple[int, str]:
        self.calls.append(f"green {desc}")
        return 0, f"green{desc}"

    def cuCtxFromGreenCtx(self, green: str) -> tuple[int, str]:
        return 0, f"ctx-{green}"

    def cuGreenCtxStreamCreate(self, green: str, flags: int, priority: int) -> tuple[int, int]:
        return 0, 1000 + int(green.removeprefix("green"))

    def cuCtxPushCurrent(self, context: str) -> tuple[int]:
        self.current.append(context)
        return (0,)

    def cuCtxPopCurrent(self) -> tuple[int, str]:
        return 0, self.current.pop()


def test_driver_pair_splits_once(monkeypatch: pytest.MonkeyPatch) -> None:
    drv = FakeDriver()
    monkeypatch.setattr(torch.cuda, "get_stream_from_external", lambda handle, device: handle)
    made = part.driver_pair(drv, 10, torch.device("cuda", 0))
    assert (made.way, made.disjoint) == ("driver", True)
    assert (made.small.sms, made.bulk.sms) == (16, 116)  # the remainder, all of it
    assert (made.small.stream, made.bulk.stream) == (1016, 1116)
    assert drv.calls == ["green 16", "green 116"]
    with made.bulk.current():
        assert drv.current == ["ctx-green116"]
    assert drv.current == []
    with pytest.raises(KeyError), made.small.current():
        assert drv.current == ["ctx-green16"]
        raise KeyError("the lane's failure")
    assert drv.current == []  # popped all the same
