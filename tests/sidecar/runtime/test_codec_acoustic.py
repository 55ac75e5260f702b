"""Our DAC stacks against transformers' DacEncoder / DacDecoder on the same random weights: the
outputs are equal bit for bit (transformers is imported here only, never by the runtime)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from transformers.models.dac.configuration_dac import DacConfig
from transformers.models.dac.modeling_dac import DacDecoder, DacEncoder

from sidecar.devtools.checkpoint import SIZES
from sidecar.runtime.codec_acoustic import AcousticDecoder, AcousticEncoder, Snake1d

ACOUSTIC = SIZES["tiny"].acoustic
HOP = math.prod(ACOUSTIC["downsampling_ratios"])


def randomised(module: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """A state for `module` with every tensor drawn at random (positive where it must be), at a
    scale that keeps activations finite through the stacks."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, t in module.state_dict().items():
        r = torch.randn(t.shape, generator=gen)
        if name.endswith("alpha"):
            r = r.abs() + 0.5
        elif t.dim() >= 2:
            r = r / math.sqrt(math.prod(t.shape[1:]))
        else:
            r = r * 0.1
        state[name] = r
    return state


def higgs_decoder(config: DacConfig) -> DacDecoder:
    """transformers' DAC decoder as Higgs Audio v2 runs it: output_padding stride % 2, no tanh."""
    decoder = DacDecoder(config)
    for m in decoder.modules():
        if isinstance(m, nn.ConvTranspose1d):
            m.output_padding = (m.stride[0] % 2,)
    decoder.tanh = nn.Identity()  # type: ignore[assignment]
    return decoder


def load_same_random_state(ours: nn.Module, theirs: nn.Module, seed: int) -> None:
    """One random state (`randomised`) into both, strictly: the key names must agree."""
    state = randomised(ours, seed)
    ours.load_state_dict(state, strict=True)
    theirs.load_state_dict(state, strict=True)


def test_encoder_equals_transformers() -> None:
    ours = AcousticEncoder(
        ACOUSTIC["encoder_hidden_size"], ACOUSTIC["downsampling_ratios"], ACOUSTIC["hidden_size"]
    ).eval()
    theirs = DacEncoder(DacConfig(**ACOUSTIC)).eval()
    load_same_random_state(ours, theirs, 0)
    wav = torch.randn(2, 1, 3 * HOP + 123, generator=torch.Generator().manual_seed(1)) * 0.3
    with torch.inference_mode():
        got, want = ours(wav), theirs(wav)
    assert got.shape == (2, ACOUSTIC["hidden_size"], 3)
    assert torch.isfinite(got).all() and got.abs().max() > 1e-3  # a real signal, not zeros
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decoder_equals_transformers_as_higgs_runs_it(dtype: torch.dtype) -> None:
    ours = AcousticDecoder(
        ACOUSTIC["hidden_size"], ACOUSTIC["decoder_hidden_size"], ACOUSTIC["upsampling_ratios"]
    ).eval()
    theirs = higgs_decoder(DacConfig(**ACOUSTIC)).eval()
    load_same_random_state(ours, theirs, 2)
    ours.to(dtype)
    theirs.to(dtype)
    latents = torch.randn(2, ACOUSTIC["hidden_size"], 5, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        got, want = ours(latents.to(dtype)), theirs(latents.to(dtype))
    assert got.shape == (2, 1, 5 * HOP)  # each block multiplies the length exactly by its stride
    assert torch.isfinite(got).all() and got.abs().max() > 1e-3
    assert torch.equal(got, want)


def test_snake_keeps_one_alpha_per_channel() -> None:
    snake = Snake1d(3)
    with torch.no_grad():
        snake.alpha.copy_(torch.tensor([1.0, 2.0, 0.5]).view(1, 3, 1))
    x = torch.linspace(-2, 2, 12).view(1, 3, 4)
    alpha = snake.alpha
    want = x + torch.sin(alpha * x) ** 2 / alpha
    torch.testing.assert_close(snake(x), want)
