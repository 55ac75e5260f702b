"""The sidecar's interpreter command line imports installed code only, on every Python we allow."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.settings import Settings
from supervisor.supervision.gpu import CPU
from supervisor.supervision.sidecar_command import compile_cache_dir, sidecar_argv, sidecar_command
from tests.helpers.harness import fast_settings, run, running_pool


@pytest.mark.parametrize("module", ["sidecar", "sidecar.devtools.faulty_sidecar"])
@pytest.mark.parametrize("version", [(3, 10), (3, 11)])
def test_a_local_sidecar_folder_does_not_shadow_the_installed_one(
    tmp_path: Path, version: tuple[int, int], module: str
) -> None:
    """Both forms (3.10's bootstrap runs on any Python) reach the real sidecar's argument parser,
    not the decoy in the working directory: production's module and the tests' entry point."""
    (tmp_path / "sidecar").mkdir()
    (tmp_path / "sidecar" / "__init__.py").write_text(
        "raise SystemExit('the local sidecar/ was imported')\n"
    )
    (tmp_path / "sidecar" / "__main__.py").write_text(
        "raise SystemExit('the local sidecar/ was imported')\n"
    )
    done = subprocess.run(
        [*sidecar_command(sys.executable, version, module), "--help"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    log = done.stderr.decode()  # the sidecar moves fd 1 to stderr: stdout carries frames only
    assert "local sidecar" not in log
    assert done.returncode == 0 and "--engine" in log, log


def test_the_compile_cache_is_the_flag_then_the_environment_then_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    data = str(tmp_path / "data")

    def cache_flag(**values: str) -> str | None:
        argv = sidecar_argv(Settings(data_dir=data, engine="null", **values).sidecar, CPU)
        return argv[argv.index("--compile-cache") + 1] if "--compile-cache" in argv else None

    assert compile_cache_dir(Settings(data_dir=data, engine="null").sidecar) == os.path.join(
        data, "compile-cache"
    )
    assert cache_flag() == os.path.join(data, "compile-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/var/cache/unit/inductor")  # the systemd unit's
    assert cache_flag() == "/var/cache/unit/inductor"
    assert cache_flag(compile_cache_dir="/srv/cc") == "/srv/cc"
    assert cache_flag(compile_cache_dir="off") is None


def test_the_attention_setting_reaches_the_sidecars_parser() -> None:
    """`--attention` travels to every sidecar, and a kernel neither knows is refused up front."""
    from sidecar.serve.main import parse_args

    for kernel in ("fa2", "cudnn"):
        argv = sidecar_argv(Settings(engine="null", attention=kernel).sidecar, CPU)
        assert parse_args(argv[len(sidecar_command()) :]).attention == kernel
    with pytest.raises(ValueError, match="attention"):
        Settings(attention="flash3")


def test_the_interactive_stream_setting_reaches_the_sidecars_parser() -> None:
    from sidecar.serve.main import parse_args

    for choice in ("off", "equal", "high"):
        argv = sidecar_argv(Settings(engine="null", interactive_stream=choice).sidecar, CPU)
        assert parse_args(argv[len(sidecar_command()) :]).interactive_stream == choice
    with pytest.raises(ValueError, match="interactive-stream"):
        Settings(interactive_stream="on")


def test_a_sidecar_makes_its_compile_cache_private_and_starts_beside_a_bad_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real sidecars: the default directory is made mode 0700; one that anyone may write is
    refused with a warning, and the sidecar still starts."""
    # Inductor writes the variable into os.environ once any test here has compiled something
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    data = tmp_path / "data"

    async def start(settings: Settings) -> None:
        async with running_pool(settings):
            pass

    run(start(fast_settings(None, data_dir=str(data), compile_cache_dir="")))
    assert stat.S_IMODE((data / "compile-cache").stat().st_mode) == 0o700
    assert (data / "compile-cache" / "triton").is_dir()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with caplog.at_level(logging.INFO, logger="omnivoice"):
        run(start(fast_settings(None, data_dir=str(data), compile_cache_dir=str(shared))))
    assert f"compile cache {shared} is not used (others may write to it" in caplog.text
    assert list(shared.iterdir()) == []
