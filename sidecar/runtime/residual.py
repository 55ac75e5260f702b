"""`add_product_`: a matrix product added onto the residual stream where the stream lies.

Each layer adds two projections to its residual stream: attention's output projection and the
MLP's down projection. torch.compile turns each `residual + x @ weight.T` into one cuBLAS call
(addmm, beta 1: the product accumulated onto the residual in float32, rounded once), but gives
that call a new output buffer, and PyTorch first copies the residual into it: two copies of the
whole stream per layer and forward pass. As a custom op that mutates the residual, the
same cuBLAS call adds onto the residual's own buffer: functionalization hands the op that buffer
when nothing reads the stream's old value afterwards, and nothing does once a layer has added
to it. Plain PyTorch, so it runs (and is tested) on the CPU too.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("omnivoice::add_product_", mutates_args=("residual",))
def add_product_(residual: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
    """residual [N, out] += x [N, in] @ weight [out, in].T, in one matrix product, in place."""
    residual.addmm_(x, weight.t())


@add_product_.register_fake
def _(residual: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
    return None
