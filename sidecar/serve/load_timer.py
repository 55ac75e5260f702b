"""How long each stage of a sidecar's start took, logged once it is ready.

A loading sidecar announces its stages with `progress` frames (start, torch (its import),
import (the runtime's own modules), resolve, tokenizer, model, codec,
cuda_graphs, warmup; a spare's also compiler, parked, and model and codec again after `go`);
`TimedChannel` notes when each one first appears and, as `ready` goes out, logs one line: the
seconds from the process's exec to the first frame (Python and the frame channel's imports),
each stage's seconds, and the total, for a spare also from `go`. The runtime's own line
(sidecar/runtime/capture.py) splits `cuda_graphs` into compilation, warm-up and capture;
bench/start_arm.py reads both from the server's log.
"""

from __future__ import annotations

import logging
import time
from typing import IO

from sidecar.serve.frame_pipe import FramePipe
from sidecar.shared.protocol import Message

log = logging.getLogger("sidecar")

START_PREFIX = "start stages:"  # what bench/start_arm.py looks for


class LoadTimer:
    """The stages seen so far and when each began (the host's monotonic clock)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.marks: list[tuple[str, float]] = []
        self.done = False

    def observe(self, message: Message, now: float) -> str | None:
        """Note a frame on its way out; the summary line once `ready` goes out, else None."""
        if self.done:
            return None
        if message["op"] == "progress":
            if not self.marks or self.marks[-1][0] != message["stage"]:
                self.marks.append((message["stage"], now))
            return None
        if message["op"] != "ready":
            return None
        self.done = True
        return self.summary(now)

    def summary(self, now: float) -> str:
        ends = [t for _, t in self.marks[1:]] + [now]
        first = self.marks[0][1] if self.marks else now
        parts = [f"exec to first stage {first - self.started:.2f} s"]
        parts += [f"{name} {end - began:.2f} s" for (name, began), end in zip(self.marks, ends)]
        line = f"{START_PREFIX} {', '.join(parts)}; ready {now - self.started:.2f} s after exec"
        # A spare: the stage after `parked` began with `go`, where a respawn's wait began.
        went = [end for (name, _), end in zip(self.marks, ends) if name == "parked"]
        return line + (f", {now - went[-1]:.2f} s after go" if went else "")


class TimedChannel(FramePipe):
    """A frame channel that times the start's stages from the frames it sends."""

    def __init__(
        self, rfile: IO[bytes], wfile: IO[bytes], max_frame_bytes: int, started: float
    ) -> None:
        super().__init__(rfile, wfile, max_frame_bytes)
        self.timer = LoadTimer(started)

    def send(self, message: Message, bulk_answer: bool = False) -> None:
        line = self.timer.observe(message, time.monotonic())
        super().send(message, bulk_answer)
        if line is not None:
            log.info("%s", line)
