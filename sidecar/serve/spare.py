"""A spare's wait: loaded as far as it can go without its device, until the supervisor says go.

`python -m sidecar --park` is a spare the supervisor starts ahead of need (supervisor/supervision/
spare.py). It loads what needs no device (sidecar/runtime/preload.py), sends `progress` with
the stage `parked`, and reads its stdin: `go` means the device is its now (the sidecar it
replaces is gone and its GPU memory is back), and the start goes on as any other; `shutdown`,
or the end of stdin, ends it before it ever touched the device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sidecar.serve.frame_pipe import FramePipe
from sidecar.shared.protocol import PARKED

log = logging.getLogger("sidecar")


class SpareDismissed(Exception):
    """The spare was told to shut down, or lost its stdin, while parked: it exits cleanly."""


def wait_for_go(channel: FramePipe, progress: Callable[[str], None]) -> None:
    """Park until `go`; SpareDismissed on anything else (a supervisor sends a spare nothing else)."""
    progress(PARKED)
    message = channel.receive()
    if message is None or message["op"] != "go":
        what = "stdin closed" if message is None else f"{message['op']!r} received"
        log.info("parked spare dismissed (%s)", what)
        raise SpareDismissed(what)
    log.info("parked spare told to go")
