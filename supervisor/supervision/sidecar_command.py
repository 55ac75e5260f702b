"""How a sidecar starts: its command line, importing only installed code, and its environment.

`python -m sidecar` puts the working directory first on sys.path, so a folder named `triton`,
`torch` or `sidecar` where the server was started shadows the installed package and every
sidecar crash-loops. `-P` (Python 3.11+) leaves the working directory out. Python 3.10 has no
`-P`, so there a tiny bootstrap drops `-c`'s '' entry before running the module. `-I` would
do it too but also ignores PYTHON* variables, which the sidecar's environment sets on purpose
(PYTHONPATH, PYTHONUNBUFFERED).

The command line also names the directory where torch.compile keeps its cache across starts
(`compile_cache_dir`), so that a respawn or a restarted server reads its compiled kernels back.

`SIDECAR_MODULE` is the module a sidecar runs: `sidecar` in production, and nothing in
production changes it. The fault tests set it to `sidecar.devtools.faulty_sidecar`, the same
sidecar with its test hooks installed (sidecar/serve/hooks.py): the in-process pools through a
fixture (tests/conftest.py), servers through their launcher (tests/helpers/faulty_server.py).
A module attribute rather than a parameter, because a server is started through its command
line (cli, serve, create_app, Pool, AsrPool, the spares), which a test launcher then wraps
whole, without a setting that production would carry.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sidecar.shared.options import ATTENTION, INTERACTIVE_STREAM, STEP_TOKENS, WARMUP_STEPS
from supervisor.settings import SidecarSettings
from supervisor.supervision.gpu import Device

REPO_ROOT = str(Path(__file__).resolve().parents[2])

SIDECAR_MODULE = "sidecar"  # what `python -m` runs (see the docstring)

# Run the module as __main__ with the working directory ('' for -c) off the import path.
BOOTSTRAP = (
    "import runpy, sys; del sys.path[0]; "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)


def sidecar_command(
    python: str = sys.executable,
    version: tuple[int, ...] = tuple(sys.version_info[:2]),
    module: str | None = None,
) -> list[str]:
    """argv up to the sidecar's own flags: `python -P -m sidecar` or the 3.10 bootstrap;
    `module` (default SIDECAR_MODULE) in place of `sidecar`."""
    module = module or SIDECAR_MODULE
    if version >= (3, 11):
        return [python, "-P", "-m", module]
    return [python, "-c", BOOTSTRAP.format(module=module)]


def sidecar_argv(
    settings: SidecarSettings,
    device: Device,
    engine: str | None = None,
    model: str | None = None,
    park: bool = False,
) -> list[str]:
    """The whole command line of the sidecar for one device; `engine` and `model` for another
    kind of sidecar than --engine's (the ASR one, supervisor/supervision/asr.py); `park` for a
    spare, which waits for `go` before it touches the device (supervisor/supervision/spare.py)."""
    s = settings
    argv = [
        *sidecar_command(),
        "--engine",
        engine or s.engine,
        "--model",
        model or s.model,
        "--device",
        device.torch_device,
        "--dtype",
        s.dtype,
        "--id",
        device.id,
        "--max-frame-bytes",
        str(s.max_frame_bytes),
        WARMUP_STEPS.flag,
        str(s.warmup_steps),
        "--qa-thresholds",
        s.qa_thresholds,
        STEP_TOKENS.flag,
        str(s.interactive_step_tokens),
        ATTENTION.flag,
        s.attention,
        INTERACTIVE_STREAM.flag,
        s.interactive_stream,
    ]
    cache = compile_cache_dir(s)
    argv += ["--compile-cache", cache] if cache else []
    return argv + (["--park"] if park else [])


def compile_cache_dir(settings: SidecarSettings) -> str | None:
    """Where sidecars keep torch.compile's cache across starts: --compile-cache-dir, else the
    TORCHINDUCTOR_CACHE_DIR we were given (the systemd unit's), else DATA_DIR/compile-cache;
    None for 'off'. The sidecar makes it (mode 0700) and refuses one that others may write."""
    chosen = settings.compile_cache_dir or os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    if chosen == "off":
        return None
    return chosen or os.path.join(settings.data_dir, "compile-cache")


def sidecar_env(device: Device) -> dict[str, str]:
    """Ours, plus the device's (CUDA_VISIBLE_DEVICES), unbuffered, with this checkout importable."""
    env = dict(os.environ)
    env.update(device.environment())
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH", "")) if p)
    return env
