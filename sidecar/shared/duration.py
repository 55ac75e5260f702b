"""How many audio frames to generate for a text: the reference's rule-based length estimate."""

from __future__ import annotations

import bisect
import math
import unicodedata
from functools import lru_cache

from sidecar.shared.errors import InvalidInput

__all__ = [
    "DEFAULT_REF_TEXT",
    "DEFAULT_REF_TOKENS",
    "FRAME_RATE",
    "char_weight",
    "estimate_duration",
    "target_tokens",
    "target_tokens_for_duration",
    "text_weight",
]

FRAME_RATE = 25  # codec frames per second (24 kHz audio, 960-sample hop)

# Without a voice prompt the speaking rate is calibrated on this phrase taking one second.
DEFAULT_REF_TEXT = "Nice to meet you."
DEFAULT_REF_TOKENS = 25

# Below this many frames the linear estimate is lifted by a cube-root curve: short utterances
# come out too short otherwise.
_SHORT_THRESHOLD = 50.0
_BOOST_EXPONENT = 1.0 / 3.0

# --- Data tables: from k2-fsa/OmniVoice (omnivoice/utils/duration.py, RuleDurationEstimator),
# --- Apache-2.0.

# Relative speaking time of one character of each script, a Latin letter being 1.0.
_WEIGHTS: dict[str, float] = {
    "cjk": 3.0,
    "hangul": 2.5,
    "kana": 2.2,
    "ethiopic": 3.0,
    "yi": 3.0,
    "indic": 1.8,
    "thai_lao": 1.5,
    "khmer_myanmar": 1.8,
    "arabic": 1.5,
    "hebrew": 1.5,
    "latin": 1.0,
    "cyrillic": 1.0,
    "greek": 1.0,
    "armenian": 1.0,
    "georgian": 1.0,
    "punctuation": 0.5,
    "space": 0.2,
    "digit": 3.5,
    "mark": 0.0,
    "default": 1.0,
}

# (last code point of the block, script class), in ascending order; a code point belongs to the
# first block whose end is at or above it.
_RANGES: tuple[tuple[int, str], ...] = (
    (0x02AF, "latin"),
    (0x03FF, "greek"),
    (0x052F, "cyrillic"),
    (0x058F, "armenian"),
    (0x05FF, "hebrew"),
    (0x077F, "arabic"),
    (0x089F, "arabic"),
    (0x08FF, "arabic"),
    (0x097F, "indic"),
    (0x09FF, "indic"),
    (0x0A7F, "indic"),
    (0x0AFF, "indic"),
    (0x0B7F, "indic"),
    (0x0BFF, "indic"),
    (0x0C7F, "indic"),
    (0x0CFF, "indic"),
    (0x0D7F, "indic"),
    (0x0DFF, "indic"),
    (0x0EFF, "thai_lao"),
    (0x0FFF, "indic"),
    (0x109F, "khmer_myanmar"),
    (0x10FF, "georgian"),
    (0x11FF, "hangul"),
    (0x137F, "ethiopic"),
    (0x139F, "ethiopic"),
    (0x13FF, "default"),
    (0x167F, "default"),
    (0x169F, "default"),
    (0x16FF, "default"),
    (0x171F, "default"),
    (0x173F, "default"),
    (0x175F, "default"),
    (0x177F, "default"),
    (0x17FF, "khmer_myanmar"),
    (0x18AF, "default"),
    (0x18FF, "default"),
    (0x194F, "indic"),
    (0x19DF, "indic"),
    (0x19FF, "khmer_myanmar"),
    (0x1A1F, "indic"),
    (0x1AAF, "indic"),
    (0x1B7F, "indic"),
    (0x1BBF, "indic"),
    (0x1BFF, "indic"),
    (0x1C4F, "indic"),
    (0x1C7F, "indic"),
    (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"),
    (0x1CCF, "indic"),
    (0x1CFF, "indic"),
    (0x1D7F, "latin"),
    (0x1DBF, "latin"),
    (0x1DFF, "default"),
    (0x1EFF, "latin"),
    (0x309F, "kana"),
    (0x30FF, "kana"),
    (0x312F, "cjk"),
    (0x318F, "hangul"),
    (0x9FFF, "cjk"),
    (0xA4CF, "yi"),
    (0xA4FF, "default"),
    (0xA63F, "default"),
    (0xA69F, "cyrillic"),
    (0xA6FF, "default"),
    (0xA7FF, "latin"),
    (0xA82F, "indic"),
    (0xA87F, "default"),
    (0xA8DF, "indic"),
    (0xA8FF, "indic"),
    (0xA92F, "indic"),
    (0xA95F, "indic"),
    (0xA97F, "hangul"),
    (0xA9DF, "indic"),
    (0xA9FF, "khmer_myanmar"),
    (0xAA5F, "indic"),
    (0xAA7F, "khmer_myanmar"),
    (0xAADF, "indic"),
    (0xAAFF, "indic"),
    (0xAB2F, "ethiopic"),
    (0xAB6F, "latin"),
    (0xABBF, "default"),
    (0xABFF, "indic"),
    (0xD7AF, "hangul"),
    (0xFAFF, "cjk"),
    (0xFDFF, "arabic"),
    (0xFE6F, "default"),
    (0xFEFF, "arabic"),
    (0xFFEF, "latin"),
)

# --- end of the upstream tables.

_RANGE_ENDS = tuple(end for end, _ in _RANGES)


@lru_cache(maxsize=4096)
def char_weight(ch: str) -> float:
    """Speaking-time weight of one character."""
    code = ord(ch)
    # The order of these tests matters (first match wins): it is the reference's order.
    if 0x41 <= code <= 0x5A or 0x61 <= code <= 0x7A:
        return _WEIGHTS["latin"]
    if code == 0x20:
        return _WEIGHTS["space"]
    if code == 0x0640:  # Arabic tatweel only stretches a letter; it takes no time of its own
        return _WEIGHTS["mark"]
    major = unicodedata.category(ch)[0]
    if major == "M":
        return _WEIGHTS["mark"]
    if major in ("P", "S"):
        return _WEIGHTS["punctuation"]
    if major == "Z":
        return _WEIGHTS["space"]
    if major == "N":
        return _WEIGHTS["digit"]
    idx = bisect.bisect_left(_RANGE_ENDS, code)
    if idx < len(_RANGES):
        return _WEIGHTS[_RANGES[idx][1]]
    # Past the BMP tables: the supplementary ideograph planes start at U+20000 (that code point
    # itself falls to the default, as in the reference).
    if code > 0x20000:
        return _WEIGHTS["cjk"]
    return _WEIGHTS["default"]


def text_weight(text: str) -> float:
    """Sum of the character weights of a text."""
    # The reference sums with the builtin sum(), which since Python 3.12 adds floats with
    # Neumaier's compensated summation (3.11 and older add naively). The fixtures were made
    # that way, and the sum feeds an int() truncation, so do the same here whatever Python runs
    # us: left to right, compensation folded in at the end.
    total = 0.0
    compensation = 0.0
    for ch in text:
        x = char_weight(ch)
        t = total + x
        if abs(total) >= abs(x):
            compensation += (total - t) + x
        else:
            compensation += (x - t) + total
        total = t
    if compensation and math.isfinite(compensation):
        total += compensation
    return total


def estimate_duration(text: str, ref_text: str, ref_len: int) -> float:
    """Frames the text should take at the speaking rate of ref_text spoken in ref_len frames."""
    if ref_len <= 0 or not ref_text:
        return 0.0
    ref_weight = text_weight(ref_text)
    if ref_weight == 0:
        return 0.0
    weight_per_frame = ref_weight / ref_len
    est = text_weight(text) / weight_per_frame
    if est < _SHORT_THRESHOLD:
        return _SHORT_THRESHOLD * (est / _SHORT_THRESHOLD) ** _BOOST_EXPONENT
    return est


def target_tokens(
    text: str,
    ref_text: str | None = None,
    ref_tokens: int | None = None,
    speed: float | None = 1.0,
) -> int:
    """Number of target frames for a text, given the reference (or the default one) and a speed."""
    if ref_tokens is None or not ref_text:
        ref_text, ref_tokens = DEFAULT_REF_TEXT, DEFAULT_REF_TOKENS
    est = estimate_duration(text, ref_text, ref_tokens)
    # The reference ignores a speed that is not positive; None stands for "not given" (1.0).
    if speed is not None and speed > 0 and speed != 1.0:
        est = est / speed
    return max(1, int(est))


def target_tokens_for_duration(
    text: str,
    duration: float,
    ref_text: str | None = None,
    ref_tokens: int | None = None,
    *,
    frame_rate: int = FRAME_RATE,
) -> tuple[int, float]:
    """Target frames for a fixed duration in seconds, and the speed that stretches the estimate to it."""
    if not math.isfinite(duration):
        # int() would fail on it further down with a message about floats, not about the request.
        raise InvalidInput(f"duration must be a finite number of seconds, got {duration!r}")
    # The estimate at speed 1 is kept as a speed ratio so that, if the item is later chunked,
    # each chunk's own estimate scales by the same factor.
    estimate = target_tokens(text, ref_text, ref_tokens, speed=1.0)
    target_len = max(1, int(duration * frame_rate))
    return target_len, estimate / target_len
