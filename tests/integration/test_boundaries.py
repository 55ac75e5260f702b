"""Each side imports only what it may: checked in a fresh interpreter, on sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO_ROOT


def modules_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)}


@pytest.mark.parametrize(
    "module",
    [
        "supervisor.http.app",
        "supervisor.commands.serve",
        "supervisor.supervision.pool",
        "supervisor.supervision.scheduler",
        "supervisor.supervision.process",
        "supervisor.supervision.gpu",
        "supervisor.settings",
        "supervisor.cli",
        "supervisor.commands.sd_notify",
        "supervisor.commands.stop",
        "supervisor.commands.install_service",
        "supervisor.http.routes.speech",
        "supervisor.http.routes.voices",
        "supervisor.speech.request.schemas",
        "supervisor.speech.audio.formats",
        "supervisor.speech.text.chunking",
        "supervisor.speech.synthesis.runner",
        "supervisor.metrics",
        "supervisor.speech.stores.voices",
        "supervisor.http.openapi",
        "supervisor.supervision.model_check",
        "supervisor.speech.request.instructions",
        "supervisor.supervision.sidecar_command",
        "supervisor.tracing.setup",
        "supervisor.tracing.edge",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",  # imported once tracing is on
        "supervisor.books.read",
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
        "from supervisor.speech.audio import formats\n"
        "for fmt in formats.FORMATS: formats.encode(fmt, bytes(4800)); e = formats.encoder(fmt); e.feed(bytes(4800)); e.finish()"
    )
    assert "av" in loaded and not loaded & {"numpy", "torch"}


def test_serve_command_parses_without_torch() -> None:
    loaded = modules_after(
        "from supervisor.cli import build_parser; build_parser().parse_args(['serve', '--engine', 'null'])"
    )
    assert "torch" not in loaded


@pytest.mark.parametrize(
    "module",
    [
        "sidecar.serve.main",
        "sidecar.serve.loop",
        "sidecar.__main__",
        "sidecar.serve.engines",
        "sidecar.devtools.faults",
    ],
)
def test_sidecar_never_imports_the_http_stack(module: str) -> None:
    loaded = modules_after(f"import {module}")
    assert not loaded & {"starlette", "uvicorn", "httpx", "anyio", "supervisor"}


@pytest.mark.parametrize("module", ["sidecar.serve.main", "sidecar.serve.asr", "sidecar.__main__"])
def test_the_production_sidecar_never_loads_the_test_faults(module: str) -> None:
    """Faults come only from the test entry point (sidecar/devtools/faulty_sidecar.py)."""
    code = f"import sys, json\nimport {module}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert module in loaded  # the import ran
    assert not {m for m in loaded if m.startswith("sidecar.devtools")}, module


SHARED_DIR = REPO_ROOT / "sidecar" / "shared"
SHARED_MODULES = sorted(f"sidecar.shared.{p.stem}" for p in SHARED_DIR.glob("[!_]*.py"))


@pytest.mark.parametrize("module", SHARED_MODULES)
def test_shared_modules_need_only_the_stdlib_and_msgpack(module: str) -> None:
    baseline = modules_after("pass")
    # cython_runtime: msgpack's C part
    allowed = {"sidecar", "msgpack", "cython_runtime"}
    extra = modules_after(f"import {module}") - baseline - allowed
    not_stdlib = {n for n in extra if n not in sys.stdlib_module_names and not n.startswith("_")}
    assert not_stdlib == set(), f"{module} imports {not_stdlib}"


def test_the_supervisor_loads_only_shared_sidecar_modules_and_no_torch() -> None:
    """Every supervisor module imported: the sidecar's modules loaded are sidecar.shared's."""
    code = (
        "import importlib, json, pkgutil, sys, supervisor\n"
        "for m in pkgutil.walk_packages(supervisor.__path__, 'supervisor.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    sidecar = {m for m in loaded if m.startswith("sidecar.")}
    assert sidecar, "no shared module loaded: the walk found nothing"
    outside = {m for m in sidecar if m != "sidecar.shared" and not m.startswith("sidecar.shared.")}
    assert outside == set(), f"the supervisor loads {sorted(outside)}"
    heavy = {m.split(".")[0] for m in loaded} & {"torch", "numpy", "transformers", "safetensors"}
    assert heavy == set(), f"the supervisor loads {sorted(heavy)}"


@pytest.mark.parametrize("module", ["sidecar.runtime.omnivoice", "sidecar.runtime.preload"])
def test_the_tts_runtime_never_imports_transformers(module: str) -> None:
    """Its codec is our own torch code: transformers' import costs a start seconds (only the ASR
    sidecar's Whisper uses it, imported lazily)."""
    loaded = modules_after(f"import {module}")
    assert "torch" in loaded  # the import ran
    assert "transformers" not in loaded
