"""The published checkpoint layouts (OmniVoice's, and the Whisper of `--asr-model`), and what
can be known about a model source without loading it.

Standard library only: the supervisor checks `--model` and `--asr-model` with these before it
opens its port (their files present, their JSON and safetensors headers whole), and the loader
checks the same files before it reads them.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Kind:
    """A kind of checkpoint: the files it holds (and them in words, for messages)."""

    name: str
    files: tuple[str, ...]
    layout: str


OMNIVOICE = Kind("OmniVoice", REQUIRED_FILES, LAYOUT)
# What `AutoModelForSpeechSeq2Seq` and `AutoProcessor` read of a Whisper (sidecar/audio/asr.py).
WHISPER = Kind(
    "Whisper",
    ("config.json", "model.safetensors", "tokenizer_config.json"),
    "config.json, model.safetensors, tokenizer_config.json and a (pre)processor_config.json",
)
SAFETENSORS_HEADER_MAX = 100 * 2**20  # the format's own bound on the JSON header
# The key `make-checkpoint` writes into the config.json of a checkpoint it makes: its weights are
# random (right shapes, meaningless output), so the server says so and does not judge by them.
RANDOM_WEIGHTS = "random_weights"


def missing_files(root: Path, kind: Kind = OMNIVOICE) -> list[str]:
    return [name for name in kind.files if not (root / name).is_file()]


def damaged_file(root: Path, kind: Kind = OMNIVOICE) -> str | None:
    """The first of a checkpoint's files that cannot be read as what it is, saying why: a JSON
    file that does not parse, a safetensors file whose header does not parse or whose tensors
    run past its end (cut short, or overwritten). Reads the headers only, not the weights."""
    for name in kind.files:
        path = root / name
        try:
            if name.endswith(".json"):
                json.loads(path.read_bytes())
            elif name.endswith(".safetensors"):
                problem = safetensors_problem(path)
                if problem:
                    return f"{path}: {problem}"
        except (OSError, ValueError) as exc:
            return f"{path}: {exc}"
    return None


def has_random_weights(root: Path) -> bool:
    """Whether the checkpoint in `root` says (in its config.json) that its weights are random."""
    try:
        config = json.loads((root / "config.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get(RANDOM_WEIGHTS) is True


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a safetensors file's framing (None: its header and size agree)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{size} bytes: too short for a safetensors file"
        length = struct.unpack("<Q", head)[0]
        if length > min(SAFETENSORS_HEADER_MAX, size - 8):
            return "not a safetensors file (its header length is out of range)"
        try:
            header = json.loads(f.read(length))
            ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            return "not a safetensors file (its header is not a table of tensors)"
    needed = 8 + length + max(ends, default=0)
    if needed != size:
        return f"cut short or damaged: its header describes {needed} bytes, the file has {size}"
    return None


def is_hub_id(source: str) -> bool:
    """owner/name, and not a path that merely does not exist."""
    owner_and_name = source.count("/") == 1 and all(source.split("/"))
    return owner_and_name and not source.startswith((".", "/", "~"))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it: anything but empty, 0, false, no, off."""
    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def local_problem(source: str, kind: Kind = OMNIVOICE) -> str | None:
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
        return f"checkpoint {source!r} is a file; expected a directory holding {kind.layout}"
    missing = missing_files(path, kind)
    if missing:
        return incomplete(source, missing, kind)
    return None


def incomplete(root: Path | str, missing: list[str], kind: Kind = OMNIVOICE) -> str:
    """The message for a checkpoint directory without some of its files."""
    return (
        f"checkpoint {root} is incomplete: missing {', '.join(missing)} "
        f"(a checkpoint holds {kind.layout})"
    )
