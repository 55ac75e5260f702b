"""The sidecar's entry point: its command line, the orphan watch, and the choice of frame loop.

`python -m sidecar` lands here once the frame channel is claimed. An ASR sidecar's loop
(sidecar/serve/asr.py) is imported only when `--engine whisper` asks for it, so that the
OmniVoice loop never loads transformers' Whisper, and neither loop imports this module.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import IO

from sidecar.runtime import compile_cache
from sidecar.serve import engines
from sidecar.serve.hooks import HooksFactory, no_hooks
from sidecar.serve.load_timer import TimedChannel
from sidecar.serve.loop import Sidecar
from sidecar.shared.options import SIDECAR_OPTIONS
from sidecar.shared.protocol import MAX_FRAME_BYTES, ExitCode
from sidecar.shared.thresholds import Thresholds

log = logging.getLogger("sidecar")

ORPHAN_CHECK_S = 1.0
# How long a thread may hold the GIL while another waits for it (Python's default: 5 ms). The
# frame loop lets the GIL go around every torch call and needs it back at once: while a finisher
# or the frame writer runs Python, each of a step's launches could wait up to a whole interval,
# and a small batch's step (2-5 ms on the device) would leave the device idle.
GIL_SWITCH_INTERVAL_S = 0.0005


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sidecar", description="One OmniVoice sidecar: frames on stdin/stdout."
    )
    parser.add_argument("--model", default="", help="checkpoint directory or Hugging Face id")
    parser.add_argument(
        "--engine",
        choices=(*engines.ENGINES, "whisper"),
        default="omnivoice",
        help="what to run: the OmniVoice model, silence (benchmarks), or Whisper (an ASR sidecar)",
    )
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    parser.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 or auto")
    parser.add_argument("--id", default="sidecar", help="name used in log lines")
    parser.add_argument("--max-frame-bytes", type=int, default=MAX_FRAME_BYTES)
    for option in SIDECAR_OPTIONS:
        parser.add_argument(
            option.flag,
            type=type(option.default),
            choices=option.choices,
            default=option.default,
            help=option.help,
        )
    parser.add_argument(
        "--qa-thresholds",
        type=Thresholds.from_spec,
        default=Thresholds(),
        help="the quality checks' thresholds that differ from the defaults: NAME=VALUE,...",
    )
    parser.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="torch.compile's on-disk cache (Inductor's; Triton's in DIR/triton unless "
        "TRITON_CACHE_DIR is set); none: torch's default",
    )
    parser.add_argument(
        "--park",
        action="store_true",
        help="a spare: load what needs no device, then wait for `go` (sidecar/serve/spare.py)",
    )
    return parser.parse_args(argv)


def watch_parent(parent: int) -> None:
    """Exit when the supervisor is gone, even in the middle of a long batch."""

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_CHECK_S)
            if os.getppid() != parent:
                log.error("supervisor (pid %d) is gone; exiting", parent)
                os._exit(ExitCode.ORPHANED)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def share_the_gil() -> None:
    """Make a thread that runs Python hand the GIL over within `GIL_SWITCH_INTERVAL_S`."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def main(
    argv: list[str],
    rfile: IO[bytes],
    wfile: IO[bytes],
    started: float | None = None,
    make_hooks: HooksFactory = no_hooks,
) -> int:
    """Serve frames; `started` is the monotonic time of the exec (`python -m sidecar`), from
    which the start's stages are timed. `make_hooks` is production's no-op unless a test entry
    point passes its own (sidecar/serve/hooks.py)."""
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    watch_parent(os.getppid())
    share_the_gil()
    compile_cache.use(args.compile_cache)
    began = time.monotonic() if started is None else started
    channel = TimedChannel(rfile, wfile, args.max_frame_bytes, began)
    hooks = make_hooks(channel)
    try:
        if args.engine == "whisper":
            from sidecar.serve.asr import AsrSidecar  # transformers' Whisper: only ASR sidecars

            return int(AsrSidecar(channel, args, hooks).run())
        return int(Sidecar(channel, args, hooks).run())
    finally:
        channel.flush()  # the frames still queued (a load error's, the last `done`) go out
