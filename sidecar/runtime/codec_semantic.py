"""The codec's semantic model: HuBERT, in plain torch, for inference on raw 16 kHz audio.

What `Codec` needs of it: every hidden state (the encoder's input and each layer's output) for
audio without an attention mask. Attribute names follow transformers' `HubertModel`, so
`audio_tokenizer/model.safetensors` loads key for key (the positional convolution keeps its weight
norm as a parametrization), and the operations run in the same order, attention as transformers'
"sdpa" path computes it, so the hidden states equal theirs bit for bit
(tests/sidecar/runtime/test_codec_semantic.py holds both to it). Inference only: dropout,
layer drop and SpecAugment do nothing in eval mode and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"gelu": F.gelu, "relu": F.relu}
_FEATURE_NORMS = ("group", "layer")


@dataclass(frozen=True)
class SemanticConfig:
    """The fields of `semantic_model_config` that shape the network, with HuBERT's defaults."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    feat_extract_norm: str = "group"  # "group": GroupNorm on the first conv only; "layer": on all
    feat_extract_activation: str = "gelu"
    feat_proj_layer_norm: bool = True
    conv_dim: tuple[int, ...] = (512, 512, 512, 512, 512, 512, 512)
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_bias: bool = False
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16
    conv_pos_batch_norm: bool = False  # BatchNorm before the positional conv instead of weight norm
    do_stable_layer_norm: bool = False  # pre-norm layers and a final LayerNorm (else post-norm)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SemanticConfig:
        """Read the known fields of `d` (other keys are training or head settings); raises
        ValueError for a config that does not describe a buildable network."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known
        }
        config = cls(**values)
        convs = {len(config.conv_dim), len(config.conv_stride), len(config.conv_kernel)}
        if len(convs) != 1:
            raise ValueError("conv_dim, conv_stride and conv_kernel differ in length")
        if config.feat_extract_norm not in _FEATURE_NORMS:
            raise ValueError(
                f"feat_extract_norm {config.feat_extract_norm!r} is not one of {_FEATURE_NORMS}"
            )
        for act in (config.hidden_act, config.feat_extract_activation):
            if act not in _ACTIVATIONS:
                raise ValueError(f"activation {act!r} is not one of {tuple(_ACTIVATIONS)}")
        if config.hidden_size % config.num_attention_heads:
            raise ValueError("hidden_size is not a multiple of num_attention_heads")
        return config


class _ConvLayer(nn.Module):
    """One feature-extractor conv, its optional norm (`group` or `layer`), then the activation."""

    def __init__(self, config: SemanticConfig, index: int, norm: str | None) -> None:
        super().__init__()
        c_in = config.conv_dim[index - 1] if index > 0 else 1
        c_out = config.conv_dim[index]
        self.conv = nn.Conv1d(
            c_in,
            c_out,
            config.conv_kernel[index],
            stride=config.conv_stride[index],
            bias=config.conv_bias,
        )
        self.norm = norm
        if norm == "group":  # one group per channel: a per-channel norm over time
            self.layer_norm: nn.Module = nn.GroupNorm(c_out, c_out, affine=True)
        elif norm == "layer":  # default eps here, not the config's
            self.layer_norm = nn.LayerNorm(c_out, elementwise_affine=True)
        self.activation = _ACTIVATIONS[config.feat_extract_activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.norm == "group":
            x = self.layer_norm(x)
        elif self.norm == "layer":
            x = self.layer_norm(x.transpose(-2, -1)).transpose(-2, -1)
        return self.activation(x)


class _FeatureExtractor(nn.Module):
    """Raw audio [B, N] -> conv features [B, C, T] (a stack of strided convs)."""

    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        layer = config.feat_extract_norm == "layer"
        self.conv_layers = nn.ModuleList(
            _ConvLayer(config, i, "layer" if layer else ("group" if i == 0 else None))
            for i in range(len(config.conv_dim))
        )

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = audio[:, None]
        for conv in self.conv_layers:
            x = conv(x)
        return x


class _FeatureProjection(nn.Module):
    """Conv features [B, T, C] -> [B, T, hidden]: an optional LayerNorm, then a linear map."""

    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        self.with_norm = config.feat_proj_layer_norm
        if self.with_norm:
            self.layer_norm = nn.LayerNorm(config.conv_dim[-1], eps=config.layer_norm_eps)
        self.projection = nn.Linear(config.conv_dim[-1], config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.with_norm:
            x = self.layer_norm(x)
        return self.projection(x)


class _PositionalConv(nn.Module):
    """A grouped conv over time as the position signal; weight-normed over the kernel axis."""

    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        h, k = config.hidden_size, config.num_conv_pos_embeddings
        conv = nn.Conv1d(h, h, k, padding=k // 2, groups=config.num_conv_pos_embedding_groups)
        self.batch_norm = nn.BatchNorm1d(h) if config.conv_pos_batch_norm else None
        self.conv = conv if config.conv_pos_batch_norm else weight_norm(conv, name="weight", dim=2)
        self.trim = 1 if k % 2 == 0 else 0  # an even kernel yields one step too many
        self.activation = _ACTIVATIONS[config.feat_extract_activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = self.conv(x)
        if self.trim:
            x = x[:, :, : -self.trim]
        return self.activation(x).transpose(1, 2)


class _SelfAttention(nn.Module):
    """Bidirectional multi-head self-attention without a mask, through PyTorch's SDPA."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.q_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> [B, heads, T, head_dim]"""
        return x.view(*x.shape[:-1], -1, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (
            self._heads(self.q_proj(x)),
            self._heads(self.k_proj(x)),
            self._heads(self.v_proj(x)),
        )
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=0.0, scale=self.scaling, is_causal=False
        )
        out = out.transpose(1, 2).contiguous()
        return self.out_proj(out.reshape(*x.shape[:-1], -1).contiguous())


class _FeedForward(nn.Module):
    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = _ACTIVATIONS[config.hidden_act]
        self.output_dense = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(self.activation(self.intermediate_dense(x)))


class _EncoderLayer(nn.Module):
    """A transformer layer, post-norm (norm after each residual sum) or pre-norm ("stable")."""

    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        h, eps = config.hidden_size, config.layer_norm_eps
        self.pre_norm = config.do_stable_layer_norm
        self.attention = _SelfAttention(h, config.num_attention_heads)
        self.layer_norm = nn.LayerNorm(h, eps=eps)
        self.feed_forward = _FeedForward(config)
        self.final_layer_norm = nn.LayerNorm(h, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.layer_norm(x))
            return x + self.feed_forward(self.final_layer_norm(x))
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class _Encoder(nn.Module):
    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        self.pre_norm = config.do_stable_layer_norm
        self.pos_conv_embed = _PositionalConv(config)
        # Post-norm: normalises the input of the first layer; pre-norm: the last layer's output.
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(_EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """[B, T, hidden] -> the first layer's input and every layer's output. In pre-norm mode
        the last of these is taken before the final LayerNorm, as transformers 5 returns it."""
        x = x + self.pos_conv_embed(x)
        if not self.pre_norm:
            x = self.layer_norm(x)
        states = [x]
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        return states


class SemanticModel(nn.Module):
    """HuBERT: raw 16 kHz audio [B, N] -> its hidden states, each [B, T, hidden], T ~ N / 320."""

    def __init__(self, config: SemanticConfig) -> None:
        super().__init__()
        self.config = config
        self.feature_extractor = _FeatureExtractor(config)
        self.feature_projection = _FeatureProjection(config)
        self.encoder = _Encoder(config)

    def forward(self, audio: torch.Tensor) -> list[torch.Tensor]:
        features = self.feature_extractor(audio).transpose(1, 2)
        return self.encoder(self.feature_projection(features))
