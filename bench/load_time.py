"""How long the runtime takes to load on a GPU, as a sidecar loads it (CUDA graphs captured at
load, torch.compile's cache in a directory of its own).

    python3 bench/load_time.py /tmp/full --cache-dir /tmp/cc

Run it twice on one cache directory: the first load compiles into an empty cache (a new
machine), the second reads it back (a restart; a respawn's device part). Prints one JSON line:
`load_s`, and the runtime's `captured ... CUDA graphs` and `compile phases` log lines.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.runtime import compile_cache
from sidecar.runtime.omnivoice import OmniVoice


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("captured", "compile phases")):
            self.lines.append(message)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--cache-dir", required=True)
    args = ap.parse_args()
    lines = Lines()
    logging.getLogger("sidecar").addHandler(lines)
    logging.getLogger("sidecar").setLevel(logging.INFO)
    compile_cache.use(args.cache_dir)
    start = time.perf_counter()
    OmniVoice.load(args.checkpoint, device=args.device, dtype="bfloat16")
    row = {
        "load_s": round(time.perf_counter() - start, 2),
        "log": lines.lines,
    }
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
