"""sidecar/runtime/compile_cache.py: where torch.compile keeps its cache, and a broken one.

Real directories, modes and owners (the tests run as root on CI, which may hand a directory to
another user; elsewhere that case is skipped). What compiles is a plain function here: a CPU
compilation takes tens of seconds on this machine, and what is tested is our side of it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from sidecar.runtime import compile_cache
from sidecar.runtime.compile_cache import INDUCTOR_ENV, TRITON_ENV


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """`use` writes both variables and the module's active cache: leave neither behind (set
    first, so that monkeypatch removes them again even when they were not there)."""
    for name in (INDUCTOR_ENV, TRITON_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(compile_cache, "_active", None)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_cache_is_private_and_torch_is_pointed_at_it(tmp_path: Path) -> None:
    where = tmp_path / "state" / "compile-cache"
    cache = compile_cache.use(str(where))
    assert cache is not None and compile_cache.active() is cache
    assert cache.directories == (where, where / "triton")
    assert mode(where) == 0o700 and mode(where / "triton") == 0o700
    assert os.environ[INDUCTOR_ENV] == str(where)
    assert os.environ[TRITON_ENV] == str(where / "triton")


def test_a_triton_cache_set_by_the_operator_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRITON_ENV, str(tmp_path / "triton-elsewhere"))
    cache = compile_cache.use(str(tmp_path / "inductor"))
    assert cache is not None
    assert os.environ[TRITON_ENV] == str(tmp_path / "triton-elsewhere")
    assert (tmp_path / "triton-elsewhere").is_dir()


def test_no_directory_leaves_torch_defaults(tmp_path: Path) -> None:
    assert compile_cache.use(None) is None and compile_cache.use("") is None
    assert INDUCTOR_ENV not in os.environ and compile_cache.active() is None


def test_a_directory_others_may_write_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache holds code the sidecar runs: a group- or world-writable one could be anyone's."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with caplog.at_level(logging.WARNING):
        assert compile_cache.use(str(shared)) is None
    assert INDUCTOR_ENV not in os.environ and compile_cache.active() is None
    assert "others may write to it (mode 777)" in caplog.text


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another user needs root")
def test_a_directory_of_another_user_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with caplog.at_level(logging.WARNING):
        assert compile_cache.use(str(theirs)) is None
    assert "owned by uid 65534" in caplog.text and INDUCTOR_ENV not in os.environ


def test_a_path_that_is_a_file_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    assert compile_cache.use(str(tmp_path / "file")) is None


def fill(cache: Path) -> None:
    (cache / "fxgraph").mkdir()
    (cache / "fxgraph" / "entry").write_bytes(b"\x00garbage")
    (cache / "triton" / "kernel.cubin").write_bytes(b"\x00garbage")


def test_a_start_that_fails_on_the_cache_compiles_again_from_an_empty_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first attempt reads the damaged entry and fails; the second finds an empty cache,
    the damaged one kept once beside it for a look."""
    where = tmp_path / "compile-cache"
    assert compile_cache.use(str(where)) is not None
    fill(where)
    resets: list[bool] = []

    def compile_steps() -> str:
        entry = where / "fxgraph" / "entry"
        if entry.exists() and entry.read_bytes().startswith(b"\x00"):
            raise RuntimeError("cannot load the cached graph")
        return "compiled"

    with caplog.at_level(logging.WARNING):
        assert compile_cache.retrying(compile_steps, reset=lambda: resets.append(True)) == (
            "compiled"
        )
    assert resets == [True]
    assert "RuntimeError: cannot load the cached graph" in caplog.text
    assert sorted(p.name for p in where.iterdir()) == ["triton"]  # empty again, and private
    assert mode(where) == 0o700 and list((where / "triton").iterdir()) == []
    broken = tmp_path / "compile-cache.broken"
    assert (broken / "fxgraph" / "entry").exists() and (broken / "triton" / "kernel.cubin").exists()
    # a second breakage replaces the kept copy rather than piling copies up
    fill(where)
    assert compile_cache.retrying(compile_steps) == "compiled"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".broken")] == [broken.name]


def test_a_separate_triton_cache_is_set_aside_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRITON_ENV, str(tmp_path / "triton"))
    cache = compile_cache.use(str(tmp_path / "inductor"))
    assert cache is not None
    (tmp_path / "triton" / "kernel.cubin").write_bytes(b"\x00")
    compile_cache.set_aside(cache)
    assert (tmp_path / "triton.broken" / "kernel.cubin").exists()
    assert list((tmp_path / "triton").iterdir()) == [] and (tmp_path / "inductor").is_dir()


def test_without_a_cache_a_failure_is_the_callers(tmp_path: Path) -> None:
    calls: list[int] = []

    def compile_steps() -> None:
        calls.append(1)
        raise RuntimeError("no cache to blame")

    with pytest.raises(RuntimeError, match="no cache to blame"):
        compile_cache.retrying(compile_steps)
    assert calls == [1]


def test_a_failure_that_is_not_the_caches_fails_the_start(tmp_path: Path) -> None:
    """One more attempt, not a loop: the second failure is the caller's."""
    assert compile_cache.use(str(tmp_path / "cache")) is not None
    calls: list[int] = []

    def compile_steps() -> None:
        calls.append(1)
        raise ValueError(f"attempt {len(calls)}")

    with pytest.raises(ValueError, match="attempt 2"):
        compile_cache.retrying(compile_steps)
    assert calls == [1, 1]
