"""A sidecar SIGKILLed under a running server, and the time until the server serves again.

The sidecar's pid comes from `/health` (the harness runs on the server's machine). From the kill,
`/health` is read every 20 ms until that sidecar is back (another pid, state `ready` or `busy`),
then the 12-word sentence is requested until one answer is a 200. `kill_to_ready_s` is the
kill to that answer; its parts: the kill to a new pid, to `/health` ready. Nothing runs during
the kill: this is the restart's cost, not a batch's loss (bench/kill_reclaim.py measures a kill
in the middle of a batch, with GPU memory, on the pool directly).

With spares (docs/DEPLOYMENT.md, "Spare sidecars") the kill waits until the device's spare is
parked, as it is on a server that has run a while: `spare_at_kill` says what there was, and
`took_spare` whether the spare took over; `spare_gpu_pids` lists the pids holding a GPU
(nvidia-smi) just before the kill, and `spare_held_gpu` whether the parked spare was among them
(it must not be).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from typing import Any

import httpx
from workloads import SINGLE_TEXT

POLL_S = 0.02
GIVE_UP_S = 900.0
SPARE_PARKS_S = 300.0  # a spare's start, before the kill, is waited for this long at most


async def sidecar(client: httpx.AsyncClient) -> dict[str, Any]:
    """The first sidecar's entry in /health (the server's /health answers even while degraded)."""
    health = (await client.get("/health")).json()
    return health["sidecars"][0]


def gpu_pids() -> list[int] | None:
    """The pids holding a CUDA context on any GPU (nvidia-smi), None without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = [smi, "--query-compute-apps=pid", "--format=csv,noheader"]
    out = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout
    return [int(line) for line in out.split() if line.strip().isdigit()]


async def parked_spare(client: httpx.AsyncClient) -> dict[str, Any]:
    """The sidecar's /health entry once its spare, if it has one, is parked."""
    began = time.perf_counter()
    entry = await sidecar(client)
    while (entry.get("spare") or {}).get("state") == "loading":
        if time.perf_counter() - began > SPARE_PARKS_S:
            break
        await asyncio.sleep(0.2)
        entry = await sidecar(client)
    return entry


async def kill_to_ready(base_url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        before = await parked_spare(client)
        spare = before.get("spare")
        holding = gpu_pids()
        if before["state"] not in ("ready", "busy") or before["pid"] is None:
            raise RuntimeError(f"the sidecar is not ready before the kill: {before}")
        killed = time.perf_counter()
        os.kill(before["pid"], signal.SIGKILL)
        new_pid_s = None
        while True:
            if time.perf_counter() - killed > GIVE_UP_S:
                raise TimeoutError("the sidecar did not come back")
            now = await sidecar(client)
            elapsed = time.perf_counter() - killed
            if now["pid"] not in (None, before["pid"]) and new_pid_s is None:
                new_pid_s = elapsed
            if now["pid"] not in (None, before["pid"]) and now["state"] in ("ready", "busy"):
                health_ready_s = elapsed
                break
            await asyncio.sleep(POLL_S)
        attempts = 0
        while True:
            attempts += 1
            resp = await client.post(
                "/v1/audio/speech",
                json={"model": "omnivoice", "input": SINGLE_TEXT, "response_format": "wav"},
            )
            if resp.status_code == 200:
                break
            if time.perf_counter() - killed > GIVE_UP_S:
                raise RuntimeError(f"no answer after the kill: {resp.status_code} {resp.text}")
            await asyncio.sleep(POLL_S)
        served_s = time.perf_counter() - killed
        after = await sidecar(client)
    return {
        "killed_pid": before["pid"],
        "new_pid": after["pid"],
        "kill_to_new_pid_s": None if new_pid_s is None else round(new_pid_s, 3),
        "kill_to_health_ready_s": round(health_ready_s, 3),
        "kill_to_ready_s": round(served_s, 3),
        "requests_until_served": attempts,
        "restarts": after["restarts"],
        "kills": after["kills"],
        "spare_at_kill": spare,
        "took_spare": spare is not None and after["pid"] == spare["pid"],
        "spare_gpu_pids": holding,
        "spare_held_gpu": None if holding is None or spare is None else spare["pid"] in holding,
    }
