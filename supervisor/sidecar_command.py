"""The interpreter command line that starts a sidecar, importing only installed code.

`python -m sidecar` puts the working directory first on sys.path, so a folder named `triton`,
`torch` or `sidecar` where the server was started shadows the installed package and every
sidecar crash-loops. `-P` (Python 3.11+) leaves the working directory out. Python 3.10 has no
`-P`, so there a tiny bootstrap drops `-c`'s '' entry before running the module. `-I` would
do it too but also ignores PYTHON* variables, which the sidecar's environment sets on purpose
(PYTHONPATH, PYTHONUNBUFFERED).
"""

from __future__ import annotations

import sys

# Run `sidecar` as __main__ with the working directory ('' for -c) off the import path.
BOOTSTRAP = (
    "import runpy, sys; del sys.path[0]; "
    "runpy.run_module('sidecar', run_name='__main__', alter_sys=True)"
)


def sidecar_command(
    python: str = sys.executable, version: tuple[int, ...] = tuple(sys.version_info[:2])
) -> list[str]:
    """argv up to the sidecar's own flags: `python -P -m sidecar` or the 3.10 bootstrap."""
    if version >= (3, 11):
        return [python, "-P", "-m", "sidecar"]
    return [python, "-c", BOOTSTRAP]
