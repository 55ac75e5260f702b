"""sidecar/serve/loop.py's finisher: a batch decodes and answers in a thread while the next one denoises.

A real sidecar process (the null engine, through the test entry point that installs the fault
hooks) on real pipes. Decode faults stand in for a slow or failing codec, which the null engine
does not have.
"""

from __future__ import annotations

import pytest

from sidecar.shared.protocol import Tier
from tests.helpers.null_sidecar import NullSidecar


@pytest.fixture
def sidecar():  # type: ignore[no-untyped-def]
    s = NullSidecar()
    yield s
    with s.proc:  # closes the pipes on the way out
        if s.proc.poll() is None:
            s.proc.kill()


def test_the_next_batch_denoises_while_the_first_decodes_and_answers_stay_in_order(
    sidecar: NullSidecar,
) -> None:
    sidecar.generate(1, ["First batch. [[fault:decodeslow:1.5]]", "Also first."])
    sidecar.generate(2, ["Second batch."])
    frames = [sidecar.read()]
    while not (frames[-1]["op"] == "done" and frames[-1]["batch"] == 2):
        frames.append(sidecar.read())
    order = [(f["op"], f["batch"]) for f in frames]
    first_done = order.index(("done", 1))
    # Batch 2 stepped to its end while batch 1 was still decoding...
    assert [i for i, o in enumerate(order) if o == ("step", 2)][-1] < first_done
    # ...but every answer of batch 1 came before `done` 1, and every answer of batch 2 after it.
    answers = [(op, b) for op, b in order if op in ("result", "error")]
    assert answers == [("result", 1), ("result", 1), ("result", 2)]
    assert order.index(("result", 2)) > first_done
    assert sidecar.close() == 0


def test_denoised_comes_before_the_batch_decodes_and_answers(sidecar: NullSidecar) -> None:
    """`denoised` says the device is past a batch's steps, before its slow decode, and the
    next batch's comes while that decode still runs: the supervisor sends a batch more on it,
    so it must wait for no decode. Each still comes before its own batch's `done`."""
    sidecar.generate(1, ["Decode slowly. [[fault:decodeslow:1.5]]"])
    sidecar.generate(2, ["Second batch."])
    frames = [sidecar.read()]
    while not (frames[-1]["op"] == "done" and frames[-1]["batch"] == 2):
        frames.append(sidecar.read())
    order = [(f["op"], f["batch"]) for f in frames]
    assert order.count(("denoised", 1)) == order.count(("denoised", 2)) == 1
    assert order.index(("step", 1)) < order.index(("denoised", 1)) < order.index(("result", 1))
    assert order.index(("denoised", 2)) < order.index(("done", 1))  # not behind batch 1's decode
    assert order.index(("denoised", 2)) < order.index(("done", 2))
    assert sidecar.close() == 0


def test_a_failed_decode_is_retried_one_item_at_a_time(sidecar: NullSidecar) -> None:
    sidecar.generate(1, ["Fine.", "Broken codec. [[fault:decoderaise]]", "Also fine."])
    answers = {}
    while True:
        frame = sidecar.read()
        if frame["op"] in ("result", "error"):
            answers[frame["id"]] = frame
        if frame["op"] == "done":
            break
    assert answers["b1-1"]["op"] == "error" and "while decoding" in answers["b1-1"]["message"]
    assert answers["b1-0"]["op"] == answers["b1-2"]["op"] == "result"
    assert answers["b1-0"]["audio"] and answers["b1-2"]["audio"]


def test_shutdown_waits_for_the_batch_still_decoding(sidecar: NullSidecar) -> None:
    sidecar.generate(1, ["Decode slowly. [[fault:decodeslow:1]]"])
    sidecar.read_until("step", 1)
    sidecar.send({"op": "shutdown"})
    assert sidecar.read_until("result", 1)["id"] == "b1-0"
    assert sidecar.read_until("done", 1)["stats"]["items"] == 1
    assert sidecar.proc.wait(10) == 0


def test_done_reports_the_denoise_and_decode_wall_times_apart(sidecar: NullSidecar) -> None:
    # One second of slow steps and one of slow decoding: each timer holds its own second and not
    # the other's. One batch denoises, then decodes, so the two must fit in its wall time: a timer
    # that also held the other's second would sum to about three seconds within a wall of two.
    # (No upper bound of its own: on a loaded machine either phase may take longer.)
    sidecar.generate(1, ["Slow steps. [[fault:slow:1]]", "Slow decode. [[fault:decodeslow:1]]"])
    stats = sidecar.read_until("done", 1)["stats"]
    assert stats["denoise_s"] >= 1.0 and stats["decode_s"] >= 1.0, stats
    assert stats["wall_s"] >= stats["denoise_s"] + stats["decode_s"], stats
    assert sidecar.close() == 0


def test_an_interactive_batch_is_answered_while_a_bulk_batch_waits_for_the_device(
    sidecar: NullSidecar,
) -> None:
    """A bulk batch whose steps the device has not finished (`deviceslow` holds its wait in
    the watcher) holds up neither an interactive batch's `denoised` nor its `done`: each tier
    waits for the device in a thread of its own. The null engine has no device; the fault
    stands in for a bulk batch's unfinished kernels."""
    sidecar.generate(1, ["A bulk read. [[fault:deviceslow:20]]"])
    sidecar.read_until("result", 1)  # the bulk finisher now waits for batch 1's `denoised`
    sidecar.generate(2, ["Hello."], tier=Tier.INTERACTIVE)
    frames = [sidecar.read()]
    while not (frames[-1]["op"] == "done" and frames[-1]["batch"] == 2):
        frames.append(sidecar.read())
    order = [(f["op"], f["batch"]) for f in frames]
    assert ("denoised", 2) in order and ("result", 2) in order
    assert ("denoised", 1) not in order and ("done", 1) not in order
