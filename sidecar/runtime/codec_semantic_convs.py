"""The codec's semantic branch around HuBERT (codec_semantic.py): the conv stack `Codec.encode`
runs over HuBERT's averaged features, and the training-time decoder that mirrors it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sidecar.runtime.codec_config import CodecConfig


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


class SemanticEncoder(nn.Module):
    """Conv stack over the averaged HuBERT features ([B, semantic_hidden, T] in and out), the
    semantic half of what `Codec.encode` quantizes."""

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


class SemanticDecoder(nn.Module):
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
