"""`python -m tests.helpers.faulty_server supervisor ARGS`: the real `omnivoice-supervisor ARGS`,
for tests that inject faults.

Production has no fault setting (issue 51): the faults are test-only hooks of the sidecar
(sidecar/devtools/faults.py), installed by its test entry point
`python -m sidecar.devtools.faulty_sidecar`. This launcher points the server's sidecar command
at that entry point (`SIDECAR_MODULE`, read at each spawn) and lets SIGUSR2 wedge the event loop
(the systemd watchdog test), then runs the unchanged command line. Whatever the command starts
in-process (serve's pools, their spares, the ASR pool) runs the faulty sidecar.

The word `supervisor` before ARGS keeps the command line one that `stop` takes for a server
(supervisor/commands/pidfile.py looks for it among the first words). The fault tokens' directory
is OMNIVOICE_TEST_FAULT_DIR, which the sidecars inherit (tests/helpers/live_server.py sets it to
the server's DATA_DIR/test-faults).
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

LAUNCHER = "tests.helpers.faulty_server"  # for `python -m`
PROGRAM = "supervisor"  # the launcher's first argument
FAULTY_SIDECAR = "sidecar.devtools.faulty_sidecar"
WEDGE_S = 3.0  # how long SIGUSR2 blocks the event loop


def command(*args: str) -> list[str]:
    """The argv of `omnivoice-supervisor ARGS` through this launcher (run it from the checkout)."""
    return [sys.executable, "-m", LAUNCHER, PROGRAM, *args]


def wedge(sig: int, frame: FrameType | None) -> None:
    """SIGUSR2: the handler runs in the main thread, which runs the event loop: it stops."""
    time.sleep(WEDGE_S)  # the wedge itself: a loop that does nothing, which is the fault


def main(argv: list[str]) -> int:
    from supervisor import cli
    from supervisor.supervision import sidecar_command

    if argv[:1] != [PROGRAM]:
        print(f"usage: python -m {LAUNCHER} {PROGRAM} ARGS", file=sys.stderr)
        return 2
    sidecar_command.SIDECAR_MODULE = FAULTY_SIDECAR
    signal.signal(signal.SIGUSR2, wedge)
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
