"""A Hugging Face id asked of the hub before the port opens: does it exist, and hold the files?

One request (the repository's file list, HUB_TIMEOUT_S at most) tells a missing or private
repository, one without a checkpoint's files, and a hub that cannot be reached, apart; each is
one line for `serve` to print before it exits 2. The download itself stays the sidecar's.
huggingface_hub only (no torch): it reads HF_ENDPOINT and HF_TOKEN as the sidecar's download does.
"""

from __future__ import annotations

import logging

from sidecar.shared import layout

HUB_TIMEOUT_S = 10.0
HTTP_LOGGERS = ("httpx", "httpx2", "httpcore")  # one line per request at INFO: not here


def hub_problem(
    repo_id: str, kind: layout.Kind = layout.OMNIVOICE, flag: str = "--model"
) -> str | None:
    """What keeps `repo_id` from being downloaded as a checkpoint of `kind` (given as `flag`),
    in one line, or None."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
    )

    where = constants.ENDPOINT
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        info = HfApi().model_info(repo_id, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:  # before its base class: it exists, the token may not read it
        return (
            f"{repo_id!r} on {where} is gated: accept its terms on the hub and set HF_TOKEN, "
            f"or give a checkpoint directory ({flag} /path/to/checkpoint)"
        )
    except RepositoryNotFoundError:
        return (
            f"{repo_id!r} is not a model on {where} (or it is private: set HF_TOKEN); "
            f"check the id, or give a checkpoint directory ({flag} /path/to/checkpoint)"
        )
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "an error"
        if status == 404:
            return (
                f"{repo_id!r} is not a model on {where}; check the id, or give a checkpoint "
                f"directory ({flag} /path/to/checkpoint)"
            )
        return f"asking {where} for {repo_id!r} failed (HTTP {status}); retry, or {local(repo_id, flag)}"
    except Exception as exc:  # the network: refused, unresolved, timed out
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return (
            f"the Hugging Face hub at {where} cannot be reached ({reason}); {local(repo_id, flag)}"
        )
    present = {sibling.rfilename for sibling in info.siblings or ()}
    missing = [name for name in kind.files if name not in present]
    if missing:
        return (
            f"{repo_id!r} on {where} is not {'an' if kind.name[0] in 'AEIOU' else 'a'} "
            f"{kind.name} checkpoint: missing {', '.join(missing)} (a checkpoint holds "
            f"{kind.layout})"
        )
    return None


def local(repo_id: str, flag: str) -> str:
    return (
        f"download it where the hub can be reached (hf download {repo_id}) and set HF_HUB_OFFLINE=1, "
        f"or give a checkpoint directory ({flag} /path/to/checkpoint)"
    )
