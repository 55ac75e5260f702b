"""Writes a complete OmniVoice checkpoint with seeded random weights, in the published layout."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from sidecar.devtools.checkpoint_tokenizer import build_tokenizer
from sidecar.devtools.checkpoint_weights import (
    AUDIO_VOCAB,
    CONFIDENT_HELP,
    NUM_CODEBOOKS,
    CheckpointSize,
    backbone_state,
    codec_state,
)
from sidecar.shared.layout import RANDOM_WEIGHTS

TRANSFORMERS_VERSION = "5.17.0"


_HUBERT_COMMON: dict[str, object] = {
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
_DAC_COMMON: dict[str, object] = {
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

SIZES: dict[str, CheckpointSize] = {
    # The shapes of the parity fixture: a 2-layer, 64-wide backbone and a narrow codec with the real hop.
    "tiny": CheckpointSize(
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
    "full": CheckpointSize(
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


def omnivoice_config(size: CheckpointSize) -> dict[str, object]:
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
        RANDOM_WEIGHTS: True,  # the server warns, and serves it as a test model
        "transformers_version": TRANSFORMERS_VERSION,
    }


def codec_config(size: CheckpointSize) -> dict[str, object]:
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


PREPROCESSOR_CONFIG: dict[str, object] = {
    "feature_extractor_type": "DacFeatureExtractor",
    "feature_size": 1,
    "hop_length": 960,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def _write_json(path: Path, data: dict[str, object]) -> None:
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
    probability about 0.5, see checkpoint_weights.CONFIDENT_LOGIT_STD); only that tensor differs."""
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
