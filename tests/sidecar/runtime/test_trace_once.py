"""sidecar/runtime/trace_once.py: a start traces its compiled code once, as the last start's
second trace, when the floats torch had to specialize are kept beside the compile cache.

The compiled code is a module like the layer stack in the way that matters: one float (an
epsilon) becomes a tensor input, another goes to a custom op, which cannot take a tensor, so
torch traces twice. AOTAutograd with the eager backend stands in for Inductor (the restart comes
from AOTAutograd's pass; Inductor on the CPU takes tens of seconds). Each backend call is one
trace that reached the compiler.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._dynamo.backends.debugging import aot_eager

from sidecar.runtime import compile_cache, trace_once
from sidecar.runtime.compile_cache import INDUCTOR_ENV, TRITON_ENV


@torch.library.custom_op("trace_once_test::scaled", mutates_args=())
def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scaled.register_fake
def _(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.empty_like(x)


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.eps, self.factor = 1e-6, 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.trace_once_test.scaled(x + self.eps, self.factor)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (INDUCTOR_ENV, TRITON_ENV):  # `use` sets them: leave neither behind
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(compile_cache, "_active", None)
    compile_cache.use(str(tmp_path / "cache"))
    return trace_once.seed_path(tmp_path / "cache", trace_once.fingerprint("stack"))


def start(what: str = "stack") -> list[str]:
    """A start's compilation in a fresh torch.compile state; the code of each traced graph."""
    torch._dynamo.reset()  # what a new process starts from
    traces: list[str] = []

    def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        traces.append(gm.code)
        return aot_eager(gm, inputs)

    compiled = torch.compile(Scaled().forward, dynamic=True, backend=backend)
    with trace_once.seeded(what):
        assert torch.equal(compiled(torch.ones(4)), torch.full((4,), 0.5 * (1 + 1e-6)))
    return traces


def test_the_next_start_traces_once_and_gets_the_same_graph(cache: Path) -> None:
    first = start()
    assert len(first) == 2  # the float for the custom op: a restart
    names = json.loads(cache.read_text())["names"]
    assert len(names) == 1 and names[0].startswith("zf")
    assert start() == first[1:]  # one trace, the graph of the first start's second
    assert start() == first[1:] and json.loads(cache.read_text())["names"] == names


def test_a_seed_for_other_code_or_settings_is_not_used_nor_replaced(cache: Path) -> None:
    start()
    assert len(start("stack, other options")) == 2  # its own seed, recorded beside
    assert len(start()) == 1 and len(start("stack, other options")) == 1


def test_a_seed_that_does_not_prevent_the_restart_is_removed(cache: Path) -> None:
    key = trace_once.fingerprint("stack")
    cache.write_text(json.dumps({"fingerprint": key, "names": ["zf999999"]}))
    assert len(start()) == 2
    assert not cache.exists()
    assert len(start()) == 2 and len(start()) == 1  # recorded afresh, then used


def test_without_a_compile_cache_nothing_is_kept(cache: Path) -> None:
    compile_cache._active = None
    assert len(start()) == 2 and len(start()) == 2
    assert not cache.exists()
