"""Load generators for the server over HTTP: saturated, fixed-rate, one at a time, streaming.

Audio is requested as `pcm` (24 kHz, 16-bit mono), so its length is bytes / 48000 seconds
without decoding. Every function returns plain figures; `harness.py` puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Sequence
from typing import Any

import httpx
from workloads import Request

BYTES_PER_SECOND = 24000 * 2
# Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them: reusing one
# the server is closing at that moment gives a ReadError (3 of 1000 in the H200 run at 80363b7).
KEEPALIVE_S = 2.0


def body(r: Request, response_format: str = "pcm") -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "omnivoice",
        "input": r.text,
        "response_format": response_format,
        "seed": r.seed,
    }
    if r.kind == "clone":
        out["voice"] = {"id": r.voice}
    else:
        out["voice"] = r.voice
    if r.instruct:
        out["instructions"] = r.instruct
    return out


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 4)

    return {
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
        "mean": round(statistics.fmean(ordered), 4),
    }


async def one(
    client: httpx.AsyncClient, r: Request, results: list[dict[str, Any]], give_up_s: float = 600.0
) -> None:
    """One request; a 429 is retried after its Retry-After (as OpenAI's clients do) for up to
    give_up_s, as a batch client would. Latency counts from the first try."""
    start = time.perf_counter()
    retries = 0
    while True:
        try:
            resp = await client.post("/v1/audio/speech", json=body(r), timeout=3600)
            status, size = resp.status_code, len(resp.content)
        except httpx.HTTPError as exc:
            status, size = f"error:{type(exc).__name__}", 0
            break
        if status != 429 or time.perf_counter() - start > give_up_s:
            break
        retries += 1
        await asyncio.sleep(float(resp.headers.get("retry-after", "1")))
    results.append(
        {
            "status": status,
            "retries": retries,
            "latency": time.perf_counter() - start,
            "audio_s": size / BYTES_PER_SECOND if status == 200 else 0.0,
        }
    )


def summarise(results: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    ok = [r for r in results if r["status"] == 200]
    audio = sum(r["audio_s"] for r in ok)
    statuses: dict[str, int] = {}
    for r in results:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    return {
        "requests": len(results),
        "statuses": statuses,
        "retries_429": sum(r.get("retries", 0) for r in results),
        "wall_s": round(wall, 3),
        "audio_s": round(audio, 2),
        "x_realtime": round(audio / wall, 2) if wall else 0.0,
        "rtf": round(wall / audio, 5) if audio else None,
        "requests_per_s": round(len(ok) / wall, 2) if wall else 0.0,
        "latency_s": percentiles([r["latency"] for r in ok]),
    }


async def saturated(
    base_url: str, requests: Sequence[Request], in_flight: int = 256, api_key: str | None = None
) -> dict[str, Any]:
    """Everything submitted at once with at most `in_flight` open; wall from first submit to last answer."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(
        max_connections=in_flight, max_keepalive_connections=in_flight, keepalive_expiry=KEEPALIVE_S
    )
    results: list[dict[str, Any]] = []
    gate = asyncio.Semaphore(in_flight)
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=3600
    ) as client:

        async def gated(r: Request) -> None:
            async with gate:
                await one(client, r, results)

        start = time.perf_counter()
        await asyncio.gather(*(gated(r) for r in requests))
        wall = time.perf_counter() - start
    return summarise(results, wall)


async def fixed_rate(
    base_url: str, requests: Sequence[Request], rate: float, api_key: str | None = None
) -> dict[str, Any]:
    """Open loop: request i is sent at i / rate seconds, whatever the server is doing."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(
        max_connections=2048, max_keepalive_connections=256, keepalive_expiry=KEEPALIVE_S
    )
    results: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=3600
    ) as client:
        start = time.perf_counter()
        tasks = []
        for i, r in enumerate(requests):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(client, r, results)))
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - start
    out = summarise(results, wall)
    out["offered_rate"] = rate
    return out


async def sequential(
    base_url: str, text: str, repeats: int, response_format: str = "wav", api_key: str | None = None
) -> dict[str, Any]:
    """One request at a time (workload c): latency percentiles."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    latencies = []
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=600) as client:
        for i in range(repeats + 2):
            start = time.perf_counter()
            resp = await client.post(
                "/v1/audio/speech",
                json={
                    "model": "omnivoice",
                    "input": text,
                    "response_format": response_format,
                    "seed": i,
                },
            )
            resp.raise_for_status()
            if i >= 2:  # two warm-up requests
                latencies.append(time.perf_counter() - start)
    return {"requests": repeats, "latency_s": percentiles(latencies)}


async def first_audio(
    base_url: str,
    text: str,
    repeats: int,
    api_key: str | None = None,
    stream_format: str = "audio",
    first_seed: int = 0,
) -> dict[str, Any]:
    """Streaming: time from sending to the first audio bytes, and to the end. `stream_format`
    "audio" streams raw pcm; "sse" streams events, whose first `speech.audio.delta` counts (an
    answer in pcm starts with a short chunk either way, so its first audio comes sooner).
    Seeds from `first_seed`: a pcm stream and an SSE answer in pcm share their result-cache
    entries, so two runs of the same text need seeds of their own to measure generation."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    first, total = [], []
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=600) as client:
        for i in range(repeats):
            start = time.perf_counter()
            got_first = None
            payload = {
                "model": "omnivoice",
                "input": text,
                "response_format": "pcm",
                "stream_format": stream_format,
                "seed": first_seed + i,
            }
            async with client.stream("POST", "/v1/audio/speech", json=payload) as resp:
                resp.raise_for_status()
                seen = b""
                async for chunk in resp.aiter_bytes():
                    if got_first is not None or not chunk:
                        continue
                    seen = seen + chunk if stream_format == "sse" else chunk
                    if stream_format != "sse" or b"speech.audio.delta" in seen:
                        got_first = time.perf_counter() - start
            first.append(got_first or 0.0)
            total.append(time.perf_counter() - start)
    return {"requests": repeats, "first_audio_s": percentiles(first), "total_s": percentiles(total)}


def metric_values(text: str) -> dict[str, float]:
    """Prometheus text format -> {name{labels}: value}, summing nothing."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[name] = float(value)
    return out


def metric_sum(values: dict[str, float], name: str) -> float:
    return sum(v for k, v in values.items() if k == name or k.startswith(name + "{"))
