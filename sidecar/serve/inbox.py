"""The supervisor's frames, read by a thread of their own so that the frame loop can look at
what has arrived between two denoising steps without waiting for the pipe.

Frames are handled in the order they came, with one exception: a `generate` of the interactive
tier may be taken out of turn by the batch being denoised, to join it at its next step.
The supervisor bounds what it sends ahead (a few batches), so the queue stays short.
"""

from __future__ import annotations

import threading
from collections import deque

from sidecar.serve.frame_pipe import FramePipe
from sidecar.shared.protocol import Generate, Message, ProtocolError, Tier

# What the reader hands over: a frame, None at the end of stdin, or the error that ended it.
Arrival = Message | ProtocolError | None


class Inbox:
    """Frames in arrival order; `get` blocks for the next, `take_interactive` takes joiners early."""

    def __init__(self, channel: FramePipe) -> None:
        self.channel = channel
        self._arrived: deque[Arrival] = deque()
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="frame-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            arrival: Arrival
            try:
                arrival = self.channel.receive()
            except ProtocolError as exc:
                arrival = exc
            with self._changed:
                self._arrived.append(arrival)
                self._changed.notify()
            if not isinstance(arrival, dict):  # the end of stdin, or a broken pipe
                return

    def get(self) -> Message | None:
        """The next frame (None: stdin closed); raises the ProtocolError a bad frame made."""
        with self._changed:
            while not self._arrived:
                self._changed.wait()
            arrival = self._arrived.popleft()
        if isinstance(arrival, ProtocolError):
            raise arrival
        return arrival

    def take_interactive(self) -> list[Generate]:
        """Every interactive `generate` that has arrived, out of turn; the rest stay in order.
        Nothing is taken past a frame that ends the conversation (shutdown, end, bad frame)."""
        taken: list[Generate] = []
        with self._changed:
            kept: deque[Arrival] = deque()
            ended = False
            for arrival in self._arrived:
                ends = not isinstance(arrival, dict) or arrival["op"] == "shutdown"
                ended = ended or ends
                if not ended and isinstance(arrival, dict) and tier_of(arrival) is Tier.INTERACTIVE:
                    taken.append(arrival)  # type: ignore[arg-type]
                else:
                    kept.append(arrival)
            self._arrived = kept
        return taken


def tier_of(message: Message) -> Tier | None:
    """A `generate` frame's tier (None for any other frame)."""
    return Tier(message["tier"]) if message["op"] == "generate" else None
