"""python -m sidecar: claim stdio for frames first, then import the heavy parts and serve.

Before anything else, fd 1 is duplicated into a private frame channel and fd 1 is pointed at
stderr, and fd 0 likewise moves to a private descriptor with /dev/null in its place. A print
from any library, or a C extension writing to fd 1, then lands in the log instead of
corrupting the frame stream. `hello` goes out before the engine is imported, proving the
channel to the supervisor within milliseconds of the exec.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # nothing heavy before `hello`
    from sidecar.serve.hooks import HooksFactory

STARTED = time.monotonic()  # the start's stages are timed from here (sidecar/serve/load_timer.py)


def _claim_stdio() -> tuple[int, int]:
    """Return private (frames_in, frames_out) descriptors; fds 0 and 1 no longer carry frames."""
    frames_in = os.dup(0)
    frames_out = os.dup(1)  # os.dup makes non-inheritable descriptors: children never get them
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return frames_in, frames_out


def main(make_hooks: HooksFactory | None = None) -> int:
    """Claim stdio, say hello, serve. `make_hooks`: the test entry point's
    (sidecar/devtools/faulty_sidecar.py); None, production's no-op hooks."""
    frames_in, frames_out = _claim_stdio()
    rfile = os.fdopen(frames_in, "rb")
    wfile = os.fdopen(frames_out, "wb")

    from sidecar.shared.protocol import PROTOCOL_VERSION, write_frame

    write_frame(wfile, {"op": "hello", "pid": os.getpid(), "protocol": PROTOCOL_VERSION})

    from sidecar.serve.hooks import no_hooks
    from sidecar.serve.main import main as serve

    return serve(sys.argv[1:], rfile, wfile, STARTED, make_hooks or no_hooks)


if __name__ == "__main__":
    sys.exit(main())
