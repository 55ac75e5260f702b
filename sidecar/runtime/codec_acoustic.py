"""The codec's acoustic branch: the DAC encoder and decoder with Snake activations, in plain torch.

Higgs Audio v2 uses DAC's convolutional stacks with two changes to the decoder: each transposed
convolution gets `output_padding = stride % 2` (so every block multiplies the length exactly by
its stride), and there is no final tanh. Attribute names follow transformers' `DacEncoder` and
`DacDecoder`, so `audio_tokenizer/model.safetensors` loads key for key, and the operations run
in the same order, so the outputs equal theirs bit for bit (tests/sidecar/runtime/
test_codec_acoustic.py holds both to it). No weight norm: the published weights are plain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

# Snake's guard against a zero alpha, as DAC has it.
_SNAKE_EPS = 1e-9
# Each residual unit's dilations, in order.
_DILATIONS = (1, 3, 9)


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Snake, x + sin(alpha x)^2 / alpha, per channel; alpha is shaped [1, C, 1]."""
    shape = x.shape
    x = x.reshape(shape[0], shape[1], -1)
    return (x + (alpha + _SNAKE_EPS).reciprocal() * torch.sin(alpha * x).pow(2)).reshape(shape)


class Snake1d(nn.Module):
    """Snake with a learned frequency per channel. `Codec.fuse_activations` replaces an
    instance's `forward` with a compiled `snake` bound to its alpha."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return snake(x, self.alpha)


class _ResidualUnit(nn.Module):
    """x + conv(snake(conv(snake(x)))): a dilated 7-tap conv, then a 1-tap one; same length."""

    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(channels)
        self.conv1 = nn.Conv1d(channels, channels, 7, dilation=dilation, padding=3 * dilation)
        self.snake2 = Snake1d(channels)
        self.conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.snake2(self.conv1(self.snake1(x))))


def _strided_padding(stride: int) -> int:
    return math.ceil(stride / 2)


class _EncoderBlock(nn.Module):
    """Three residual units at `channels`, then a strided conv to twice the channels."""

    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.res_unit1 = _ResidualUnit(channels, _DILATIONS[0])
        self.res_unit2 = _ResidualUnit(channels, _DILATIONS[1])
        self.res_unit3 = _ResidualUnit(channels, _DILATIONS[2])
        self.snake1 = Snake1d(channels)
        self.conv1 = nn.Conv1d(
            channels, 2 * channels, 2 * stride, stride=stride, padding=_strided_padding(stride)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res_unit3(self.res_unit2(self.res_unit1(x)))
        return self.conv1(self.snake1(x))


class _DecoderBlock(nn.Module):
    """A transposed conv upsampling by `stride` to half the channels, then three residual units."""

    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        out = channels // 2
        self.snake1 = Snake1d(channels)
        self.conv_t1 = nn.ConvTranspose1d(
            channels,
            out,
            2 * stride,
            stride=stride,
            padding=_strided_padding(stride),
            output_padding=stride % 2,  # Higgs: the length grows by exactly `stride`
        )
        self.res_unit1 = _ResidualUnit(out, _DILATIONS[0])
        self.res_unit2 = _ResidualUnit(out, _DILATIONS[1])
        self.res_unit3 = _ResidualUnit(out, _DILATIONS[2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t1(self.snake1(x))
        return self.res_unit3(self.res_unit2(self.res_unit1(x)))


class AcousticEncoder(nn.Module):
    """Audio [B, 1, N] -> latents [B, latent, N / prod(ratios)]; channels double at each block."""

    def __init__(self, channels: int, ratios: Sequence[int], latent: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, channels, 7, padding=3)
        self.block = nn.ModuleList(
            _EncoderBlock(channels * 2**i, int(stride)) for i, stride in enumerate(ratios)
        )
        width = channels * 2 ** len(ratios)
        self.snake1 = Snake1d(width)
        self.conv2 = nn.Conv1d(width, latent, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


class AcousticDecoder(nn.Module):
    """Latents [B, latent, T] -> audio [B, 1, T * prod(ratios)]; channels halve at each block.
    The output is not squashed (no tanh)."""

    def __init__(self, latent: int, channels: int, ratios: Sequence[int]) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(latent, channels, 7, padding=3)
        self.block = nn.ModuleList(
            _DecoderBlock(channels // 2**i, int(stride)) for i, stride in enumerate(ratios)
        )
        width = channels // 2 ** len(ratios)
        self.snake1 = Snake1d(width)
        self.conv2 = nn.Conv1d(width, 1, 7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))
