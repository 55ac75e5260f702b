"""A checkpoint directory or Hugging Face id becomes a config, weights and a text tokenizer.

The published layout:

    config.json               OmniVoice config with the Qwen3 backbone under llm_config
    model.safetensors         backbone, audio embeddings and audio head
    tokenizer.json            the text tokenizer (Qwen2 BPE plus seven OmniVoice tokens)
    audio_tokenizer/          the Higgs Audio v2 codec: config.json, model.safetensors

Anything missing or malformed is one `CheckpointError` naming the piece, never a traceback.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer

from sidecar.runtime.config import ModelConfig
from sidecar.runtime.model import OmniVoiceModel
from sidecar.shared import layout
from sidecar.shared.errors import CheckpointError

log = logging.getLogger(__name__)

SPECIAL_TOKENS = (
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_checkpoint(source: str) -> Path:
    """A local directory as it is; otherwise a Hugging Face id, downloaded once into the HF cache."""
    problem = layout.local_problem(source)
    if problem:
        raise CheckpointError(problem)
    path = Path(source).expanduser()
    if path.exists():
        return path
    from huggingface_hub import snapshot_download

    if layout.hub_offline():
        try:
            return Path(snapshot_download(source, local_files_only=True))
        except Exception:
            raise CheckpointError(
                f"checkpoint {source!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is "
                f"set: download it first (hf download {source}), or pass the checkpoint "
                "directory instead"
            ) from None
    try:
        return Path(snapshot_download(source))
    except Exception as exc:  # network, auth, unknown repo: all end as one clear message
        raise CheckpointError(
            f"checkpoint {source!r}: could not download from Hugging Face "
            f"({type(exc).__name__}: {exc}); pass a checkpoint directory instead"
        ) from None


def check_layout(root: Path) -> None:
    missing = layout.missing_files(root)
    if missing:
        raise CheckpointError(layout.incomplete(root, missing))


def read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def read_safetensors(path: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable safetensors file ({exc})") from None


def load_tokenizer(root: Path) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    except Exception as exc:  # the tokenizers library raises plain Exception subclasses
        raise CheckpointError(f"{root / 'tokenizer.json'}: unreadable tokenizer ({exc})") from None
    missing = [t for t in SPECIAL_TOKENS if tokenizer.token_to_id(t) is None]
    if missing:
        raise CheckpointError(
            f"{root / 'tokenizer.json'}: missing the OmniVoice special tokens {', '.join(missing)}"
        )
    return tokenizer


def load_model(
    root: Path, device: str, dtype: torch.dtype, host: dict[str, torch.Tensor] | None = None
) -> OmniVoiceModel:
    """The backbone on `device` in `dtype`; its weights read from the checkpoint, or moved from
    `host`, where a spare read them as stored (sidecar/runtime/preload.py)."""
    cfg = ModelConfig.from_dict(read_json(root / "config.json"), where=str(root / "config.json"))
    # Straight to the device: the cast to the model's dtype then runs there, not on the host's
    # cores, and the weights cross to the device once, as stored.
    if host is None:
        weights = read_safetensors(root / "model.safetensors", device)
    else:
        weights = {name: tensor.to(device) for name, tensor in host.items()}
    with torch.device("meta"):
        model = OmniVoiceModel(cfg)
    expected = set(model.state_dict().keys())
    missing = sorted(expected - weights.keys())
    unexpected = sorted(weights.keys() - expected)
    if missing:
        raise CheckpointError(
            f"{root / 'model.safetensors'}: missing weights {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}"
        )
    if unexpected:
        log.warning(
            "%s: ignoring %d unexpected weights (%s)",
            root / "model.safetensors",
            len(unexpected),
            ", ".join(unexpected[:3]),
        )
    for name, want in model.state_dict().items():  # module order: the first misfit is named
        if tuple(weights[name].shape) != tuple(want.shape):
            raise CheckpointError(
                f"{root / 'model.safetensors'}: {name} has shape {tuple(weights[name].shape)}, config.json implies {tuple(want.shape)}"
            )
    state = {
        k: (v.to(dtype) if v.is_floating_point() else v)
        for k, v in weights.items()
        if k in expected
    }
    model.load_state_dict(state, strict=True, assign=True)
    # inv_freq is not in the checkpoint: rebuild it on the real device, in float32.
    model.llm.inv_freq = 1.0 / (
        cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float) / cfg.head_dim)
    )
    return model.to(device).eval()
