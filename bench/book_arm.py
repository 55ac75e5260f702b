"""The audiobook route on one long book: the `book` arm (`--arms ...,book`).

A Markdown book of `--book-chars` characters (500,000 by default: about ten hours of speech) is
written from the workload's sentence generator (seeded, so every run reads the same book): 20
chapters of paragraphs of 3 to 6 sentences. It is sent to `POST /v1/audiobooks` as M4B in one
OpenAI voice, and timed from the submission to the whole file downloaded: the chapters made (the
job's state polled through the job list, every 0.5 s), then `GET .../content`, which waits for
the server's maker to end the file it has been writing as the items came (docs/AUDIOBOOKS.md)
and sends it. The audio is the items' own `audio_seconds`. Gives `book_x_realtime`, and
`book_to_job_ratio` against the job arm's x realtime in the same run (the issue's bar: 0.95).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx
from workloads import sentence_text

POLL_S = 0.5
PROGRESS_S = 30.0  # how often the arm prints the book's progress (a run cut short still tells)
ENDED = ("completed", "failed", "cancelled")
CHAPTERS = 20


def book_text(chars: int, chapters: int = CHAPTERS, seed: int = 7) -> str:
    """A Markdown book of about `chars` characters in `chapters` chapters."""
    rng = random.Random(seed)
    per_chapter = max(1, chars // chapters)
    out = ["# A Long Book\n"]
    for number in range(1, chapters + 1):
        out.append(f"\n## Chapter {number}\n")
        written = 0
        while written < per_chapter:
            paragraph = sentence_text(rng, rng.randint(3, 6) * 10)
            out.append(f"\n{paragraph}\n")
            written += len(paragraph)
    return "".join(out)


async def book(
    base_url: str, chars: int, fmt: str = "m4b", chapters: int = CHAPTERS
) -> dict[str, Any]:
    """One book, sent, made and downloaded: wall, audio, x realtime, the content's own time."""
    text = book_text(chars, chapters).encode()
    async with httpx.AsyncClient(base_url=base_url, timeout=3600) as client:
        start = time.perf_counter()
        resp = await client.post(
            "/v1/audiobooks",
            files={"file": ("long-book.md", text)},
            data={"voice": "alloy", "response_format": fmt, "language": "en"},
        )
        if resp.status_code != 202:
            raise RuntimeError(f"submitting the book failed: {resp.status_code} {resp.text[:500]}")
        created = resp.json()
        job_id = created["id"]
        submitted = time.perf_counter() - start
        printed = start
        while True:
            listing = (await client.get("/v1/jobs", params={"limit": 1})).json()["data"]
            [view] = [j for j in listing if j["id"] == job_id] or [None]
            if view is None:
                view = (await client.get(f"/v1/jobs/{job_id}")).json()
            if view["state"] in ENDED:
                break
            if time.perf_counter() - printed >= PROGRESS_S:
                printed = time.perf_counter()
                stamp = time.strftime("%H:%M:%S")
                print(f"[{stamp}] book: {view['progress']} at {printed - start:.0f} s", flush=True)
            await asyncio.sleep(POLL_S)
        chapters_done = time.perf_counter() - start
        content = await client.get(f"/v1/audiobooks/{job_id}/content")
        wall = time.perf_counter() - start
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
    audio = sum(item["audio_seconds"] or 0.0 for item in job["items"] if item["state"] == "done")
    return {
        "job": job_id,
        "state": job["state"],
        "chars": len(text),
        "chapters": len(created["book"]["chapters"]),
        "items": len(job["items"]),
        "submit_s": round(submitted, 3),
        "chapters_done_s": round(chapters_done, 3),
        "content_status": content.status_code,
        "content_bytes": len(content.content),
        "content_s": round(wall - chapters_done, 3),
        "wall_s": round(wall, 3),
        "audio_s": round(audio, 2),
        "x_realtime": round(audio / wall, 2) if wall else 0.0,
    }
