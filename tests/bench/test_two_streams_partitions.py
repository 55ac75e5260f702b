"""bench/two_streams_partitions.py: `--partitions`' parsing, the SM arithmetic of a split, and the
record where green contexts cannot run (this machine: a CPU and torch's CPU build). Creating a
green context needs a GPU; on one, `tests/bench/test_two_streams.py`'s dry run would reach it."""

from __future__ import annotations

import argparse

import pytest
import torch

from bench import two_streams
from bench import two_streams_partitions as part


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
    ctx, why = part.create(8, cpu)
    assert ctx is None and why is not None and "not a CUDA device" in why
    header = part.header(cpu, [8, 16])
    assert header == {"requested": [8, 16], "supported": False, "reason": why}


def test_without_green_contexts_in_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA device whose torch lacks green contexts (faked: this machine has no GPU)."""
    from torch.cuda import green_contexts

    monkeypatch.setattr(green_contexts, "SUPPORTED", False)
    ctx, why = part.create(8, torch.device("cuda", 0))
    assert ctx is None and why is not None and "SUPPORTED" in why
    assert part.header(torch.device("cuda", 0), [8])["supported"] is False
