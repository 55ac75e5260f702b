"""Each side imports only what it may: checked in a fresh interpreter, on sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def modules_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)}


@pytest.mark.parametrize(
    "module",
    [
        "supervisor.app",
        "supervisor.server",
        "supervisor.pool",
        "supervisor.scheduler",
        "supervisor.process",
        "supervisor.gpu",
        "supervisor.settings",
        "supervisor.cli",
        "supervisor.systemd",
        "supervisor.stop",
        "supervisor.service",
        "supervisor.api.speech",
        "supervisor.api.voices",
        "supervisor.schemas",
        "supervisor.formats",
        "supervisor.chunking",
        "supervisor.synthesis",
        "supervisor.metrics",
        "supervisor.voice_store",
        "supervisor.openapi",
        "supervisor.model_check",
        "supervisor.instructions",
        "supervisor.sidecar_command",
    ],
)
def test_supervisor_never_imports_torch(module: str) -> None:
    loaded = modules_after(f"import {module}")
    assert not loaded & {"torch", "numpy", "transformers", "safetensors"}, (
        f"{module} pulled in {loaded & {'torch', 'numpy', 'transformers'}}"
    )


def test_encoding_every_format_needs_no_numpy() -> None:
    """PyAV encodes from bytes in the supervisor: libav comes in, numpy does not."""
    loaded = modules_after(
        "from supervisor import formats\n"
        "for fmt in formats.FORMATS: formats.encode(fmt, bytes(4800)); e = formats.encoder(fmt); e.feed(bytes(4800)); e.finish()"
    )
    assert "av" in loaded and not loaded & {"numpy", "torch"}


def test_serve_command_parses_without_torch() -> None:
    loaded = modules_after(
        "from supervisor.cli import build_parser; build_parser().parse_args(['serve', '--engine', 'null'])"
    )
    assert "torch" not in loaded


@pytest.mark.parametrize(
    "module", ["sidecar.serve", "sidecar.__main__", "sidecar.engines", "sidecar.faults"]
)
def test_sidecar_never_imports_the_http_stack(module: str) -> None:
    loaded = modules_after(f"import {module}")
    assert not loaded & {"starlette", "uvicorn", "httpx", "anyio", "supervisor"}


@pytest.mark.parametrize("module", ["sidecar.protocol", "sidecar.duration", "sidecar.layout"])
def test_shared_modules_need_only_the_stdlib_and_msgpack(module: str) -> None:
    baseline = modules_after("pass")
    extra = (
        modules_after(f"import {module}") - baseline - {"sidecar", "msgpack", "cython_runtime"}
    )  # msgpack's C part
    not_stdlib = {
        name for name in extra if name not in sys.stdlib_module_names and not name.startswith("_")
    }
    assert not_stdlib == set(), f"{module} imports {not_stdlib}"
