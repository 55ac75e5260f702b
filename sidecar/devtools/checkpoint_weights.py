"""The test checkpoint's weights: seeded random tensors for the backbone and the codec, drawn so
that the model runs like a real one (a live codec, an audio head as confident as asked), to the
shape a `CheckpointSize` gives."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from sidecar.runtime.codec import Codec
from sidecar.runtime.codec_config import CodecConfig

NUM_CODEBOOKS = 8
AUDIO_VOCAB = 1025  # 1024 codec codes + MASK


@dataclass(frozen=True)
class CheckpointSize:
    """The shape of a test checkpoint (`checkpoint.SIZES`): the Qwen3 backbone's sizes, how its
    weights are drawn and stored, and the codec's sub-configs."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    max_pos: int
    # backbone weights; large for tiny so its logits are far from uniform (few ties)
    init_std: float
    dtype: torch.dtype  # backbone tensors on disk; the codec is always float32 as published
    acoustic: dict[str, object]
    semantic: dict[str, object]
    codebook_dim: int


def _normal(gen: torch.Generator, shape: Iterable[int], std: float) -> torch.Tensor:
    return torch.randn(tuple(shape), generator=gen) * std


# A confident checkpoint's audio head gives logits of this standard deviation: over 1025 classes,
# softmax of independent N(0, 4.6^2) logits puts 0.50 on its top class on average (a Monte
# Carlo draw of 4096 positions gives 0.499; the tiny model measures 0.53 in
# tests/sidecar/devtools/test_checkpoint.py, the plain tiny head 0.20). A trained model is sure of some
# frames and torn on others; half the mass on the winner is a middle guess (the published weights
# cannot be fetched here).
CONFIDENT_LOGIT_STD = 4.6
CONFIDENT_HELP = "scale the audio head so each position puts about half its probability on one code"


def confident_head_gain(size: CheckpointSize) -> float:
    """Factor on the audio head that makes its logits N(0, CONFIDENT_LOGIT_STD^2) per class.

    The final RMSNorm (weight 1) leaves every hidden vector with norm sqrt(hidden), so a head row
    drawn at init_std gives a logit of standard deviation init_std * sqrt(hidden)."""
    return CONFIDENT_LOGIT_STD / (size.init_std * math.sqrt(size.hidden))


def backbone_state(
    size: CheckpointSize, gen: torch.Generator, confident: bool = False
) -> dict[str, torch.Tensor]:
    """model.safetensors: Qwen3 layers under llm.*, the audio embeddings and head, the codebook offsets.
    Each tensor is drawn in float32 and cast at once, so the full model never sits in memory twice.
    `confident` scales the audio head (`confident_head_gain`); every other tensor is unchanged."""
    h, q, kv, std = (
        size.hidden,
        size.heads * size.head_dim,
        size.kv_heads * size.head_dim,
        size.init_std,
    )
    out: dict[str, torch.Tensor] = {}

    def put(name: str, tensor: torch.Tensor) -> None:
        out[name] = tensor.to(size.dtype)

    put("llm.embed_tokens.weight", _normal(gen, (size.vocab, h), std))
    for i in range(size.layers):
        p = f"llm.layers.{i}."
        put(p + "self_attn.q_proj.weight", _normal(gen, (q, h), std))
        put(p + "self_attn.k_proj.weight", _normal(gen, (kv, h), std))
        put(p + "self_attn.v_proj.weight", _normal(gen, (kv, h), std))
        put(p + "self_attn.o_proj.weight", _normal(gen, (h, q), std))
        put(p + "self_attn.q_norm.weight", torch.ones(size.head_dim))
        put(p + "self_attn.k_norm.weight", torch.ones(size.head_dim))
        put(p + "mlp.gate_proj.weight", _normal(gen, (size.mlp, h), std))
        put(p + "mlp.up_proj.weight", _normal(gen, (size.mlp, h), std))
        put(p + "mlp.down_proj.weight", _normal(gen, (h, size.mlp), std))
        put(p + "input_layernorm.weight", torch.ones(h))
        put(p + "post_attention_layernorm.weight", torch.ones(h))
    put("llm.norm.weight", torch.ones(h))
    put("audio_embeddings.weight", _normal(gen, (NUM_CODEBOOKS * AUDIO_VOCAB, h), std))
    head_std = std * confident_head_gain(size) if confident else std
    put("audio_heads.weight", _normal(gen, (NUM_CODEBOOKS * AUDIO_VOCAB, h), head_std))
    out["codebook_layer_offsets"] = torch.arange(NUM_CODEBOOKS, dtype=torch.int64) * AUDIO_VOCAB
    return out


# Scale of the codebook vectors relative to the projected latents they quantise. Transformers'
# random init leaves codebooks at zero, which makes every code 0 and decoding independent of the
# codes; non-zero codebooks at the latents' scale give varied codes and code-dependent audio.
_CODEBOOK_STD = 0.5
# Residual branches of the DAC stacks start damped (as is usual for deep residual nets), else the
# 15 residual units of the decoder grow the signal ~300x; the last conv then sets the output level.
_RESIDUAL_GAIN = 0.25
_OUTPUT_GAIN = {"acoustic_decoder.conv2.weight": 0.01}


def _codec_tensor(name: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """One codec tensor. Weights are drawn at 1/sqrt(fan-in) so activations keep about unit scale
    through the deep conv stacks; transformers' fixed std 0.02 shrinks the decoded audio to ~1e-9,
    under the post-processor's silence threshold."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "alpha":  # Snake
        return torch.ones(shape)
    if "norm" in name.rsplit(".", 2)[-2] and leaf in ("weight", "bias"):  # LayerNorm / GroupNorm
        return torch.ones(shape) if leaf == "weight" else torch.zeros(shape)
    if leaf in ("inited", "cluster_size"):  # EMA bookkeeping, unused at inference
        return torch.ones(shape)
    if leaf == "embed":
        return _normal(gen, shape, _CODEBOOK_STD)
    if leaf == "bias":
        return torch.zeros(shape)
    if ".conv_t1." in name:
        # ConvTranspose1d weight [in, out, 2*stride]: each output sums in * 2 taps.
        fan_in = shape[0] * 2
    else:
        fan_in = math.prod(shape[1:])  # Conv1d [out, in, k] or Linear [out, in]
    gain = _RESIDUAL_GAIN if ".res_unit" in name and name.endswith(".conv2.weight") else 1.0
    return _normal(gen, shape, _OUTPUT_GAIN.get(name, gain) / math.sqrt(fan_in))


def codec_state(config: dict[str, object], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """audio_tokenizer/model.safetensors for our Codec module, in fp32, key for key."""
    cfg = CodecConfig.from_dict(config)
    with torch.device("meta"):  # shapes only; no memory, no throwaway initialisation
        shapes = {k: v.shape for k, v in Codec(cfg).state_dict().items()}
    out: dict[str, torch.Tensor] = {}
    for name in sorted(shapes):
        if name.endswith((".parametrizations.weight.original0", ".codebook.embed_avg")):
            continue  # derived from another tensor below
        out[name] = _codec_tensor(name, shapes[name], gen).float()
    for name in [k for k in out if k.endswith(".parametrizations.weight.original1")]:
        # HuBERT's positional conv uses weight norm over dim 2: set the gain to |v| so weight == v.
        gain = name[: -len("original1")] + "original0"
        out[gain] = torch.linalg.vector_norm(out[name], dim=(0, 1), keepdim=True)
    for name in [k for k in out if k.endswith(".codebook.embed")]:
        out[name[: -len("embed")] + "embed_avg"] = out[name].clone()
    # Training-only SpecAugment vector: our loader skips it, but the published file has it.
    out["semantic_model.masked_spec_embed"] = torch.rand(cfg.semantic_hidden_size, generator=gen)
    return out
