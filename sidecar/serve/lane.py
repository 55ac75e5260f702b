"""The interactive lane: interactive batches denoise in a thread of their own, beside the frame
loop's bulk batch, and never wait for it.

The supervisor sends interactive work as `generate` with `join` while the sidecar is busy with
bulk work (`supervisor.supervision.session.Session.can_join`). The inbox hands those frames to
this lane, which denoises them in an engine stepper of its own (`engine.stepper(lane=True)`:
on a GPU the lane's runner, graphs and a stream of the highest priority, so the device runs
the lane's small steps between the blocks of the bulk batch's kernels). A join that arrives
while the lane runs joins its batch at the next step; each batch is answered through the
express finisher as soon as its tokens exist.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING

from sidecar.serve.batch_run import BatchRun
from sidecar.serve.inbox import Inbox
from sidecar.shared.protocol import ExitCode

if TYPE_CHECKING:  # for annotations only
    from sidecar.serve.loop import Sidecar

log = logging.getLogger("sidecar")

# How long a thread waiting for the interpreter's lock waits while another runs Python (5 ms by
# default): the lane's host work is a few launches a step, and should not queue behind a
# finisher's post-processing for longer than a step's device time.
SWITCH_INTERVAL_S = 0.0005


class InteractiveLane:
    """A thread that runs the joins the inbox receives until stdin ends."""

    def __init__(self, sidecar: Sidecar, inbox: Inbox) -> None:
        self.sidecar, self.inbox = sidecar, inbox
        self.handled = 0  # join frames whose batches have been denoised and handed on
        self._progress = threading.Condition()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._serve, name="interactive-lane", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            while (message := self.inbox.wait_join()) is not None:
                run = BatchRun(self.sidecar, lane=True, take_joins=self.inbox.take_joins)
                run.add(message, interactive=True)
                run.run()
                with self._progress:
                    self.handled += run.added
                    self._progress.notify_all()
        except BaseException as exc:  # a bug would leave its batches unanswered: start afresh
            log.critical("the interactive lane failed; exiting:\n%s",
                         "".join(traceback.format_exception(exc)).rstrip())  # fmt: skip
            os._exit(ExitCode.INTERNAL)

    def drain(self) -> None:
        """Wait until every join received so far has been denoised and handed on."""
        with self._progress:
            while self.handled < self.inbox.joins_received:
                self._progress.wait(timeout=0.05)  # the inbox counts without telling the lane
