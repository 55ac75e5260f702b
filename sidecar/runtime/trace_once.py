"""One trace per start: the Python floats torch.compile had to specialize, kept for the next start.

With dynamic shapes, torch.compile first traces a float it reads (a norm's epsilon, a softmax
scale) as a symbol and later tries to make it a tensor input. A float that cannot be one (an
argument of a custom op, such as the fused norm-and-rotary kernel's epsilon) makes it throw
the whole first trace away and trace again with that float as a constant ("Restarting analysis
due to ... _tensorify_impl"). Every start paid for two traces of the layer stack, and the first
one's AOTAutograd lookup is always a miss: the trace it is for never completes, so it is never
stored (the log's compile counters show it as an AOTAutograd miss).

`seeded` keeps the names of those floats (torch's `TensorifyState`, symbols such as `zf1`)
in the compile cache after a start, and gives them back to torch before the next start's
trace, so that the first trace is already the second one: the same graph, hence the same
AOTAutograd and Inductor cache keys, hence the same compiled kernels (the log then shows only
hits). The names are only valid for the same code and settings, so they are stored with a
fingerprint (torch's version, the GPU, the runtime's source files, what the caller says it
compiles), in a file named by it, and used only when it matches. Should a seeded start still
restart, the seed was wrong: it is removed, and the start after it traces as before and
records afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import torch

from sidecar.runtime import compile_cache

log = logging.getLogger(__name__)


def seed_path(directory: Path, key: str) -> Path:
    """One file per fingerprint: a benchmark compiling other options into the same cache does
    not take the server's seed away."""
    return directory / f"float-specializations-{key[:16]}.json"


RUNTIME = Path(__file__).resolve().parent  # sidecar/runtime: the code that is traced


def fingerprint(what: str) -> str:
    """A digest of torch's version, the GPU in use, the runtime's sources and `what` (the
    options and sizes of what is compiled)."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_initialized() else "none"
    digest = hashlib.sha256(f"{torch.__version__} {torch.version.cuda} {gpu}\n{what}\n".encode())
    for path in sorted(RUNTIME.rglob("*.py")):
        digest.update(path.relative_to(RUNTIME).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _state() -> set[str]:
    from torch._dynamo.symbolic_convert import TensorifyState

    return TensorifyState.force_specializations


def _read(path: Path, key: str) -> list[str] | None:
    """The names stored for this fingerprint; None if there are none (or none readable)."""
    try:
        stored = json.loads(path.read_text())
        if stored["fingerprint"] != key:
            return None
        names = stored["names"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def _write(path: Path, key: str, names: list[str]) -> None:
    temporary = path.with_suffix(f".{os.getpid()}.tmp")  # sidecars of other GPUs share the cache
    try:
        temporary.write_text(json.dumps({"fingerprint": key, "names": names}))
        os.replace(temporary, path)
    except OSError as exc:  # a cache that cannot be written costs the next start a trace
        log.warning("cannot record the float specializations in %s: %s", path, exc)


@contextlib.contextmanager
def seeded(what: str) -> Iterator[None]:
    """Around a start's compilation: give torch the floats the last start with the same code
    and settings specialized, and record them after it. Nothing without a compile cache."""
    cache = compile_cache.active()
    if cache is None:
        yield
        return
    key = fingerprint(what)
    path = seed_path(cache.directories[0], key)
    seed, before = _read(path, key), set(_state())  # before: an earlier compilation's
    _state().update(seed or ())
    yield
    now = sorted(_state() - before)
    if seed is None:
        _write(path, key, now)
        log.info("float specializations recorded for the next start: %s", now or "none")
    elif set(now) != set(seed):
        log.warning(
            "the compilation traced again despite its seed %s (now %s); the seed is removed",
            seed,
            now,
        )
        path.unlink(missing_ok=True)
    else:
        log.info("float specializations seeded from the last start: %s", seed or "none")
