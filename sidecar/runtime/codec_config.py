"""The Higgs Audio v2 codec's configuration: the fields of `audio_tokenizer/config.json` that shape
the network, with transformers' defaults, and the sizes that follow from them."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.shared.errors import CheckpointError

# SpecAugment masking only runs in training; forcing it off also keeps HubertModel from creating the
# training-only `masked_spec_embed` parameter, which the checkpoint may carry and we then skip.
_SEMANTIC_OVERRIDES: dict[str, float] = {"mask_time_prob": 0.0, "mask_feature_prob": 0.0}


@dataclass(frozen=True)
class AcousticConfig:
    """`acoustic_model_config`'s fields that shape the network. The defaults are transformers'
    (HiggsAudioV2TokenizerConfig fills them in under whatever the checkpoint gives), so a config
    that leaves them out builds the same network."""

    encoder_hidden_size: int = 64
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    decoder_hidden_size: int = 1024
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    hidden_size: int = 256

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AcousticConfig:
        default = cls()
        return cls(
            encoder_hidden_size=int(d.get("encoder_hidden_size", default.encoder_hidden_size)),
            downsampling_ratios=tuple(
                int(r) for r in d.get("downsampling_ratios", default.downsampling_ratios)
            ),
            decoder_hidden_size=int(d.get("decoder_hidden_size", default.decoder_hidden_size)),
            upsampling_ratios=tuple(
                int(r) for r in d.get("upsampling_ratios", default.upsampling_ratios)
            ),
            hidden_size=int(d.get("hidden_size", default.hidden_size)),
        )


@dataclass(frozen=True)
class CodecConfig:
    """The fields of `audio_tokenizer/config.json` that shape the network."""

    acoustic: AcousticConfig
    semantic: dict[str, Any]  # config.json's HuBERT section, as read: SemanticConfig.from_dict
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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CodecConfig:
        try:
            return cls(
                acoustic=AcousticConfig.from_dict(d.get("acoustic_model_config", {})),
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
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"audio_tokenizer/config.json is malformed: {exc}") from exc

    @property
    def hop_length(self) -> int:
        return math.prod(self.acoustic.downsampling_ratios)

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def semantic_hidden_size(self) -> int:
        return int(self.semantic["hidden_size"])

    @property
    def acoustic_hidden_size(self) -> int:
        return self.acoustic.hidden_size

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


def read_codec_config(audio_tokenizer_dir: Path) -> CodecConfig:
    """The configuration in `audio_tokenizer_dir`; a missing or malformed file is a
    `CheckpointError`."""
    path = Path(audio_tokenizer_dir) / "config.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"codec config not found: {path}") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"codec config {path} is unreadable: {exc}") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"codec config {path} is not a JSON object")
    return CodecConfig.from_dict(raw)
