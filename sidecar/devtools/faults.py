"""Test-only fault injection: the hooks (sidecar/serve/hooks.py) of the sidecar's test entry
point, `python -m sidecar.devtools.faulty_sidecar`. Production's `python -m sidecar` never
imports this module, and a marker in its text is ordinary text. In the test entry point:

Request faults are markers in an item's text, `[[fault:NAME]]`, `[[fault:NAME:ARG]]`, each
optionally followed by `@PATH` (see below). The marker is removed before generation. They fire
inside the generation loop (the runtime's on_step callback), i.e. from inside the model code,
for every batch the item is in:

    crash       the process kills itself with SIGKILL at the first step (a segfault, say)
    hang        it stops at the first step and sends nothing more (a wedged GPU)
    slow:S      every step sleeps so that the batch takes about S seconds longer
    stdout      every step prints to sys.stdout and writes to fd 1 (a chatty library)
    garbage     a frame that is not msgpack is written to the frame channel
    oversize    a header announcing a frame one byte over the cap is written
    raise       the step raises RuntimeError (an exception inside one item)
    oom         the step raises an out-of-memory error while the batch holds other items
    deviceslow:S  the device finishes the item's batch S seconds late: the wait for its steps
                  (in its tier's watcher thread, before `denoised`) sleeps S seconds first
    decodeslow:S  decoding the item's group (in the finisher thread) sleeps S seconds first
    decoderaise   decoding any group that holds the item raises RuntimeError

Output faults spoil an item's decoded audio before the quality checks see it (sidecar/audio/checks.py).
Their argument N makes them hit only the item's first N attempts (its `attempt` key; no
argument: every attempt), so a test can have an item retried into passing, or failing for good:

    nan:N       a tenth of the samples become NaN
    silence:N   every sample becomes 0
    runaway:N   a runaway tail: 2.5 s of silence, then the audio again
    length:N    the audio six times over (far too slow for its text)

Load faults come from the environment variable OMNIVOICE_TEST_FAULT_LOAD, checked when the
sidecar starts loading (before the engine is imported):

    crash       exit at once with status 70
    hang        send nothing more, forever
    load-error  report a load failure and exit with ExitCode.LOAD_ERROR

`NAME@PATH` (a load fault) or `[[fault:NAME@PATH]]` (a request fault, for one batch) fires only
if PATH can be deleted, so a test can make a fault happen exactly once: create the file, and the
first sidecar or batch to get there consumes it. PATH must lie inside the directory named by
the environment variable OMNIVOICE_TEST_FAULT_DIR (default: the system's temporary directory,
where pytest's tmp_path lies; tests/helpers/live_server.py names each server's DATA_DIR/test-faults):
a token anywhere else never fires and deletes nothing, so a client of a test server cannot aim
it at a real file.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sidecar.serve.frame_pipe import FramePipe
from sidecar.serve.hooks import Hooks, SendError
from sidecar.shared.protocol import HEADER, ErrorKind, ExitCode

LOAD_ENV = "OMNIVOICE_TEST_FAULT_LOAD"
DIR_ENV = "OMNIVOICE_TEST_FAULT_DIR"
CRASH_EXIT = 70
_MARKER = re.compile(r"\[\[fault:([a-z]+)(?::([^\]@]*))?(?:@([^\]]+))?\]\]")
OUTPUT_FAULTS = frozenset({"nan", "silence", "runaway", "length"})
REQUEST_FAULTS = frozenset(
    {
        "crash",
        "hang",
        "slow",
        "stdout",
        "garbage",
        "oversize",
        "raise",
        "oom",
        "deviceslow",
        "decodeslow",
        "decoderaise",
        *OUTPUT_FAULTS,
    }
)
RUNAWAY_GAP_S = 2.5


class InjectedOutOfMemory(RuntimeError):
    """Looks like an allocator failure to the sidecar's out-of-memory check."""

    def __init__(self) -> None:
        super().__init__("injected fault: CUDA out of memory")


@dataclass(frozen=True)
class Fault:
    name: str
    arg: str = ""


def _inside(path: str, directory: str) -> bool:
    """Whether path, its links and `..` resolved, names something under directory."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return real != root and os.path.commonpath((real, root)) == root


def _consume(token: str | None, directory: str) -> bool:
    """No token: always fire. A token file in the fault directory: fire only if this call
    deletes it."""
    if not token:
        return True
    if not _inside(token, directory):
        print(
            f"test fault: token {token!r} is outside {DIR_ENV} {directory!r}; ignored",
            file=sys.stderr,
            flush=True,
        )
        return False
    try:
        os.unlink(token)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return False
    return True


def _hang() -> None:
    while True:
        time.sleep(3600)


def _ours(faults: Sequence[object]) -> list[Fault]:
    return [fault for fault in faults if isinstance(fault, Fault)]


class Faults(Hooks):
    """The faults of one sidecar, at the frame loop's hooks."""

    def __init__(self, channel: FramePipe | None = None, token_dir: str | None = None) -> None:
        self.channel = channel  # for `garbage` and `oversize`; None where only audio is spoiled
        self.token_dir = token_dir or os.environ.get(DIR_ENV) or tempfile.gettempdir()

    def item(self, text: str) -> tuple[str, list[Fault]]:
        """Remove the markers from a text; return it and the faults it asked for."""
        found = [
            Fault(m.group(1), m.group(2) or "")
            for m in _MARKER.finditer(text)
            if _consume(m.group(3), self.token_dir)
        ]
        return _MARKER.sub("", text).strip(), [f for f in found if f.name in REQUEST_FAULTS]

    def on_load(self, send_error: SendError) -> None:
        spec = os.environ.get(LOAD_ENV, "")
        if not spec:
            return
        name, _, token = spec.partition("@")
        if not _consume(token, self.token_dir):
            return
        print(f"test fault: load {name}", file=sys.stderr, flush=True)
        if name == "crash":
            os._exit(CRASH_EXIT)
        if name == "hang":
            _hang()
        if name == "load-error":
            send_error(
                ErrorKind.LOAD_FAILED.value, "injected fault: the checkpoint cannot be loaded"
            )
            if self.channel is not None:
                self.channel.flush()  # the error goes out before the exit
            os._exit(ExitCode.LOAD_ERROR)

    def on_step(self, faults: Sequence[object], step: int, num_steps: int, batch_size: int) -> None:
        """Fire the batch's faults; called from inside the generation loop."""
        for fault in _ours(faults):
            if fault.name == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            elif fault.name == "hang":
                _hang()
            elif fault.name == "slow":
                time.sleep(float(fault.arg or 1) / max(1, num_steps))
            elif fault.name == "stdout":
                print(f"test fault: stray print at step {step}")
                sys.stdout.flush()
                os.write(1, b"test fault: stray write to fd 1\n")
            elif fault.name == "garbage" and step == 1 and self.channel is not None:
                self.channel.write_raw(HEADER.pack(3) + b"\xc1\xc1\xc1")
            elif fault.name == "oversize" and step == 1 and self.channel is not None:
                self.channel.write_raw(HEADER.pack(self.channel.max_frame_bytes + 1) + b"\x80")
            elif fault.name == "raise":
                raise RuntimeError("injected fault: exception inside the model")
            elif fault.name == "oom" and batch_size > 1:
                raise InjectedOutOfMemory()

    def on_denoised(self, faults: Sequence[object]) -> None:
        """Fire the device faults of a batch's items; called in its tier's watcher thread."""
        for fault in _ours(faults):
            if fault.name == "deviceslow":
                time.sleep(float(fault.arg or 1))

    def on_decode(self, faults: Sequence[object]) -> None:
        """Fire the decode faults of a group's items; called in the finisher thread."""
        for fault in _ours(faults):
            if fault.name == "decodeslow":
                time.sleep(float(fault.arg or 1))
            elif fault.name == "decoderaise":
                raise RuntimeError("injected fault: exception while decoding")

    def on_output(
        self, faults: Sequence[object], audio: np.ndarray, rate: int, attempt: int
    ) -> np.ndarray:
        """The item's audio as its output faults spoil it at this attempt (1 is the first)."""
        for fault in _ours(faults):
            if fault.name not in OUTPUT_FAULTS or (fault.arg and attempt > int(fault.arg)):
                continue
            if fault.name == "nan":
                audio = audio.copy()
                audio[::10] = np.nan
            elif fault.name == "silence":
                audio = np.zeros_like(audio)
            elif fault.name == "runaway":
                gap = np.zeros(int(RUNAWAY_GAP_S * rate), dtype=audio.dtype)
                audio = np.concatenate([audio, gap, audio])
            elif fault.name == "length":
                audio = np.tile(audio, 6)
        return audio
