"""The Higgs Audio v2 codec's configuration and the building blocks `Codec` composes: the
semantic encoder and decoder around HuBERT, and the residual vector quantizer."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from sidecar.shared.errors import CheckpointError

# transformers' HiggsAudioV2TokenizerConfig fills these in under whatever the checkpoint's config gives;
# we apply the same defaults so a config that leaves them out builds the same network.
_ACOUSTIC_DEFAULTS: dict[str, Any] = {
    "encoder_hidden_size": 64,
    "downsampling_ratios": [8, 5, 4, 2],
    "decoder_hidden_size": 1024,
    "upsampling_ratios": [8, 5, 4, 2],
    "hidden_size": 256,
}
# SpecAugment masking only runs in training; forcing it off also keeps HubertModel from creating the
# training-only `masked_spec_embed` parameter, which the checkpoint may carry and we then skip.
_SEMANTIC_OVERRIDES: dict[str, Any] = {"mask_time_prob": 0.0, "mask_feature_prob": 0.0}


@dataclass(frozen=True)
class CodecConfig:
    """The fields of `audio_tokenizer/config.json` that shape the network."""

    acoustic: dict[str, Any]
    semantic: dict[str, Any]
    sample_rate: int = 24000
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    kernel_size: int = 3
    unit_kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    codebook_size: int = 1024
    codebook_dim: int = 64
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2, 4)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CodecConfig:
        try:
            return cls(
                acoustic={**_ACOUSTIC_DEFAULTS, **d.get("acoustic_model_config", {})},
                semantic={**d.get("semantic_model_config", {}), **_SEMANTIC_OVERRIDES},
                sample_rate=int(d.get("sample_rate", 24000)),
                semantic_sample_rate=int(d.get("semantic_sample_rate", 16000)),
                downsample_factor=int(d.get("downsample_factor", 320)),
                kernel_size=int(d.get("kernel_size", 3)),
                unit_kernel_size=int(d.get("unit_kernel_size", 3)),
                channel_ratios=tuple(d.get("channel_ratios", (1, 1))),
                strides=tuple(int(s) for s in d.get("strides", (1, 1))),
                block_dilations=tuple(int(x) for x in d.get("block_dilations", (1, 1))),
                codebook_size=int(d.get("codebook_size", 1024)),
                codebook_dim=int(d.get("codebook_dim", 64)),
                target_bandwidths=tuple(d.get("target_bandwidths", (0.5, 1, 1.5, 2, 4))),
                raw=dict(d),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"audio_tokenizer/config.json is malformed: {exc}") from exc

    @property
    def hop_length(self) -> int:
        return math.prod(int(r) for r in self.acoustic["downsampling_ratios"])

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def semantic_hidden_size(self) -> int:
        return int(self.semantic["hidden_size"])

    @property
    def acoustic_hidden_size(self) -> int:
        return int(self.acoustic["hidden_size"])

    @property
    def hidden_size(self) -> int:
        return self.acoustic_hidden_size + self.semantic_hidden_size

    @property
    def num_quantizers(self) -> int:
        # The codec runs at its highest bandwidth; the number of codebooks follows from it.
        nbits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * nbits))

    @property
    def semantic_downsample_factor(self) -> int:
        return int(
            self.hop_length
            / (self.sample_rate / self.semantic_sample_rate)
            / self.downsample_factor
        )


class _ResidualUnit(nn.Module):
    """ELU -> dilated conv -> ELU -> 1x1 conv, plus the skip; no biases."""

    def __init__(self, cfg: CodecConfig, channels: int, dilation: int) -> None:
        super().__init__()
        k = cfg.unit_kernel_size
        self.conv1 = nn.Conv1d(
            channels, channels, k, padding=((k - 1) // 2) * dilation, dilation=dilation, bias=False
        )
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class _SemanticEncoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(_ResidualUnit(cfg, c_in, d) for d in cfg.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride  # stride 1 would otherwise get an even kernel
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class _SemanticEncoder(nn.Module):
    """Conv stack over the averaged HuBERT features."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        h = cfg.semantic_hidden_size
        self.conv = nn.Conv1d(h, h, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)
        blocks, c_in = [], h
        for ratio, stride in zip(cfg.channel_ratios, cfg.strides, strict=True):
            c_out = int(h * ratio)
            blocks.append(_SemanticEncoderBlock(cfg, c_in, c_out, stride))
            c_in = c_out
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class _SemanticDecoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv: nn.Module
        if stride == 1:
            self.conv = nn.Conv1d(c_in, c_out, 3, padding=1)
        else:
            self.conv = nn.ConvTranspose1d(
                c_in,
                c_out,
                2 * stride,
                stride,
                padding=(stride + 1) // 2,
                output_padding=stride % 2,
                bias=False,
            )
        self.res_units = nn.ModuleList(_ResidualUnit(cfg, c_out, d) for d in cfg.block_dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for unit in self.res_units:
            x = unit(x)
        return x


class _SemanticDecoder(nn.Module):
    """The training-time semantic reconstruction head; inference never runs it, but its weights are
    in the checkpoint, so it exists to load them strictly."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        h, ratios = cfg.semantic_hidden_size, cfg.channel_ratios
        self.conv1 = nn.Conv1d(
            h, int(h * ratios[0]), cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False
        )
        blocks = []
        for i, stride in enumerate(cfg.strides):
            c_out = int(h * ratios[i + 1]) if i < len(ratios) - 1 else h
            blocks.append(_SemanticDecoderBlock(cfg, int(h * ratios[i]), c_out, stride))
        self.conv_blocks = nn.ModuleList(blocks)
        self.conv2 = nn.Conv1d(h, h, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.conv_blocks:
            x = block(x)
        return self.conv2(x)


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


class _ResidualVQ(nn.Module):
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
