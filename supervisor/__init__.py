"""The parent process: HTTP API, scheduler, sidecar pool, jobs, metrics, CLI."""

import importlib.metadata


def _version() -> str:
    """The installed package's version (pyproject.toml's, the one place it is written)."""
    try:
        return importlib.metadata.version("omnivoice-supervisor")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__ = _version()
