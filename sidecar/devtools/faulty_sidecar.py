"""`python -m sidecar.devtools.faulty_sidecar`: the real sidecar with the test faults installed.

The same entry point as `python -m sidecar` (stdio claimed, `hello`, the frame loop), given
`sidecar.devtools.faults.Faults` as its hooks (sidecar/serve/hooks.py), so that markers in an
item's text and OMNIVOICE_TEST_FAULT_LOAD fire. Tests reach it by pointing the supervisor's
sidecar command at this module (supervisor/supervision/sidecar_command.py, `SIDECAR_MODULE`);
production never runs it. The fault module is imported only after `hello`, as the engine is.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from sidecar.__main__ import main

if TYPE_CHECKING:  # nothing heavy before `hello`
    from sidecar.serve.frame_pipe import FramePipe
    from sidecar.serve.hooks import Hooks


def fault_hooks(channel: FramePipe) -> Hooks:
    from sidecar.devtools.faults import Faults

    return Faults(channel)


if __name__ == "__main__":
    sys.exit(main(fault_hooks))
