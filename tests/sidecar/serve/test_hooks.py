"""sidecar/serve/hooks.py: production's sidecar has no fault hooks; the test entry point has.

Real sidecar processes (the null engine) on real pipes: `python -m sidecar` and
`python -m sidecar.devtools.faulty_sidecar`, sent the same fault markers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.null_sidecar import FAULTY, NullSidecar

MARKED = "Hello. [[fault:raise]] [[fault:silence]]"


@pytest.fixture
def started() -> Iterator[list[NullSidecar]]:
    sidecars: list[NullSidecar] = []
    yield sidecars
    for s in sidecars:
        with s.proc:  # closes the pipes on the way out
            if s.proc.poll() is None:
                s.proc.kill()


def test_production_treats_a_fault_marker_as_ordinary_text(started: list[NullSidecar]) -> None:
    sidecar = NullSidecar(module="sidecar")
    started.append(sidecar)
    sidecar.generate(1, [MARKED])
    frames = [sidecar.read()]
    while frames[-1]["op"] != "done":
        frames.append(sidecar.read())
    answers = [f for f in frames if f["op"] in ("result", "error")]
    assert [(f["op"], f["id"]) for f in answers] == [("result", "b1-0")]  # not raised
    assert sidecar.close() == 0


def test_the_test_entry_point_fires_the_same_markers(started: list[NullSidecar]) -> None:
    """The control: the markers above fire where the fault hooks are installed."""
    sidecar = NullSidecar(module=FAULTY)
    started.append(sidecar)
    sidecar.generate(1, [MARKED])
    error = sidecar.read_until("error", batch=1)
    assert error["id"] == "b1-0" and "injected fault" in error["message"]
    assert sidecar.close() == 0
