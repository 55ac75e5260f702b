"""sidecar/serve/inbox.py's Inbox over a real pipe, read by its own reader thread: interactive
`generate` frames are taken out of turn, a bulk one only when it is next in line, and nothing is
taken past a frame that ends the conversation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.serve.frame_pipe import FramePipe
from sidecar.serve.inbox import Inbox
from sidecar.shared.protocol import Tier, encode_frame
from tests.helpers.waits import wait_until


class Sender:
    def __init__(self, inbox: Inbox, fd: int) -> None:
        self.inbox, self.fd = inbox, fd

    def send(self, *frames: dict[str, Any]) -> None:
        """Write the frames; return once the reader thread has queued them all (only the test's
        thread takes frames out)."""
        before = len(self.inbox)
        for frame in frames:
            os.write(self.fd, encode_frame(frame))
        wait_until(lambda: len(self.inbox) == before + len(frames), 10.0, "the reader thread")


def generate(batch: int, tier: Tier) -> dict[str, Any]:
    item = {"id": f"b{batch}", "text": "Hello.", "num_step": 4, "seed": 0}
    return {"op": "generate", "batch": batch, "items": [item], "encoding": "s16le", "tier": tier}


@pytest.fixture
def sender() -> Iterator[Sender]:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb") as rfile, os.fdopen(os.dup(write_fd), "wb") as unused:
        inbox = Inbox(FramePipe(rfile, unused, 1 << 20))
        yield Sender(inbox, write_fd)
        os.close(write_fd)  # the end of the pipe: the reader thread ends


def batches(frames: list[Any]) -> list[int]:
    return [frame["batch"] for frame in frames]


def test_a_bulk_generate_is_taken_only_when_it_is_next(sender: Sender) -> None:
    inbox = sender.inbox
    assert inbox.take_bulk_next() is None  # nothing has arrived
    sender.send(generate(1, Tier.INTERACTIVE), generate(2, Tier.BULK), generate(3, Tier.BULK))
    assert inbox.take_bulk_next() is None  # an interactive frame is first in line
    assert batches(inbox.take_interactive()) == [1]
    taken = inbox.take_bulk_next()
    assert taken is not None and taken["batch"] == 2
    sender.send({"op": "ping", "nonce": 7})
    taken = inbox.take_bulk_next()
    assert taken is not None and taken["batch"] == 3
    assert inbox.take_bulk_next() is None  # the ping is next: it stays first
    assert inbox.get() == {"op": "ping", "nonce": 7}


def test_nothing_is_taken_past_a_shutdown(sender: Sender) -> None:
    inbox = sender.inbox
    sender.send({"op": "shutdown"}, generate(1, Tier.BULK), generate(2, Tier.INTERACTIVE))
    assert inbox.take_bulk_next() is None
    assert inbox.take_interactive() == []
    assert inbox.get() == {"op": "shutdown"}
    taken = inbox.take_bulk_next()  # once the shutdown is handled, the rest is in line again
    assert taken is not None and taken["batch"] == 1
