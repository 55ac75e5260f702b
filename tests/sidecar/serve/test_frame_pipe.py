"""sidecar/serve/frame_pipe.py's FramePipe: a sender never waits for the pipe, and a bulk batch's
answers go after every other frame still queued.

A real pipe that nobody reads yet: a large first frame fills it, so the writer thread is held
mid-frame while the test queues the rest; then the reader reads it all and sees the order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from sidecar.serve.frame_pipe import FramePipe
from sidecar.shared.protocol import FROM_SIDECAR, read_frame
from tests.helpers.waits import wait_until

LIMIT = 1 << 24


@pytest.fixture
def pipe() -> Iterator[tuple[FramePipe, BinaryIO]]:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb") as rfile, os.fdopen(write_fd, "wb") as wfile:
        yield FramePipe(rfile, wfile, LIMIT), rfile


def test_bulk_answers_go_after_the_frames_queued_behind_them(
    pipe: tuple[FramePipe, BinaryIO],
) -> None:
    channel, rfile = pipe
    big = {"op": "progress", "stage": "x" * (4 << 20)}  # as large as a long item's audio
    channel.send(big, bulk_answer=True)  # more than the pipe holds: the writer blocks in it
    wait_until(lambda: channel.queued() == (0, 0), 10.0, "the writer to take the large frame")
    channel.send({"op": "denoised", "batch": 1}, bulk_answer=True)
    channel.send({"op": "done", "batch": 1, "stats": {}}, bulk_answer=True)
    # Sent after the bulk answers, and none of these waited for the pipe.
    channel.send({"op": "step", "batch": 2, "step": 1, "of": 1})
    channel.send({"op": "denoised", "batch": 2})
    channel.send({"op": "done", "batch": 2, "stats": {}})
    assert channel.queued() == (3, 2)
    order = []
    for _ in range(6):
        frame = read_frame(rfile, LIMIT, FROM_SIDECAR)
        assert frame is not None
        order.append((frame["op"], frame.get("batch")))
    assert order == [
        ("progress", None),  # the one being written when the others came
        ("step", 2),
        ("denoised", 2),
        ("done", 2),
        ("denoised", 1),
        ("done", 1),
    ]
    channel.flush()
    assert channel.queued() == (0, 0)


def test_flush_returns_once_every_frame_is_written(pipe: tuple[FramePipe, BinaryIO]) -> None:
    channel, rfile = pipe
    for n in range(3):
        channel.send({"op": "progress", "stage": f"stage-{n}"})
    channel.flush()
    assert channel.queued() == (0, 0)
    stages = [read_frame(rfile, LIMIT, FROM_SIDECAR) for _ in range(3)]
    assert [dict(s or {}).get("stage") for s in stages] == ["stage-0", "stage-1", "stage-2"]
