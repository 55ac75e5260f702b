"""The published checkpoint layout, and what can be known about a model source without loading it.

Standard library only: the supervisor checks `--model` with these before it opens its port, and
the loader checks the same files before it reads them.
"""

from __future__ import annotations

import os
from pathlib import Path

REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "audio_tokenizer/config.json",
    "audio_tokenizer/model.safetensors",
)
LAYOUT = (
    "config.json, model.safetensors, tokenizer.json and "
    "audio_tokenizer/{config.json,model.safetensors}"
)


def missing_files(root: Path) -> list[str]:
    return [name for name in REQUIRED_FILES if not (root / name).is_file()]


def is_hub_id(source: str) -> bool:
    """owner/name, and not a path that merely does not exist."""
    owner_and_name = source.count("/") == 1 and all(source.split("/"))
    return owner_and_name and not source.startswith((".", "/", "~"))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it: anything but empty, 0, false, no, off."""
    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def local_problem(source: str) -> str | None:
    """What is wrong with `source` as a local checkpoint directory (None: fine, or a hub id)."""
    path = Path(source).expanduser()
    if not path.exists():
        if is_hub_id(source):
            return None
        return (
            f"checkpoint {source!r} not found: no such directory, "
            "and not a Hugging Face id (owner/name)"
        )
    if not path.is_dir():
        return f"checkpoint {source!r} is a file; expected a directory holding {LAYOUT}"
    missing = missing_files(path)
    if missing:
        return incomplete(source, missing)
    return None


def incomplete(root: Path | str, missing: list[str]) -> str:
    """The message for a checkpoint directory without some of its files."""
    return (
        f"checkpoint {root} is incomplete: missing {', '.join(missing)} "
        f"(a checkpoint holds {LAYOUT})"
    )
