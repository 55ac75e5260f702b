"""The seams where a test entry point may act on the sidecar; production's hooks do nothing.

The frame loop calls a `Hooks` object at six points: the start of the load, each item's text
as it enters a batch, every denoising step, the wait for the device to finish a batch's steps,
the decoding of a group, and each item's audio before its quality checks. `python -m sidecar` passes this class, whose methods return what
they were given: no text is parsed, nothing fires. The fault tests run the same sidecar through
`python -m sidecar.devtools.faulty_sidecar`, which passes `sidecar.devtools.faults.Faults`
instead; so the faults live in a test-only entry point, and production code neither imports
them nor reads a setting for them.

`item` returns the text to generate and the item's faults: opaque here (production's are
always empty), handed back unread to `on_step`, `on_denoised`, `on_decode` and `on_output`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only: numpy stays out of a light import
    import numpy as np

    from sidecar.serve.frame_pipe import FramePipe

SendError = Callable[[str, str], None]  # an error frame with no batch: (ErrorKind value, text)


class Hooks:
    """Production's hooks: each one a no-op."""

    def on_load(self, send_error: SendError) -> None:
        """Called as the load begins, before any heavy import."""

    def item(self, text: str) -> tuple[str, Sequence[object]]:
        """An item's text as it enters a batch: (the text to generate, its faults)."""
        return text, ()

    def on_step(self, faults: Sequence[object], step: int, num_steps: int, batch_size: int) -> None:
        """A denoising step of a batch with these faults, from inside the generation loop."""

    def on_denoised(self, faults: Sequence[object]) -> None:
        """A batch with these faults is about to wait for the device, in its tier's watcher."""

    def on_decode(self, faults: Sequence[object]) -> None:
        """A group with these faults is about to be decoded, in its finisher thread."""

    def on_output(
        self, faults: Sequence[object], audio: np.ndarray, rate: int, attempt: int
    ) -> np.ndarray:
        """An item's audio (at its `attempt`, 1 the first) before its quality checks."""
        return audio


HooksFactory = Callable[["FramePipe"], Hooks]  # made once the frame channel exists


def no_hooks(channel: FramePipe) -> Hooks:
    """The production factory."""
    return Hooks()
