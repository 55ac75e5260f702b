"""torch.compile's on-disk caches, kept where the supervisor says, so the next start reuses them.

Inductor keeps its compiled graphs (the FX graph and AOTAutograd caches) under
TORCHINDUCTOR_CACHE_DIR, Triton its kernels under TRITON_CACHE_DIR; by default both live under
/tmp, which a reboot (or a systemd unit's PrivateTmp) empties. The supervisor passes
`--compile-cache DIR` (its `--compile-cache-dir`); `use` points Inductor there, and Triton at
DIR/triton unless TRITON_CACHE_DIR is already set, before anything compiles. A warm cache turns
a start's compilations into reads (docs/DEPLOYMENT.md, "The compile cache").

The caches hold code the sidecar loads and runs, so a directory that another user owns, or that
anyone but its owner may write, is not used: the warning says why and torch's defaults stay.
A start whose compilations fail with the cache in use moves it aside (DIR.broken, the one
before it removed) and compiles once more from an empty directory (`retrying`): a damaged cache
costs one compilation, never a start. (Inductor itself already skips entries it cannot read.)
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"
BROKEN_SUFFIX = ".broken"


@dataclass(frozen=True)
class CompileCache:
    """The directories this process compiles into (Inductor's, Triton's)."""

    directories: tuple[Path, ...]


_active: CompileCache | None = None


def unsafe(path: Path) -> str | None:
    """Why this directory must not hold code this process runs, or None when it may."""
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by this process's uid {os.geteuid()}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write to it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _prepare(path: Path) -> str | None:
    """Make the directory (mode 0700) if it is missing; why it cannot be used, or None."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return unsafe(path)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def use(directory: str | None) -> CompileCache | None:
    """Compile into `directory` from now on (and Triton into DIR/triton unless TRITON_CACHE_DIR is
    set). None (and torch's defaults) when no directory is given or it is not safe to use."""
    global _active
    _active = None
    if not directory:
        return None
    inductor = Path(directory).expanduser().absolute()
    triton = Path(os.environ.get(TRITON_ENV) or inductor / "triton").expanduser().absolute()
    for path in (inductor, triton):
        problem = _prepare(path)
        if problem is not None:
            log.warning(
                "compile cache %s is not used (%s); torch's default cache applies", path, problem
            )
            return None
    os.environ[INDUCTOR_ENV] = str(inductor)
    os.environ[TRITON_ENV] = str(triton)
    _active = CompileCache((inductor, triton))
    log.info("compile cache: %s (Triton: %s)", inductor, triton)
    return _active


def active() -> CompileCache | None:
    """The cache `use` set up in this process, if any."""
    return _active


def set_aside(cache: CompileCache) -> None:
    """Move each directory to DIR.broken (replacing an older one) and start it again empty."""
    for path in cache.directories:
        if not path.exists():  # Triton's inside Inductor's: moved with it
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            continue
        broken = path.with_name(path.name + BROKEN_SUFFIX)
        shutil.rmtree(broken, ignore_errors=True)
        try:
            path.rename(broken)
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)


def retrying(compile_steps: Callable[[], T], reset: Callable[[], None] | None = None) -> T:
    """Run a start's compilations; if they fail while a persisted cache is in use, set the cache
    aside, `reset` torch's in-memory caches and run them once more. Without a cache, or when the
    second run fails too, the error is the caller's."""
    try:
        return compile_steps()
    except Exception as exc:  # any failure: the cache is the one thing a second run changes
        cache = active()
        if cache is None:
            raise
        log.warning(
            "compiling with the cache in %s failed (%s: %s); it is moved to %s and the "
            "start compiles from an empty cache",
            cache.directories[0],
            type(exc).__name__,
            exc,
            cache.directories[0].name + BROKEN_SUFFIX,
        )
        set_aside(cache)
        if reset is not None:
            reset()
        return compile_steps()
