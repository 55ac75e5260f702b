"""`ModelConfig`: the fields of a checkpoint's config.json that inference reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.shared.errors import CheckpointError


@dataclass(frozen=True)
class ModelConfig:
    """The OmniVoice head (codebooks, vocabulary) and its Qwen3 backbone's shapes."""

    num_codebooks: int
    audio_vocab_size: int  # codec codes plus MASK
    audio_mask_id: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float

    @classmethod
    def from_dict(cls, config: dict[str, object], where: str = "config.json") -> ModelConfig:
        llm = config.get("llm_config")
        if not isinstance(llm, dict):
            raise CheckpointError(f"{where}: no 'llm_config' section (the Qwen3 backbone config)")

        def need(section: dict[str, object], key: str, prefix: str) -> Any:
            if key not in section:
                raise CheckpointError(f"{where}: missing field '{prefix}{key}'")
            return section[key]

        rope = llm.get("rope_parameters") or {}
        rope_theta = rope.get("rope_theta", llm.get("rope_theta"))
        if rope_theta is None:
            raise CheckpointError(f"{where}: missing 'llm_config.rope_parameters.rope_theta'")
        rope_type = rope.get("rope_type", "default")
        if rope_type != "default":
            raise CheckpointError(
                f"{where}: rope_type {rope_type!r} is not supported (only 'default')"
            )
        num_heads = int(need(llm, "num_attention_heads", "llm_config."))
        hidden = int(need(llm, "hidden_size", "llm_config."))
        return cls(
            num_codebooks=int(need(config, "num_audio_codebook", "")),
            audio_vocab_size=int(need(config, "audio_vocab_size", "")),
            audio_mask_id=int(need(config, "audio_mask_id", "")),
            hidden_size=hidden,
            intermediate_size=int(need(llm, "intermediate_size", "llm_config.")),
            num_layers=int(need(llm, "num_hidden_layers", "llm_config.")),
            num_heads=num_heads,
            num_kv_heads=int(llm.get("num_key_value_heads") or num_heads),
            head_dim=int(llm.get("head_dim") or hidden // num_heads),
            vocab_size=int(need(llm, "vocab_size", "llm_config.")),
            rms_norm_eps=float(llm.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope_theta),
        )

    @property
    def num_parameters(self) -> int:
        """Parameters of the backbone layers (no embeddings): what each token multiplies through."""
        h, q, kv, m = (
            self.hidden_size,
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
            self.intermediate_size,
        )
        return self.num_layers * (h * q + 2 * h * kv + q * h + 3 * h * m)
