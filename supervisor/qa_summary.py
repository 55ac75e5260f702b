"""The `qa` block's type: what a job item, a cached result and a `qa_failed` error say of the
quality checks (supervisor/speech/checks/quality.py says what each field means and makes it).

Below the speech code, so that the error tree (supervisor/errors.py) and the job stores can name
it without importing what makes it.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.protocol import QaCheck


class _QaSummaryBase(TypedDict):
    passed: bool
    attempts: int
    checks: dict[str, QaCheck]


class QaSummary(_QaSummaryBase, total=False):
    """The `qa` block of a job item, and of a `qa_failed` error."""

    asr: Literal["skipped"]  # a chunk went out unheard by the ASR sidecar
