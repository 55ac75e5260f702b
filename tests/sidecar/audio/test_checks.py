"""The sidecar's quality checks (sidecar/audio/checks.py) on synthetic signals whose faults are known."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.audio.checks import run_checks, speech_units
from sidecar.devtools.faults import Fault, Faults
from sidecar.shared.thresholds import Thresholds

RATE = 24000
TEXT = "Please stand clear of the closing doors."  # 7 words


def speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    """Noise at about -15 dBFS with a syllable-rate envelope: sound in every 20 ms frame."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)
    return (0.25 * envelope * rng.standard_normal(len(t))).clip(-0.9, 0.9).astype(np.float32)


def failing(audio: np.ndarray, text: str = TEXT, **kw: object) -> set[str]:
    checks = run_checks(audio, RATE, text, Thresholds(), **kw)  # type: ignore[arg-type]
    return {name for name, check in checks.items() if not check["passed"]}


def test_clean_speechlike_audio_passes_every_check() -> None:
    checks = run_checks(speechlike(2.5), RATE, TEXT, Thresholds())
    assert set(checks) == {
        "finite",
        "clipping",
        "rms",
        "leading_silence",
        "trailing_silence",
        "internal_silence",
        "speech_rate",
    }
    assert all(c["passed"] for c in checks.values()), checks
    assert checks["speech_rate"]["value"] == pytest.approx(7 / 2.5, abs=0.01)


def test_nan_samples_fail_finite_and_nothing_else_turns_nan() -> None:
    audio = speechlike(2.5)
    audio[100:110] = np.nan
    audio[200] = np.inf
    checks = run_checks(audio, RATE, TEXT, Thresholds())
    assert checks["finite"] == {"passed": False, "value": 11.0}
    assert all(np.isfinite(c["value"]) for c in checks.values())


def test_clipping_fails_above_its_share() -> None:
    audio = speechlike(2.5)
    audio[: len(audio) // 50] = 1.0  # 2 % at full scale
    assert failing(audio) == {"clipping"}


def test_silence_fails_the_rms_floor_and_the_edges() -> None:
    assert failing(np.zeros(3 * RATE, dtype=np.float32)) >= {"rms", "leading_silence"}
    quiet = speechlike(2.5) * 0.01  # about -55 dBFS: under the floor, and silent frames
    assert "rms" in failing(quiet)


def test_a_runaway_tail_fails_internal_silence_but_a_short_pause_does_not() -> None:
    clip = speechlike(1.5)
    pause = np.zeros(int(0.8 * RATE), dtype=np.float32)
    assert failing(np.concatenate([clip, pause, clip])) == set()
    gap = np.zeros(int(2.5 * RATE), dtype=np.float32)
    checks = run_checks(np.concatenate([clip, gap, clip]), RATE, TEXT, Thresholds())
    assert not checks["internal_silence"]["passed"]
    assert checks["internal_silence"]["value"] == pytest.approx(2.5, abs=0.04)


def test_leading_and_trailing_silence_are_measured_in_seconds() -> None:
    lead = np.zeros(int(1.4 * RATE), dtype=np.float32)
    tail = np.zeros(int(2.0 * RATE), dtype=np.float32)
    checks = run_checks(np.concatenate([lead, speechlike(2.5), tail]), RATE, TEXT, Thresholds())
    assert checks["leading_silence"]["value"] == pytest.approx(1.4, abs=0.04)
    assert checks["trailing_silence"]["value"] == pytest.approx(2.0, abs=0.04)
    assert not checks["leading_silence"]["passed"] and not checks["trailing_silence"]["passed"]


def test_speech_rate_fails_too_long_and_too_short_and_follows_speed() -> None:
    assert failing(speechlike(12.0)) == {"speech_rate"}  # 0.58 words a second
    assert failing(speechlike(1.0)) == {"speech_rate"}  # 7 words a second
    assert failing(speechlike(1.0), speed=1.5) == set()  # fast reading asked for
    assert "speech_rate" not in run_checks(
        speechlike(12.0), RATE, TEXT, Thresholds(), duration_fixed=True
    )
    assert "speech_rate" not in run_checks(speechlike(12.0), RATE, "Hello there.", Thresholds())


def test_unspaced_scripts_count_characters() -> None:
    assert speech_units("今天天气很好，我们去公园散步吧。") == (14, "chars")
    assert speech_units("Please stand clear, it's late.") == (5, "words")
    assert speech_units("ภาษาไทย") == (7, "chars")
    # 14 characters in 3.2 s is 4.4 a second: fine for Mandarin, though 14 words would not be.
    assert failing(speechlike(3.2), text="今天天气很好，我们去公园散步吧。") == set()


def test_thresholds_override_their_defaults_by_name_and_refuse_nonsense() -> None:
    changed = Thresholds.from_spec("max_internal_silence_s=3, min_rms_db=-50,min_rate_units=2")
    assert changed == Thresholds(max_internal_silence_s=3.0, min_rms_db=-50.0, min_rate_units=2)
    assert Thresholds.from_spec("") == Thresholds()
    for spec, why in [
        ("max_silence=3", "NAME=VALUE"),
        ("min_rms_db", "NAME=VALUE"),
        ("min_rms_db=loud", "number"),
        ("min_rms_db=3", "0 or below"),
        ("max_clipping=-1", "positive"),
        ("min_rate_units=2.5", "number"),
    ]:
        with pytest.raises(ValueError, match=why):
            Thresholds.from_spec(spec)


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("nan", "finite"),
        ("silence", "rms"),
        ("runaway", "internal_silence"),
        ("length", "speech_rate"),
    ],
)
def test_each_output_fault_is_caught_and_hits_only_its_first_attempts(
    name: str, check: str
) -> None:
    faults = Faults()
    audio = speechlike(2.5)
    spoiled = faults.on_output([Fault(name, "2")], audio, RATE, attempt=2)
    assert check in failing(spoiled)
    assert faults.on_output([Fault(name, "2")], audio, RATE, attempt=3) is audio
    assert check in failing(faults.on_output([Fault(name)], audio, RATE, attempt=9))
    # Other faults of the same item (a step fault with its own argument) leave the audio alone.
    assert faults.on_output([Fault("slow", "0.6")], audio, RATE, attempt=1) is audio
