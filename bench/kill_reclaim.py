"""Kill a GPU sidecar in the middle of a large batch; measure the memory coming back and the respawn.

    python bench/kill_reclaim.py --model CHECKPOINT --gpu 0 --batch 64 [--out FILE.json]

Runs the real pool (supervisor/supervision/pool.py) with one sidecar on the given GPU, sends a batch of
`--batch` requests, SIGKILLs the sidecar once a few denoising steps have run, and samples NVML
every 10 ms throughout. Prints (and writes with --out) the figures: memory used before the
sidecar started, once it was ready, at the peak of the batch, and after the kill; the time from
the kill to the exit being reaped, to the memory being back, to the new sidecar starting, and to
it being ready again; and whether every request of the batch still completed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.settings import Settings
from supervisor.supervision import gpu, sidecar_command
from supervisor.supervision.pool import Pool
from supervisor.supervision.scheduler import Scheduler

TEXT = "The quick brown fox jumps over the lazy dog while the band plays on into the warm summer night."
MIB = 2**20


async def sample(index: int, samples: list[tuple[float, int | None]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append((time.monotonic(), gpu.memory_used(index)))
        await asyncio.sleep(0.01)


async def until(predicate: Any, timeout_s: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError("timed out")
        await asyncio.sleep(0.005)
    return time.monotonic()


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(
        model=args.model,
        engine=args.engine,
        devices=str(args.gpu),
        num_step=args.num_step,
        load_timeout_s=600,
        heartbeat_timeout_s=120,
        memory_reclaim_s=120,
        max_batch_size=max(64, args.batch),
    )
    if args.engine == "null":  # the slow marker below: the sidecar's test entry point honours it
        sidecar_command.SIDECAR_MODULE = "sidecar.devtools.faulty_sidecar"
    device = gpu.discover(str(args.gpu))[0]
    pool = Pool(settings.supervision, Scheduler(settings.scheduling), [device])
    samples: list[tuple[float, int | None]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample(args.gpu, samples, stop))
    before = gpu.memory_used(args.gpu)
    t0 = time.monotonic()
    await pool.start()
    slot = pool.slots[0]
    ready_at = await until(lambda: slot.public_state == "ready", 900)
    after_ready = gpu.memory_used(args.gpu)
    marker = (
        " [[fault:slow:2]]" if args.engine == "null" else ""
    )  # the null engine needs help to be mid-batch
    futures = pool.scheduler.submit(
        [
            {"id": f"r{i}", "text": TEXT + (marker if i == 0 else ""), "seed": i}
            for i in range(args.batch)
        ]
    )
    await until(
        lambda: (
            slot.session is not None and slot.session.batches and slot.session.batches[0].started
        ),
        300,
    )
    await asyncio.sleep(args.kill_after_s)
    victim = slot.process
    assert victim is not None
    peak_before_kill = max((used or 0) for _, used in samples)
    killed_at = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    reaped_at = await until(lambda: slot.process is not victim, 60)
    respawned_at = await until(lambda: len(slot.pids) == 2, 180)
    await until(
        lambda: (
            slot.session is not None
            and slot.session.process is not victim
            and slot.session.ready_at is not None
        ),
        900,
    )
    ready_again_at = slot.session.ready_at  # type: ignore[union-attr]
    results = await asyncio.gather(*futures, return_exceptions=True)
    stop.set()
    await sampler
    await pool.stop(0)
    slack = settings.memory_slack_mb * MIB
    back = next(
        (
            t
            for t, used in samples
            if t > killed_at and used is not None and before is not None and used <= before + slack
        ),
        None,
    )
    lowest_after_kill = min(
        (used for t, used in samples if killed_at < t < respawned_at and used is not None),
        default=None,
    )

    def mib(value: int | None) -> float | None:
        return None if value is None else round(value / MIB, 1)

    return {
        "gpu": args.gpu,
        "batch": args.batch,
        "num_step": args.num_step,
        "memory_mib": {
            "before_start": mib(before),
            "after_ready": mib(after_ready),
            "peak_in_batch": mib(peak_before_kill),
            "lowest_after_kill_before_respawn": mib(lowest_after_kill),
        },
        "seconds": {
            "first_ready": round(ready_at - t0, 3),
            "kill_to_reaped": round(reaped_at - killed_at, 3),
            "kill_to_memory_back": None if back is None else round(back - killed_at, 3),
            "kill_to_respawn": round(respawned_at - killed_at, 3),
            "kill_to_ready_again": round(ready_again_at - killed_at, 3),
        },
        "requests_completed": sum(isinstance(r, dict) for r in results),
        "requests_failed": [repr(r) for r in results if not isinstance(r, dict)],
        "health": pool.health(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--num-step", type=int, default=32)
    parser.add_argument(
        "--kill-after-s", type=float, default=0.2, help="after the first step frame"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--engine", default="omnivoice", help="null: a dry run of this script without a model"
    )
    args = parser.parse_args()
    import logging

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    figures = asyncio.run(measure(args))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
