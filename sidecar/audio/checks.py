"""Cheap quality checks on one item's decoded audio, run in the sidecar before it is sent.

Each check gives a value and whether it passed:

    finite            samples that are NaN or infinite (passes at 0)
    clipping          share of samples at full scale (|x| >= 0.999)
    rms               loudness of the whole item, dBFS (a floor: near-silence fails)
    leading_silence   seconds before the first sound
    trailing_silence  seconds after the last sound
    internal_silence  the longest silence between two sounds, seconds: a runaway tail (a long
                      pause, then more sound) fails
    speech_rate       words a second (characters a second for scripts written without spaces),
                      against a band scaled by the request's speed; left out when the request
                      fixed the duration, or the text is too short to say

Silence is measured on 20 ms frames: a frame whose RMS is below `silence_db` is silent. Values
are always finite numbers, so they travel in frames and JSON alike. Thresholds come from the
supervisor's settings (`--qa-thresholds`, sidecar/shared/thresholds.py).
"""

from __future__ import annotations

import re

import numpy as np

from sidecar.shared.protocol import QaCheck
from sidecar.shared.thresholds import Thresholds

FRAME_S = 0.02
FULL_SCALE = 0.999
_FLOOR_DB = -200.0  # the dBFS of digital silence, instead of -inf
# Scripts written without spaces between words: a character is the unit of the speech rate.
# CJK ideographs and punctuation, kana, Thai, Lao, Myanmar, Khmer.
_UNSPACED = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
    "\U00020000-\U0003ffff]"
)
_UNSPACED_LETTER = re.compile(
    "[\u3040-\u309f\u30a1-\u30fa\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e01-\u0e4e\u0e81-\u0edf"
    "\u1000-\u103f\u1780-\u17d3\U00020000-\U0003ffff]"
)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def speech_units(text: str) -> tuple[int, str]:
    """How much there is to say: (count, "chars") for unspaced scripts, else (count, "words")."""
    unspaced = len(_UNSPACED_LETTER.findall(text))
    words = _WORD.findall(_UNSPACED.sub(" ", text))
    if unspaced and unspaced >= len(words):
        return unspaced + len(words), "chars"
    return len(words), "words"


def _frame_db(audio: np.ndarray, rate: int) -> np.ndarray:
    """dBFS of each whole 20 ms frame (a last partial frame is left out)."""
    size = max(1, int(rate * FRAME_S))
    count = len(audio) // size
    frames = audio[: count * size].astype(np.float64).reshape(count, size)
    rms = np.sqrt(np.mean(np.square(frames), axis=1))
    with np.errstate(divide="ignore"):
        return np.maximum(20 * np.log10(rms), _FLOOR_DB)


def _silences(silent: np.ndarray) -> tuple[int, int, int]:
    """(leading, trailing, longest internal) runs of silent frames."""
    sound = np.flatnonzero(~silent)
    if len(sound) == 0:
        return len(silent), len(silent), 0
    first, last = int(sound[0]), int(sound[-1])
    gaps = np.diff(sound) - 1  # silent frames between consecutive sounding ones
    return first, len(silent) - 1 - last, int(gaps.max()) if len(gaps) else 0


def _check(passed: bool, value: float) -> QaCheck:
    return {"passed": bool(passed), "value": round(float(value), 4)}


def run_checks(
    audio: np.ndarray,
    rate: int,
    text: str,
    limits: Thresholds,
    speed: float | None = None,
    duration_fixed: bool = False,
) -> dict[str, QaCheck]:
    """Every check of one item's audio (float samples, mono) against its text."""
    finite = np.isfinite(audio)
    bad = int(audio.size - np.count_nonzero(finite))
    clean = np.where(finite, audio, 0.0) if bad else audio
    seconds = len(clean) / rate if rate > 0 else 0.0
    clipped = float(np.mean(np.abs(clean) >= FULL_SCALE)) if len(clean) else 0.0
    mean_square = float(np.mean(np.square(clean, dtype=np.float64))) if len(clean) else 0.0
    rms_db = max(10 * np.log10(mean_square), _FLOOR_DB) if mean_square > 0 else _FLOOR_DB
    lead, trail, inner = _silences(_frame_db(clean, rate) < limits.silence_db)
    checks = {
        "finite": _check(bad == 0, bad),
        "clipping": _check(clipped <= limits.max_clipping, clipped),
        "rms": _check(rms_db >= limits.min_rms_db, rms_db),
        "leading_silence": _check(lead * FRAME_S <= limits.max_leading_silence_s, lead * FRAME_S),
        "trailing_silence": _check(
            trail * FRAME_S <= limits.max_trailing_silence_s, trail * FRAME_S
        ),
        "internal_silence": _check(
            inner * FRAME_S < limits.max_internal_silence_s, inner * FRAME_S
        ),
    }
    units, kind = speech_units(text)
    if not duration_fixed and units >= limits.min_rate_units and seconds > 0:
        scale = speed or 1.0
        low, high = (
            (limits.min_chars_per_s, limits.max_chars_per_s)
            if kind == "chars"
            else (limits.min_words_per_s, limits.max_words_per_s)
        )
        per_s = units / seconds
        checks["speech_rate"] = _check(low * scale <= per_s <= high * scale, per_s)
    return checks
