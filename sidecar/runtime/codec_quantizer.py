"""The codec's residual vector quantizer: latent frames to codes (`encode`) and back (`decode`),
one Euclidean codebook per stage, in the reference's order of operations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from sidecar.runtime.codec_config import CodecConfig


class _Codebook(nn.Module):
    """Euclidean codebook; `cluster_size`, `embed_avg` and `inited` are EMA training state kept for loading."""

    inited: torch.Tensor  # buffers: nn.Module's attribute lookup types them only as Tensor | Module
    cluster_size: torch.Tensor
    embed: torch.Tensor
    embed_avg: torch.Tensor

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("inited", torch.ones(1))
        self.register_buffer("cluster_size", torch.zeros(size))
        self.register_buffer("embed", torch.zeros(size, dim))
        self.register_buffer("embed_avg", torch.zeros(size, dim))

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """Index of the nearest code for each row of x [N, dim]."""
        # Same expression and operation order as the reference, so near-ties resolve identically.
        embed = self.embed.t()
        dist = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices


class _Quantizer(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.codebook = _Codebook(cfg.codebook_size, cfg.codebook_dim)
        self.project_in = nn.Linear(cfg.hidden_size, cfg.codebook_dim)
        self.project_out = nn.Linear(cfg.codebook_dim, cfg.hidden_size)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> codes [B, T]."""
        z = self.project_in(x)
        return self.codebook.nearest(z.reshape(-1, z.shape[-1])).view(z.shape[:-1])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T] -> [B, T, hidden]."""
        return self.project_out(F.embedding(codes, self.codebook.embed))


class ResidualVQ(nn.Module):
    """`num_quantizers` stages, each quantizing what the ones before it left over."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.quantizers = cast(
            "Sequence[_Quantizer]",
            nn.ModuleList(_Quantizer(cfg) for _ in range(cfg.num_quantizers)),
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> codes [B, Q, T]."""
        residual, codes = x, []
        for q in self.quantizers:
            idx = q.encode(residual)
            residual = residual - q.decode(idx)
            codes.append(idx)
        return torch.stack(codes, dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, Q, T] -> [B, T, hidden], summed in codebook order as the reference does."""
        out = self.quantizers[0].decode(codes[:, 0])
        for i in range(1, codes.shape[1]):
            out = out + self.quantizers[i].decode(codes[:, i])
        return out
