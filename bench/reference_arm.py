"""The reference arm: omnivoice 0.2.1's own generate() on the benchmark's texts (bench only).

    python bench/reference_arm.py CHECKPOINT WORKLOAD.json OUT.json

Runs in a separate interpreter that has the reference package installed; nothing in the
server imports it. WORKLOAD.json holds {"mixed": [...], "single_text": str, "clone_wav": [...],
"clone_text": str}. Texts go to generate() in arrival order, in calls of 32 (its best batch size
measured on this machine); a call's clone items and other items go in separate calls, since
upstream rejects a chunked batch that mixes them.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from omnivoice import OmniVoice  # the reference package: bench only

CALL_SIZE = 32


def main() -> int:
    checkpoint, workload_path, out_path = sys.argv[1:4]
    work = json.loads(Path(workload_path).read_text())
    device = os.environ.get(
        "REF_DEVICE", "cuda:0"
    )  # cpu only to check the arm itself on a tiny checkpoint
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = OmniVoice.from_pretrained(checkpoint, device_map=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sr = model.sampling_rate
    wav = torch.tensor(work["clone_wav"], dtype=torch.float32).unsqueeze(0)
    prompt = model.create_voice_clone_prompt((wav, sr), ref_text=work["clone_text"])

    def run(items: list[dict]) -> float:
        clone = [r for r in items if r["kind"] == "clone"]
        other = [r for r in items if r["kind"] != "clone"]
        audio_s = 0.0
        for group, voice in ((other, None), (clone, prompt)):
            if not group:
                continue
            torch.manual_seed(group[0]["seed"])
            kwargs = (
                {"voice_clone_prompt": voice}
                if voice is not None
                else {"instruct": [r["instruct"] for r in group]}
            )
            audios = model.generate(text=[r["text"] for r in group], **kwargs)
            audio_s += sum(len(a) for a in audios) / sr
        return audio_s

    run(work["mixed"][:4])  # warm-up
    sync()
    start = time.perf_counter()
    audio_s = 0.0
    for i in range(0, len(work["mixed"]), CALL_SIZE):
        audio_s += run(work["mixed"][i : i + CALL_SIZE])
    sync()
    wall = time.perf_counter() - start

    single = []
    for i in range(work.get("single_repeats", 50)):
        torch.manual_seed(i)
        sync()
        t = time.perf_counter()
        model.generate(text=work["single_text"])
        sync()
        single.append(time.perf_counter() - t)

    result = {
        "mixed_requests": len(work["mixed"]),
        "mixed_wall_s": round(wall, 3),
        "mixed_audio_s": round(audio_s, 2),
        "mixed_x_realtime": round(audio_s / wall, 2),
        "single_p50_s": round(statistics.median(single), 4),
        "single_p95_s": round(float(np.percentile(single, 95)), 4),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if device.startswith("cuda")
        else None,
    }
    Path(out_path).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
