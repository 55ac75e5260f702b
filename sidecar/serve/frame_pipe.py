"""The sidecar's end of the frame pipes; the arrays that travel in frames: `wire_arrays`.

A `FramePipe` writes frames whole, from a thread of its own, a bulk batch's answers last.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import IO

from sidecar.shared.protocol import (
    TO_SIDECAR,
    ExitCode,
    Message,
    encode_frame,
    read_frame,
)

log = logging.getLogger("sidecar")


class FramePipe:
    """The private frame pipes. Frames are written whole, by a writer thread of their own, so
    that no thread that sends one waits for the pipe: the frame loop's `step` frames do not
    wait while a finisher's large `result` drains into a pipe the supervisor reads slowly.
    A bulk batch's answers (`bulk_answer`: its results, errors, `denoised` and `done`) are
    written once no other frame waits, so an interactive batch's answers and every step go
    before those already queued; each of the two keeps its order."""

    def __init__(self, rfile: IO[bytes], wfile: IO[bytes], max_frame_bytes: int) -> None:
        self.rfile = rfile
        self.wfile = wfile
        self.max_frame_bytes = max_frame_bytes
        self._queued: tuple[deque[bytes], deque[bytes]] = (deque(), deque())  # others, bulk
        self._unwritten = 0  # queued, or being written
        self._changed = threading.Condition()
        self._writer: threading.Thread | None = None

    def send(self, message: Message, bulk_answer: bool = False) -> None:
        self.write_raw(encode_frame(message, self.max_frame_bytes), bulk_answer)

    def write_raw(self, data: bytes, bulk_answer: bool = False) -> None:
        """Queue a frame for the writer thread (started by the first one) and return."""
        with self._changed:
            self._queued[1 if bulk_answer else 0].append(data)
            self._unwritten += 1
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write, name="frame-writer", daemon=True
                )
                self._writer.start()
            self._changed.notify_all()

    def queued(self) -> tuple[int, int]:
        """Frames waiting for the writer: (others, bulk answers)."""
        with self._changed:
            return len(self._queued[0]), len(self._queued[1])

    def flush(self) -> None:
        """Return once every frame sent so far is written."""
        with self._changed:
            self._changed.wait_for(lambda: self._unwritten == 0)

    def _write(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: any(self._queued))
                data = (self._queued[0] or self._queued[1]).popleft()
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except OSError as exc:  # the supervisor closed the pipe: it is gone
                log.error("cannot write a frame to the supervisor (%s); exiting", exc)
                os._exit(ExitCode.ORPHANED)
            with self._changed:
                self._unwritten -= 1
                self._changed.notify_all()

    def receive(self) -> Message | None:
        return read_frame(self.rfile, self.max_frame_bytes, TO_SIDECAR)
