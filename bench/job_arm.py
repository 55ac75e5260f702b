"""The mixed workload as one job, alone and beside interactive streaming requests.

`job`: the mixed requests as the items of one `POST /v1/jobs` (pcm), timed from the submission
to the job's end (its state polled through the job list, which leaves the items out, every
0.1 s); the audio is the items' own `audio_seconds`, read once at the end. Gives
`job_x_realtime`.

`bulk`: the same job (other seeds, so that the result cache, which keeps every job item, has
none of it) while short interactive speech requests stream (`stream_format` "sse" by default)
at a fixed rate for as long as it runs. Each interactive request's first audio is the time from
sending it to its first audio bytes (for SSE, to its first `speech.audio.delta` event). Gives
`interactive_under_bulk_first_audio_p50_s`/`_p99_s` and `bulk_throughput_share`, the job's
x realtime beside them over its x realtime alone; `bulk_total_throughput_share`, all the audio
the server made meanwhile (the job's and the interactive requests') over the job alone, which
bounds the first (the interactive requests' audio takes the device's time too); and the same
interactive requests on an idle server, for comparison.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx
import span_breakdown
from http_arm import KEEPALIVE_S, body, metric_sum, metric_values, percentiles
from stream_timing import StreamClock
from workloads import Request

POLL_S = 0.1
ENDED = ("completed", "failed", "cancelled")
# The bulk arm's seeds: the job arm's plus these, so no item is in the result cache already.
BULK_ALONE_SEED_OFFSET = 10_000_000
BULK_LOADED_SEED_OFFSET = 20_000_000


def job_items(requests: Sequence[Request], seed_offset: int = 0) -> list[dict[str, Any]]:
    items = []
    for r in requests:
        item = body(replace(r, seed=r.seed + seed_offset))
        del item["model"]
        items.append(item)
    return items


async def run_job(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> dict[str, Any]:
    """One job, submitted and followed to its end: wall, audio, x realtime, item states."""
    start = time.perf_counter()
    resp = await client.post("/v1/jobs", json={"items": items}, timeout=600)
    if resp.status_code != 202:
        raise RuntimeError(f"submitting the job failed: {resp.status_code} {resp.text[:500]}")
    job_id = resp.json()["id"]
    submitted = time.perf_counter() - start
    while True:
        # The newest job is ours (nothing else submits one meanwhile); the list has no items.
        listing = (await client.get("/v1/jobs", params={"limit": 1})).json()["data"]
        [view] = [j for j in listing if j["id"] == job_id] or [None]
        if view is None:  # another job is newer: ask for ours, items and all
            view = (await client.get(f"/v1/jobs/{job_id}")).json()
        if view["state"] in ENDED:
            break
        await asyncio.sleep(POLL_S)
    wall = time.perf_counter() - start
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    done = [item for item in job["items"] if item["state"] == "done"]
    audio = sum(item["audio_seconds"] or 0.0 for item in done)
    states: dict[str, int] = {}
    for item in job["items"]:
        states[item["state"]] = states.get(item["state"], 0) + 1
    return {
        "job": job_id,
        "state": job["state"],
        "items": len(items),
        "item_states": states,
        "submit_s": round(submitted, 3),
        "wall_s": round(wall, 3),
        "audio_s": round(audio, 2),
        "x_realtime": round(audio / wall, 2) if wall else 0.0,
    }


async def job(base_url: str, requests: Sequence[Request], seed_offset: int = 0) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        return await run_job(client, job_items(requests, seed_offset))


# The counters read around the loaded run: the audio made, and where the device's time went.
LOADED_COUNTERS = (
    "omnivoice_audio_produced_seconds_total",
    "omnivoice_forward_seconds_total",
    "omnivoice_forward_passes_total",
    "omnivoice_tokens_real_total",
    "omnivoice_denoise_device_seconds_total",
    "omnivoice_denoise_gap_seconds_total",
)


async def counters(base_url: str, names: Sequence[str] = LOADED_COUNTERS) -> dict[str, float]:
    """The server's counters of these names, each summed over its labels."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        text = (await client.get("/metrics")).text
    values = metric_values(text)
    return {name: metric_sum(values, name) for name in names}


LOOP_LAG = "omnivoice_event_loop_lag_seconds"


async def lag_buckets(base_url: str) -> dict[float, float]:
    """The server's event loop lag histogram: {bucket's upper bound: samples at most that}."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        values = metric_values((await client.get("/metrics")).text)
    prefix = f'{LOOP_LAG}_bucket{{le="'
    return {
        float(name[len(prefix) : -2]): count
        for name, count in values.items()
        if name.startswith(prefix)
    }


def loop_lag(before: dict[float, float], after: dict[float, float]) -> dict[str, float | None]:
    """How long the supervisor's event loop ran one callback without handing over, between two
    readings of its histogram: the samples, the bucket bound the p99 falls under, the bound of
    the highest bucket reached (the longest hold was at most that; None: over the last bound)
    and the samples over 50 ms."""
    delta = sorted((bound, after[bound] - before.get(bound, 0.0)) for bound in after)
    samples = delta[-1][1] if delta else 0.0
    if not samples:
        return {"samples": 0.0, "p99_s": None, "max_s": None, "over_50ms": None}

    def bound_holding(share: float) -> float | None:
        bound = next(b for b, count in delta if count >= share * samples)
        return bound if math.isfinite(bound) else None

    return {
        "samples": samples,
        "p99_s": bound_holding(0.99),
        "max_s": bound_holding(1.0),
        "over_50ms": samples - dict(delta).get(0.05, samples),
    }


def loaded_profile(delta: dict[str, float], wall: float) -> dict[str, float | None]:
    """Where the device's time went during the loaded run: the forward passes' share of the wall
    (well under the mixed arm's, the device waited on the host), and their mean size."""
    passes = delta["omnivoice_forward_passes_total"]
    return {
        "forward_share_of_wall": round(delta["omnivoice_forward_seconds_total"] / wall, 3),
        "batch_device_share_of_wall": round(
            delta["omnivoice_denoise_device_seconds_total"] / wall, 3
        ),
        "gap_device_share_of_wall": round(delta["omnivoice_denoise_gap_seconds_total"] / wall, 3),
        "forward_passes": passes,
        "mean_tokens_per_pass": round(delta["omnivoice_tokens_real_total"] / passes)
        if passes
        else None,
        "mean_pass_ms": round(1000 * delta["omnivoice_forward_seconds_total"] / passes, 2)
        if passes
        else None,
    }


async def first_audio_one(
    client: httpx.AsyncClient, r: Request, stream_format: str, results: list[dict[str, Any]]
) -> None:
    """One streamed request: time to its first audio bytes (None if it never had any), and how
    long a player starting then would have waited in all (`stream_timing`)."""
    payload = dict(body(r), stream_format=stream_format)
    clock = StreamClock(stream_format)
    status: int | str | None = None
    trace_id = None
    try:
        async with client.stream("POST", "/v1/audio/speech", json=payload) as resp:
            status, trace_id = resp.status_code, resp.headers.get("x-trace-id")
            async for chunk in resp.aiter_bytes():
                if chunk and status == 200:
                    clock.feed(chunk)
        if clock.error:
            status = "sse_error"
    except httpx.HTTPError as exc:
        status = f"error:{type(exc).__name__}"
    results.append(
        {
            "status": status,
            "first_audio": clock.first_audio_s,
            "total": time.perf_counter() - clock.start,
            "audio_s": clock.audio_s,
            "underrun": clock.underrun_s,
            "trace_id": trace_id,
        }
    )


async def interactive(
    base_url: str,
    requests: Sequence[Request],
    rate: float,
    stream_format: str,
    until: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Open loop at `rate` per second: all of `requests`, or fewer once `until` is set."""
    limits = httpx.Limits(
        max_connections=4096, max_keepalive_connections=256, keepalive_expiry=KEEPALIVE_S
    )
    results: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=3600) as client:
        start = time.perf_counter()
        tasks = []
        for i, r in enumerate(requests):
            if until is not None and until.is_set():
                break
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(first_audio_one(client, r, stream_format, results)))
        sent_for = time.perf_counter() - start
        await asyncio.gather(*tasks)
    statuses: dict[str, int] = {}
    for res in results:
        statuses[str(res["status"])] = statuses.get(str(res["status"]), 0) + 1
    wall = time.perf_counter() - start
    ok = [res for res in results if res["status"] == 200 and res["first_audio"] is not None]
    audio = sum(res["audio_s"] for res in ok)
    return {
        "requests": len(results),
        "offered_rate": rate,
        "sent_for_s": round(sent_for, 2),
        "wall_s": round(wall, 2),
        "stream_format": stream_format,
        "statuses": statuses,
        "first_audio_s": percentiles([res["first_audio"] for res in ok]),
        "total_s": percentiles([res["total"] for res in ok]),
        "underrun_s": percentiles([res["underrun"] for res in ok]),
        "audio_s": round(audio, 2),
        "x_realtime": round(audio / wall, 2) if wall else 0.0,
        "slowest": span_breakdown.slowest(ok),  # their trace ids, for the server's spans
    }


async def bulk(  # noqa: PLR0913  a harness arm: its workload and rates, passed once by name from run
    base_url: str,
    requests: Sequence[Request],
    interactive_requests: Sequence[Request],
    rate: float,
    stream_format: str,
    idle_requests: int,
    alone: dict[str, Any] | None,
) -> dict[str, Any]:
    """The job alone (unless measured already), the interactive requests alone, then both."""
    out: dict[str, Any] = {}
    if alone is None:
        alone = await job(base_url, requests, BULK_ALONE_SEED_OFFSET)
        out["alone_measured_here"] = True
    out["alone"] = alone
    out["interactive_idle"] = await interactive(
        base_url, interactive_requests[:idle_requests], rate, stream_format
    )
    finished = asyncio.Event()
    began, before = time.perf_counter(), await counters(base_url)
    lag_before = await lag_buckets(base_url)

    async def loaded_job() -> dict[str, Any]:
        try:
            return await job(base_url, requests, BULK_LOADED_SEED_OFFSET)
        finally:
            finished.set()

    job_task = asyncio.create_task(loaded_job())
    out["interactive_under_bulk"] = await interactive(
        base_url, interactive_requests[idle_requests:], rate, stream_format, until=finished
    )
    out["loaded"] = await job_task
    # All the audio the server made meanwhile (the job's and the interactive requests'), in x
    # realtime and as a share of the job alone: what the device kept of its throughput, which
    # the interactive requests' own audio bounds `throughput_share` by.
    wall = time.perf_counter() - began
    after = await counters(base_url)
    # Whether the supervisor's event loop held requests up meanwhile (work done on the loop).
    out["loop_lag"] = loop_lag(lag_before, await lag_buckets(base_url))
    delta = {name: after[name] - before[name] for name in LOADED_COUNTERS}
    out["loaded_profile"] = loaded_profile(delta, wall) if wall else None
    total_x = delta["omnivoice_audio_produced_seconds_total"] / wall
    out["loaded_total_x_realtime"] = round(total_x, 2)
    out["total_throughput_share"] = (
        round(total_x / alone["x_realtime"], 3) if alone["x_realtime"] else None
    )
    # Whether the interactive requests covered the whole job (else the cap on their count cut
    # them off first, and the job's last stretch ran alone).
    out["interactive_covered_job"] = (
        out["interactive_under_bulk"]["sent_for_s"] >= out["loaded"]["wall_s"] - 1.0 / rate
    )
    out["throughput_share"] = (
        round(out["loaded"]["x_realtime"] / alone["x_realtime"], 3) if alone["x_realtime"] else None
    )
    return out
