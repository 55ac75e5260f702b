"""The seed server as a peer arm: `omnivoice-triton-server` 0.1.2 on the same card, same texts.

    python3 bench/peer_arm.py CHECKPOINT --site /tmp/peersite --out peer.json

The seed server (PyPI `omnivoice-triton-server`, Python >= 3.12) runs with its README's
settings (`start --gpu-inferer 1 --max-batch-size 16 --max-batch-latency 250`; it has no
`--num-step`, its default is 32 like ours). The harness's mixed workload goes to it saturated,
as `pcm`: auto, OpenAI-named and design requests through its `/v1/audio/speech` (design as
`instructions`), clone requests through its `/v1/audio/clone` with the reference uploaded and its
transcript (it has no saved voices). `harness.py --peer-site` calls `run` after our server has
stopped, so the two never share the card.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import http_arm  # noqa: E402
import workloads  # noqa: E402

README_SETTINGS = ["--gpu-inferer", "1", "--max-batch-size", "16", "--max-batch-latency", "250"]
# The wheel's console script puts its package folder (named with dashes) on sys.path first.
BOOTSTRAP = "import sys; from omnivoice_triton_server_cli import main; sys.argv[0] = 'ts'; main()"


class SeedServer:
    def __init__(self, checkpoint: str, site: str, port: int, work_dir: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(work_dir / "peer-server.log", "w")  # noqa: SIM115 (closed in stop)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([site, env.get("PYTHONPATH", "")])
        cmd = [sys.executable, "-c", BOOTSTRAP, "start", "--model-id", checkpoint]
        cmd += [
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-dir",
            str(work_dir / "peer-logs"),
        ]
        cmd += README_SETTINGS
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready(self, timeout: float = 420) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the seed server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/health", timeout=2).json().get("ready"):
                    return time.monotonic() - start
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(1)
        raise TimeoutError("the seed server did not become ready")

    def stop(self) -> None:
        # It runs an inferer process beside its HTTP workers: stop the whole group.
        with_group = os.getpgid(self.proc.pid)
        os.killpg(with_group, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(with_group, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


async def one(
    client: httpx.AsyncClient, r: workloads.Request, ref_wav: bytes, results: list[dict[str, Any]]
) -> None:
    start = time.perf_counter()
    try:
        if r.kind == "clone":
            form = {"text": r.text, "ref_text": workloads.CLONE_REF_TEXT, "response_format": "pcm"}
            files = {"ref_audio": ("ref.wav", ref_wav, "audio/wav")}
            resp = await client.post("/v1/audio/clone", data=form, files=files)
        else:
            body: dict[str, Any] = {"model": "tts-1", "input": r.text, "voice": r.voice}
            body["response_format"] = "pcm"
            if r.instruct:
                body["instructions"] = r.instruct
            resp = await client.post("/v1/audio/speech", json=body)
        status, size = resp.status_code, len(resp.content)
    except httpx.HTTPError as exc:
        status, size = f"error:{type(exc).__name__}", 0
    results.append(
        {
            "status": status,
            "latency": time.perf_counter() - start,
            "audio_s": size / http_arm.BYTES_PER_SECOND if status == 200 else 0.0,
        }
    )


async def saturated(
    url: str, requests: list[workloads.Request], ref_wav: bytes, in_flight: int = 256
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=in_flight, keepalive_expiry=http_arm.KEEPALIVE_S)
    gate = asyncio.Semaphore(in_flight)
    results: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=3600) as client:

        async def gated(r: workloads.Request) -> None:
            async with gate:
                await one(client, r, ref_wav, results)

        start = time.perf_counter()
        await asyncio.gather(*(gated(r) for r in requests))
        wall = time.perf_counter() - start
    return http_arm.summarise(results, wall)


def run(
    checkpoint: str, site: str, requests: list[workloads.Request], ref_wav: bytes, work_dir: Path
) -> dict[str, Any]:
    server = SeedServer(checkpoint, site, 9494, work_dir)
    try:
        ready_s = server.wait_ready()
        # Two warm-up requests (its first batch compiles), not counted.
        asyncio.run(saturated(server.url, requests[:2], ref_wav))
        mixed = asyncio.run(saturated(server.url, requests, ref_wav))
    finally:
        server.stop()
    return {"settings": README_SETTINGS, "ready_s": round(ready_s, 1), "mixed": mixed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("checkpoint")
    ap.add_argument("--site", required=True, help="a folder holding the seed server's wheels")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from harness import wav_bytes

    work_dir = args.out.resolve().parent
    ref_wav = wav_bytes(workloads.clone_reference())
    result = run(args.checkpoint, args.site, workloads.mixed(args.requests), ref_wav, work_dir)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["mixed"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
