"""sidecar/runtime/kernels/norm_rope.py: attention's q/k norm and rotary as one Triton kernel, against the
model's own eager code (`RMSNorm`, then q * cos + rotate_half(q) * sin).

There is no GPU here: the kernel runs in Triton's interpreter (TRITON_INTERPRET=1), in an
interpreter process of its own (the variable must be set before Triton decorates the kernel).
The interpreter converts float32 to bf16 by truncation where a GPU rounds to nearest even, so
the kernel's rounding steps cannot be checked here: in float32 (where they are no-ops) its
arithmetic must match the eager code to float32 rounding; in bf16 every element must be within a
few units in the last place (a wrong half, sign or row would be off by far more). Whether its
bf16 rounding matches the compiled stack's is the GPU's to measure (the stack without the
kernel against the stack with it, `bench/stack_check.py --compare`: on an H200, the same logits
bit for bit; bench/results/2026-12-02-norm-rope-step.json).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import triton

from sidecar.runtime.kernels import norm_rope
from tests.helpers.triton_interpreter import interpreted

CASES = r"""
import json, torch
from sidecar.runtime.kernels import norm_rope
from sidecar.runtime.model import RMSNorm, rotate_half

torch.manual_seed(0)
D = 128


def case(tokens, heads, dtype):
    x = (torch.randn(tokens, heads, D) * 2).to(dtype)
    norm = RMSNorm(D, 1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.1 * torch.randn(D))
    positions = torch.randint(0, 3000, (tokens,))
    freqs = positions[:, None].float() / (1e6 ** (torch.arange(0, D, 2).float() / D))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    with torch.no_grad():
        q = norm(x)
        want = q * cos.unsqueeze(1) + rotate_half(q) * sin.unsqueeze(1)
    got = torch.empty_like(x)
    norm_rope.launch(x, norm.weight.detach(), cos, sin, 1e-6, got)
    diff = (got.float() - want.float()).abs()
    scale = want.float().abs()
    return {
        "max_abs": float(diff.max()),
        "mean_abs": float(diff.mean()),
        "largest": float(scale.max()),
        "shape": list(got.shape),
        "op_equal": bool(torch.equal(
            torch.ops.omnivoice.norm_rope(x, norm.weight.detach(), cos, sin, 1e-6), got)),
    }


print(json.dumps({
    "q_float32": case(37, 16, torch.float32),  # 592 rows: 37 programs of 16
    "k_float32": case(37, 8, torch.float32),  # 296 rows: the last program half empty
    "q_bfloat16": case(37, 16, torch.bfloat16),
    "one_token": case(1, 8, torch.float32),
}))
"""


def test_the_kernel_normalises_and_rotates_as_the_model_does() -> None:
    out = interpreted(CASES)
    for name in ("q_float32", "k_float32", "one_token"):
        assert out[name]["max_abs"] < 1e-5, (name, out[name])  # values of order 1
    # bf16: the interpreter truncates where the GPU rounds, so each product and the sum may be
    # a unit or two off in their last place: 2^-6 at the outputs' largest (4 to 8), a few of them
    # at most; a wrong half, sign or row would be off by the values themselves (order 1).
    bf16 = out["q_bfloat16"]
    assert 4 <= bf16["largest"] < 16 and bf16["max_abs"] < 0.1 and bf16["mean_abs"] < 0.01, bf16
    assert out["q_float32"]["shape"] == [37, 16, 128] and out["one_token"]["shape"] == [1, 8, 128]
    assert all(case["op_equal"] for case in out.values()), out  # the custom op runs the kernel


# The model's packed forward pass on the tiny checkpoint, with every layer's q/k going through
# the kernel (the runner turns it on only on a GPU in half precision, so the layers' flags are
# set here): in float32 its logits must be the eager path's up to float32 rounding.
PROMPTS = r"""
import json, sys, torch
import sidecar.runtime.kernels.norm_rope  # registers torch.ops.omnivoice.norm_rope
from sidecar.runtime.generate import BatchState
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.omnivoice import OmniVoice

model = OmniVoice.load(sys.argv[1])
requests = [GenerationRequest(text="The quiet harbour at dawn.", seed=1),
            GenerationRequest(text="A second, longer sentence to pack beside it.", seed=2)]
items = [model.prompter.prepare(r) for r in requests]
prompts = [model.prompter.prompt(it, it.text, it.target_len, None, None) for it in items]
"""  # the tiny checkpoint's model and two packed prompts, for both scripts below
MODEL = (
    PROMPTS
    + r"""

def logits(fused):
    for layer in model.model.llm.layers:
        layer.self_attn.fused_norm_rope = fused
    with torch.inference_mode():
        return BatchState(model.model, prompts, model.runner).logits()


eager, fused = logits(False), logits(True)
print(json.dumps({"max_abs": float((eager - fused).abs().max()),
                  "largest": float(eager.abs().max()), "equal": bool(torch.equal(eager, fused))}))
"""
)


def test_the_models_forward_with_the_kernel_gives_the_eager_logits(checkpoint_dir: Path) -> None:
    out = interpreted(MODEL, str(checkpoint_dir))
    assert out["max_abs"] < 1e-4 * max(1.0, out["largest"]), out


def _ptx(options: dict[str, object], constexprs: dict[str, object]) -> str:
    """The kernel's PTX for an H200 (sm_90): Triton compiles for a GPU it does not have."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {name: "*bf16" for name in ("x", "weight", "cos", "sin", "out")}
    signature |= {"rows": "i32", "heads": "i32", "eps": "fp32"}
    signature |= dict.fromkeys(constexprs, "constexpr")
    source = ASTSource(norm_rope._norm_rope_kernel, signature, constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    return str(compiled.asm["ptx"])


def test_the_op_compiles_the_kernel_without_contraction(monkeypatch: pytest.MonkeyPatch) -> None:
    """With contraction (Triton's default), the compiler fuses a rounded product and the sum
    after it into one bf16 FMA, which rounds once where eager rounds twice: on an H200 ~18 % of
    the elements came out a unit off (bench/results/2026-12-02-norm-rope-probe.json). The op
    must launch the kernel without it. What the op passes is caught here (no GPU runs it), then
    the kernel is compiled for sm_90 with those options: no FMA may be left, where the same
    compile with contraction has some (so this check can see them)."""
    launches: list[dict[str, object]] = []

    class Recorder:  # stands in for the kernel's launcher: there is no GPU to launch on
        def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
            return lambda *args, **kwargs: launches.append(kwargs)

    monkeypatch.setattr(norm_rope, "_norm_rope_kernel", Recorder())
    x = torch.zeros(3, 16, 128, dtype=torch.bfloat16)
    tables = torch.zeros(3, 128, dtype=torch.bfloat16)
    torch.ops.omnivoice.norm_rope(x, torch.ones(128, dtype=torch.bfloat16), tables, tables, 1e-6)
    monkeypatch.undo()
    (launch,) = launches
    options = {key: launch.pop(key) for key in ("num_warps", "enable_fp_fusion")}
    assert options["enable_fp_fusion"] is False, launch
    ptx = _ptx(options, launch)
    assert "fma." not in ptx and "mul.rn.bf16" in ptx
    assert "fma.rn.bf16" in _ptx({**options, "enable_fp_fusion": True}, launch)


# The same forward pass through the compiled layer stack (Inductor's CPU backend, float32): the
# op is opaque to the compiler, so the generated code must call it, and the logits must be the
# unfused stack's up to float32 rounding.
COMPILED = (
    PROMPTS
    + r"""
from torch._inductor.utils import run_and_get_code
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.runner import ModelRunner


def logits(fused):
    torch._dynamo.reset()
    runner = ModelRunner(model.model, RuntimeOptions(cuda_graphs=False, compile=True))
    for layer in model.model.llm.layers:  # read when the stack is traced, at its first call
        layer.self_attn.fused_norm_rope = fused
    with torch.inference_mode():
        return run_and_get_code(lambda: BatchState(model.model, prompts, runner).logits())


(plain, _), (fused, code) = logits(False), logits(True)
print(json.dumps({"max_abs": float((plain - fused).abs().max()),
                  "largest": float(plain.abs().max()),
                  "op_calls": "\n".join(code).count("torch.ops.omnivoice.norm_rope.default(")}))
"""
)


def test_the_compiled_stack_calls_the_op(checkpoint_dir: Path) -> None:
    out = interpreted(COMPILED, str(checkpoint_dir))
    assert out["op_calls"] >= 2, out  # q and k, in each graph the stack compiles to
    assert out["max_abs"] < 1e-4 * max(1.0, out["largest"]), out
