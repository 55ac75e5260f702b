"""Where the checkout is, for tests that run its commands or read its committed files."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
