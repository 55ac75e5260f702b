"""The parent process: HTTP API, scheduler, sidecar pool, jobs, metrics, CLI."""

__version__ = "0.1.0"
