"""`--model` and `--asr-model` checked before the port opens: what can be known without loading
them (no torch here).

A local directory must hold the checkpoint's files, with its JSON files parsing and its
safetensors files whole (header and size agreeing: a file cut short or overwritten is found
here, not by every sidecar that tries to load it). A Hugging Face id is fine when the cache
holds its files (checked the same way); otherwise, offline (HF_HUB_OFFLINE) it cannot work, and
online the hub is asked whether it exists and holds them (supervision/hub_check.py). What only
loading can tell (weights of the wrong shapes, say) is still the sidecar's to report: the
OmniVoice pool's failure ends the server (`--failed-exit-s`); the ASR sidecar's leaves speech
going out unheard (supervisor/speech/checks/asr_round_trip.py).
"""

from __future__ import annotations

from pathlib import Path

from sidecar.shared import layout
from sidecar.shared.layout import Kind
from supervisor.settings import SidecarSettings
from supervisor.supervision.hub_check import hub_problem

WHAT_TO_DO = (
    "give a checkpoint directory (--model /path/to/checkpoint) or a Hugging Face id "
    "(--model k2-fsa/OmniVoice)"
)
ASR_WHAT_TO_DO = (
    "give a Whisper checkpoint directory (--asr-model /path/to/whisper) or a Hugging Face id "
    "(--asr-model openai/whisper-large-v3-turbo), or leave --asr-model out"
)


def model_problem(settings: SidecarSettings) -> str | None:
    """One line saying what is wrong with --model or --asr-model and what to do, or None."""
    if settings.engine == "omnivoice":
        problem = source_problem("--model", settings.model, layout.OMNIVOICE, WHAT_TO_DO)
        if problem:
            return problem
    if settings.asr_model:
        return source_problem("--asr-model", settings.asr_model, layout.WHISPER, ASR_WHAT_TO_DO)
    return None


def random_weights(settings: SidecarSettings) -> list[str]:
    """The flags (`--model`, `--asr-model`) naming a checkpoint whose config.json says its
    weights are random (`make-checkpoint`'s): a test model, whose output means nothing."""
    sources = (
        [("--model", settings.model, layout.OMNIVOICE)] if settings.engine == "omnivoice" else []
    )
    if settings.asr_model:
        sources.append(("--asr-model", settings.asr_model, layout.WHISPER))
    return [flag for flag, source, kind in sources if _is_random(source, kind)]


def _is_random(source: str, kind: Kind) -> bool:
    path = Path(source).expanduser()
    root = path if path.is_dir() else _cached(source, kind) if layout.is_hub_id(source) else None
    return root is not None and layout.has_random_weights(root)


def source_problem(flag: str, source: str, kind: Kind, what_to_do: str) -> str | None:
    """What is wrong with one model source (a directory or a hub id) of `kind`, or None."""
    problem = layout.local_problem(source, kind)
    if problem:
        return f"{flag}: {problem}; {what_to_do}"
    if Path(source).expanduser().exists():
        damaged = layout.damaged_file(Path(source).expanduser(), kind)
        return (
            f"{flag}: checkpoint {source} is damaged: {damaged}; {what_to_do}" if damaged else None
        )
    snapshot = _cached(source, kind)
    if snapshot is not None:
        damaged = layout.damaged_file(snapshot, kind)
        return (
            (
                f"{flag}: the cached {source!r} is damaged: {damaged}; download it again "
                f"(hf download {source} --force-download)"
            )
            if damaged
            else None
        )
    if layout.hub_offline():
        return (
            f"{flag}: {source!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            f"download it first (hf download {source}) or give a checkpoint directory "
            f"({flag} /path/to/checkpoint)"
        )
    problem = hub_problem(source, kind, flag)
    return f"{flag}: {problem}" if problem else None


def _cached(repo_id: str, kind: Kind) -> Path | None:
    """The snapshot folder holding every file of the checkpoint in the cache, or None."""
    from huggingface_hub import try_to_load_from_cache  # the cache alone: no network, no torch

    found = [try_to_load_from_cache(repo_id, name) for name in kind.files]
    if not all(isinstance(path, str) for path in found):  # a path; None or a sentinel otherwise
        return None
    return Path(str(found[0])).parent  # config.json lies at the snapshot's top
