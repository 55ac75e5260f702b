"""The supervisor's frames, read by a thread of their own so that the frame loop can look at
what has arrived between two denoising steps without waiting for the pipe.

Frames are handled in the order they came, with two ways in for a run of batches being denoised
(`sidecar.serve.batch_run`) between two of its steps: a `generate` of the interactive tier may be
taken out of turn, to join the run at its next step; and once the run's bulk work is done while
interactive work keeps it going, the next frame, if it is a bulk `generate`, is taken in its
turn, so the device's bulk work does not wait for a pause in the interactive traffic. The
supervisor bounds what it sends ahead (a few batches), so the queue stays short.
"""

from __future__ import annotations

import threading
from collections import deque

from sidecar.serve.frame_pipe import FramePipe
from sidecar.shared.protocol import Generate, Message, ProtocolError, Tier

# What the reader hands over: a frame, None at the end of stdin, or the error that ended it.
Arrival = Message | ProtocolError | None


class Inbox:
    """Frames in arrival order; `get` blocks for the next, `take_interactive` takes joiners early,
    `take_bulk_next` the next frame if it is a bulk `generate`."""

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

    def __len__(self) -> int:
        """Frames arrived and not yet taken."""
        with self._changed:
            return len(self._arrived)

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

    def take_bulk_next(self) -> Generate | None:
        """The next frame if it is a `generate` of the bulk tier (taken in its turn), else None:
        any other frame (a voice to encode, a shutdown, a bad frame) stays first in line."""
        with self._changed:
            if not self._arrived:
                return None
            head = self._arrived[0]
            if not isinstance(head, dict) or tier_of(head) is not Tier.BULK:
                return None
            self._arrived.popleft()
        return head  # type: ignore[return-value]


def tier_of(message: Message) -> Tier | None:
    """A `generate` frame's tier (None for any other frame)."""
    return Tier(message["tier"]) if message["op"] == "generate" else None
