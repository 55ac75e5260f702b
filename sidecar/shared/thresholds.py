"""The quality checks' thresholds (sidecar/audio/checks.py), with their defaults.

Standard library only: the supervisor validates `--qa-thresholds` with it at startup and hands
the same text to each sidecar. The text names only what differs from the defaults:
`max_internal_silence_s=3,min_rms_db=-50`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

DBFS = ("silence_db", "min_rms_db")  # levels below full scale: 0 or less


@dataclass(frozen=True)
class Thresholds:
    """Where each check draws its line; the defaults suit speech from the OmniVoice model."""

    silence_db: float = -45.0  # a 20 ms frame quieter than this (dBFS) is silent
    max_clipping: float = 0.005  # share of samples at full scale
    min_rms_db: float = -40.0  # an item quieter than this over its whole length fails
    max_leading_silence_s: float = 1.0
    max_trailing_silence_s: float = 1.5
    max_internal_silence_s: float = 2.0  # a runaway tail: this much silence, then more sound
    min_words_per_s: float = 0.8  # the speech rate band at speed 1, in words a second ...
    max_words_per_s: float = 6.0
    min_chars_per_s: float = 1.5  # ... and in characters, for scripts written without spaces
    max_chars_per_s: float = 12.0
    min_rate_units: int = 4  # fewer words (characters) than this: no speech-rate check
    max_wer: float = 0.3  # the ASR round trip (--asr-model): word error rate against the text
    max_divergent_run: int = 7  # ... and consecutive diverging words (Audicle: 8 regenerates)

    @classmethod
    def from_spec(cls, spec: str) -> Thresholds:
        """The defaults with `name=value,...` applied; a ValueError names what is wrong."""
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, float | int] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or name not in kinds:
                raise ValueError(f"{part!r} is not NAME=VALUE with a NAME of {', '.join(kinds)}")
            try:
                value = int(raw) if kinds[name] == "int" else float(raw)
            except ValueError:
                raise ValueError(f"{name} must be a number, got {raw!r}") from None
            if (value > 0) if name in DBFS else (value < 0):
                raise ValueError(f"{name} must be {'0 or below' if name in DBFS else 'positive'}")
            values[name] = value
        return cls(**values)  # type: ignore[arg-type]
