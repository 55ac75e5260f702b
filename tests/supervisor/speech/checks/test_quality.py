"""The quality verdict: an informational check (the ASR checks of a random-weights Whisper) is
reported as measured and never fails a chunk, a request or a retry count."""

from __future__ import annotations

from sidecar.shared.protocol import QaCheck
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.checks import quality


def piece(qa: dict[str, QaCheck]) -> ChunkAudio:
    return ChunkAudio("t", b"", 24000, 1, qa, 1, False, {})


def test_an_informational_check_is_reported_and_never_fails() -> None:
    heard = quality.as_informational({"wer": {"passed": False, "value": 1.0}})
    qa: dict[str, QaCheck] = {"finite": {"passed": True, "value": 1.0}, **heard}
    assert quality.failed_checks(qa) == []
    verdict = quality.Verdict()
    verdict.add(piece(qa))
    assert verdict.passed and verdict.header() == "passed; attempts=1"
    assert verdict.summary()["checks"]["wer"] == {
        "passed": False,
        "value": 1.0,
        "informational": True,
    }


def test_a_failed_check_that_informs_nothing_still_fails() -> None:
    qa: dict[str, QaCheck] = {"wer": {"passed": False, "value": 1.0}}
    assert quality.failed_checks(qa) == ["wer"]
    verdict = quality.Verdict()
    verdict.add(piece(qa))
    assert not verdict.passed and "wer (1)" in verdict.reason()
