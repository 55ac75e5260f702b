"""The supervisor's frames, read by a thread of their own.

Frames are handled in the order they came, with one exception: an interactive `generate`
(`join`) goes to the interactive lane (`sidecar.serve.lane`), which denoises it beside whatever
the frame loop is running; the lane waits for them with `wait_join` and takes those that arrive
while it runs with `take_joins`. The supervisor bounds what it sends ahead (a few batches, a few
joins), so the queues stay short.
"""

from __future__ import annotations

import threading
from collections import deque

from sidecar.serve.wire import Channel
from sidecar.shared.protocol import Generate, Message, ProtocolError

# What the reader hands over: a frame, None at the end of stdin, or the error that ended it.
Arrival = Message | ProtocolError | None


class Inbox:
    """Frames in arrival order (`get`), and the joins apart (`wait_join`, `take_joins`)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._arrived: deque[Arrival] = deque()
        self._joins: deque[Generate] = deque()
        self._ended = False  # stdin is closed or broken: no join will come
        self.joins_received = 0
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
                if isinstance(arrival, dict) and is_join(arrival):
                    self._joins.append(arrival)  # type: ignore[arg-type]
                    self.joins_received += 1
                else:
                    self._arrived.append(arrival)
                self._ended = not isinstance(arrival, dict)
                self._changed.notify_all()
            if self._ended:  # the end of stdin, or a broken pipe
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

    def wait_join(self) -> Generate | None:
        """The oldest join, waiting for one; None once stdin has ended and none is left."""
        with self._changed:
            while not self._joins and not self._ended:
                self._changed.wait()
            return self._joins.popleft() if self._joins else None

    def take_joins(self) -> list[Generate]:
        """Every join that has arrived, without waiting."""
        with self._changed:
            taken, self._joins = list(self._joins), deque()
        return taken


def is_join(message: Message) -> bool:
    return message["op"] == "generate" and bool(message.get("join"))
