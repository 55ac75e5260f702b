"""`--model` checked before the port opens: what can be known without loading it (no torch here).

A local directory must hold the checkpoint's files. A Hugging Face id is fine when the cache
holds its files; otherwise, offline (HF_HUB_OFFLINE) it cannot work, and online the hub is asked
whether it exists and holds them (supervision/hub_check.py). What only loading can tell (a
corrupt file, a download cut short) is still the sidecar's to report.
"""

from __future__ import annotations

from pathlib import Path

from sidecar.shared import layout
from supervisor.settings import Settings
from supervisor.supervision.hub_check import hub_problem

WHAT_TO_DO = (
    "give a checkpoint directory (--model /path/to/checkpoint) or a Hugging Face id "
    "(--model k2-fsa/OmniVoice)"
)


def model_problem(settings: Settings) -> str | None:
    """One line saying what is wrong with --model and what to do, or None."""
    if settings.engine != "omnivoice":
        return None
    source = settings.model
    problem = layout.local_problem(source)
    if problem:
        return f"--model: {problem}; {WHAT_TO_DO}"
    if Path(source).expanduser().exists() or _cached(source):
        return None
    if layout.hub_offline():
        return (
            f"--model: {source!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            f"download it first (hf download {source}) or give a checkpoint directory "
            "(--model /path/to/checkpoint)"
        )
    problem = hub_problem(source)
    return f"--model: {problem}" if problem else None


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache  # the cache alone: no network, no torch

    found = [try_to_load_from_cache(repo_id, name) for name in layout.REQUIRED_FILES]
    return all(isinstance(path, str) for path in found)  # a path; None or a sentinel otherwise
