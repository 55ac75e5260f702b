"""Quality verdicts in the supervisor: which checks a result failed, the seed of a retry, and
the summary a speech answer or a job item carries.

The sidecar measures every item (sidecar/audio/checks.py) and puts the checks in its `result` frame.
`SynthesisRun` generates a chunk that failed any of them again, with a seed derived from the
chunk's seed and the attempt, up to --qa-retries times. What a request then carries:

    {"passed": bool, "attempts": n, "checks": {"<name>": {"passed": bool, "value": x}}}

over all its chunks: `passed` only if every chunk's last attempt passed; `attempts` is the most
any chunk took; each check passes only if it passed in every chunk, and its value is that of the
first chunk that failed it (else of the first chunk). The ASR checks of a random-weights Whisper
(`make-checkpoint --kind whisper`, whose transcripts are noise) carry `"informational": true`:
reported as measured, they never fail a chunk nor cause a retry. A result without checks (the null engine
of overhead benchmarks has no audio worth checking) passes with none. With `--asr-model`, a
chunk the ASR sidecar could not hear (supervisor/speech/checks/asr_round_trip.py) adds `"asr": "skipped"`
(and `; asr=skipped` to the header).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sidecar.shared.protocol import QA_CHECKS, QaCheck
from supervisor import metrics
from supervisor.qa_summary import QaSummary
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.request.schemas import MAX_SEED

HEADER = "X-OmniVoice-QA"
# An odd 64-bit constant (the fractional bits of sqrt(3)) other than the chunk stride, so that a
# retry's seed does not land on the seed of another chunk of the same request.
QA_SEED_STRIDE = 0xBB67AE8584CAA73B


def retry_seed(seed: int, attempt: int) -> int:
    """The seed of a chunk's `attempt`-th generation (1: the chunk's own seed)."""
    return (seed + (attempt - 1) * QA_SEED_STRIDE) % (MAX_SEED + 1)


def failed_checks(qa: dict[str, QaCheck]) -> list[str]:
    """The names of the checks failed among `qa` (a `result` frame's, or a piece's); an
    informational check (the ASR checks of a random-weights Whisper) never counts."""
    return [name for name, check in qa.items() if not (check["passed"] or informational(check))]


def informational(check: QaCheck) -> bool:
    return check.get("informational") is True


def as_informational(qa: dict[str, QaCheck]) -> dict[str, QaCheck]:
    """`qa`'s checks, each reported but never failing (`"informational": true`)."""
    return {name: {**check, "informational": True} for name, check in qa.items()}


def count_attempt(failed: list[str], retrying: bool) -> None:
    """Metrics for one attempt that failed these checks: a retry follows, or the chunk fails."""
    for name in failed:
        metrics.qa_check_failures.labels(name if name in QA_CHECKS else "other").inc()
    if retrying:
        metrics.qa_retries.inc()
    else:
        metrics.qa_failed.inc()


@dataclass
class Verdict:
    """The quality of a request's chunks so far."""

    chunks: list[tuple[dict[str, QaCheck], int]] = field(default_factory=list)  # checks, attempts
    asr_skipped: bool = (
        False  # a chunk went out unheard by the ASR sidecar (speech/checks/asr_round_trip.py)
    )

    def add(self, piece: ChunkAudio) -> None:
        self.chunks.append((piece.qa, piece.attempts))
        self.asr_skipped = self.asr_skipped or piece.asr_skipped

    @property
    def passed(self) -> bool:
        return not any(failed_checks(checks) for checks, _ in self.chunks)

    @property
    def attempts(self) -> int:
        return max((attempts for _, attempts in self.chunks), default=1)

    def summary(self) -> QaSummary:
        """The `qa` block of a job item (DESIGN, "Quality and delivery")."""
        merged: dict[str, QaCheck] = {}
        for checks, _ in self.chunks:
            for name, check in checks.items():
                if name not in merged or (merged[name]["passed"] and not check["passed"]):
                    merged[name] = {"passed": check["passed"], "value": check["value"]}
                    if informational(check):
                        merged[name]["informational"] = True
        summary: QaSummary = {"passed": self.passed, "attempts": self.attempts, "checks": merged}
        if self.asr_skipped:
            summary["asr"] = "skipped"
        return summary

    def header(self) -> str:
        """The X-OmniVoice-QA value: `passed; attempts=1`, `failed; attempts=3`, and
        `; asr=skipped` after it when a chunk went out unheard by the ASR sidecar."""
        value = f"{'passed' if self.passed else 'failed'}; attempts={self.attempts}"
        return value + "; asr=skipped" if self.asr_skipped else value

    def reason(self) -> str:
        """Why the audio failed, in words: each failed check with its value."""
        failed = [
            f"{name} ({check['value']:g})"
            for name, check in self.summary()["checks"].items()
            if not (check["passed"] or informational(check))
        ]
        return (
            f"the audio failed its quality checks after {self.attempts} attempt(s): "
            + ", ".join(failed)
        )
