"""The runtime through its public API (OmniVoice.load / generate / encode_voice) on the tiny
fixture checkpoint, on the CPU."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sidecar.runtime import stepper
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest, VoicePrompt
from sidecar.shared.errors import CheckpointError, InvalidAudio, InvalidInput, InvalidInstruct

GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}


@pytest.fixture(scope="module")
def model(checkpoint_dir: Path) -> OmniVoice:
    return OmniVoice.load(str(checkpoint_dir))


@pytest.fixture(scope="module")
def voice(model: OmniVoice, expected: dict[str, np.ndarray]) -> VoicePrompt:
    return model.encode_voice(
        expected["ref_a_wav"], 24000, "This is the reference speech sample.", preprocess=False
    )


def test_generates_audio_of_the_estimated_length(model: OmniVoice) -> None:
    [result] = model.generate(
        [
            GenerationRequest(
                text="Hello from the quiet harbour.",
                num_step=4,
                postprocess_output=False,
                return_tokens=True,
                **GREEDY,
            )
        ]
    )
    assert result.sample_rate == 24000
    assert result.tokens[0].shape == (8, 48)  # the rule-based estimate for this sentence
    # 48 frames of 960 samples, plus 0.1 s of padding on each side.
    assert result.audio.shape == (48 * 960 + 2 * 2400,)
    assert result.audio.dtype == np.float32 and np.isfinite(result.audio).all()
    assert 0.45 < np.abs(result.audio).max() <= 0.5 + 1e-6  # no reference: peak-normalised to 0.5


def test_same_seed_same_audio_and_different_seed_differs(model: OmniVoice) -> None:
    def run(seed: int) -> np.ndarray:
        [r] = model.generate(
            [
                GenerationRequest(
                    text="A seeded sentence.", num_step=4, seed=seed, return_tokens=True
                )
            ]
        )
        assert r.seed == seed
        return r.tokens[0]

    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_unseeded_requests_report_the_seed_they_drew(model: OmniVoice) -> None:
    [r] = model.generate([GenerationRequest(text="No seed given.", num_step=2, return_tokens=True)])
    assert isinstance(r.seed, int)
    [again] = model.generate(
        [GenerationRequest(text="No seed given.", num_step=2, seed=r.seed, return_tokens=True)]
    )
    assert np.array_equal(r.tokens[0], again.tokens[0])


def test_a_seeded_item_does_not_depend_on_its_batch(model: OmniVoice, voice: VoicePrompt) -> None:
    alone = GenerationRequest(
        text="Batch invariance matters.", num_step=4, seed=11, return_tokens=True
    )
    [solo] = model.generate([alone])
    others = [
        GenerationRequest(
            text="Something else entirely, and rather longer than the first one.",
            num_step=4,
            seed=1,
        ),
        GenerationRequest(text="A cloned voice item.", voice=voice, num_step=6, seed=2),
    ]
    batch = model.generate([others[0], alone, others[1]])
    assert np.array_equal(batch[1].tokens[0], solo.tokens[0])


def test_mixed_batch_of_auto_design_and_clone(model: OmniVoice, voice: VoicePrompt) -> None:
    requests = [
        GenerationRequest(text="Auto voice.", num_step=3),
        GenerationRequest(text="Designed voice.", instruct="female, low pitch", num_step=3),
        GenerationRequest(text="Cloned voice.", voice=voice, num_step=3),
    ]
    results = model.generate(requests)
    assert len(results) == 3
    assert all(r.audio.size > 0 and np.isfinite(r.audio).all() for r in results)


def test_fixed_duration_sets_the_length(model: OmniVoice) -> None:
    [r] = model.generate(
        [
            GenerationRequest(
                text="Exactly two seconds please.",
                duration=2.0,
                num_step=2,
                postprocess_output=False,
                return_tokens=True,
            )
        ]
    )
    assert r.tokens[0].shape == (8, 50)


def test_speed_shortens_the_output(model: OmniVoice) -> None:
    text = "The committee met on Tuesday and agreed to open the library on weekends."
    [slow, fast] = model.generate(
        [
            GenerationRequest(text=text, num_step=2, return_tokens=True),
            GenerationRequest(text=text, speed=2.0, num_step=2, return_tokens=True),
        ]
    )
    assert fast.tokens[0].shape[1] < slow.tokens[0].shape[1]


def test_long_text_is_chunked_in_both_paths(model: OmniVoice, voice: VoicePrompt) -> None:
    text = " ".join(["This sentence is long enough to add up over many repetitions."] * 8)
    settings = {
        "num_step": 2,
        "audio_chunk_threshold": 5.0,
        "audio_chunk_duration": 4.0,
        "return_tokens": True,
    }
    auto, cloned = model.generate(
        [
            GenerationRequest(text=text, **settings),
            GenerationRequest(text=text, voice=voice, **settings),
        ]
    )
    assert len(auto.tokens) > 1 and len(cloned.tokens) > 1
    assert auto.audio.size > sum(t.shape[1] for t in auto.tokens) * 960 * 0.5


def test_step_callback_reports_progress(model: OmniVoice) -> None:
    steps: list[tuple[int, int]] = []
    model.generate(
        [GenerationRequest(text="Count my steps.", num_step=5)],
        on_step=lambda s, n: steps.append((s, n)),
    )
    assert steps[-1] == (5, 5) and len(steps) == 5


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_is_refused(model: OmniVoice, text: str) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        model.generate([GenerationRequest(text=text)])


def test_unknown_language_falls_back_to_none(model: OmniVoice) -> None:
    common = {"text": "Language fallback.", "num_step": 2, "return_tokens": True, **GREEDY}
    [unknown, none] = model.generate(
        [
            GenerationRequest(language="xx-nowhere", **common),
            GenerationRequest(language=None, **common),
        ]
    )
    assert np.array_equal(unknown.tokens[0], none.tokens[0])


def test_invalid_instruct_lists_valid_items(model: OmniVoice) -> None:
    with pytest.raises(InvalidInstruct) as info:
        model.generate([GenerationRequest(text="Hi.", instruct="femal, robot voice")])
    message = str(info.value)
    assert "femal" in message and "female" in message and "whisper" in message


def test_bad_numbers_are_refused(model: OmniVoice) -> None:
    for bad in ({"num_step": 0}, {"speed": -1.0}, {"duration": 0.0}):
        with pytest.raises(InvalidInput):
            model.generate([GenerationRequest(text="Hi.", **bad)])


def test_voice_prompt_from_any_sample_rate(
    model: OmniVoice, expected: dict[str, np.ndarray]
) -> None:
    wav24 = expected["ref_a_wav"].astype(np.float32)
    t = np.arange(int(len(wav24) / 24000 * 44100)) / 44100
    wav44 = (0.2 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    prompt = model.encode_voice(wav44, 44100, "a tone", preprocess=True)
    assert prompt.tokens.shape[0] == 8 and prompt.tokens.dtype == np.int64
    assert prompt.tokens.max() < 1024 and prompt.ref_text == "a tone."


def test_silent_reference_is_refused(model: OmniVoice) -> None:
    with pytest.raises(InvalidAudio, match="silent"):
        model.encode_voice(np.zeros(48000, dtype=np.float32), 24000, "nothing")


def test_empty_reference_is_refused(model: OmniVoice) -> None:
    with pytest.raises(InvalidAudio):
        model.encode_voice(np.zeros(0, dtype=np.float32), 24000, "nothing")


def test_reference_without_transcript_is_refused(
    model: OmniVoice, expected: dict[str, np.ndarray]
) -> None:
    with pytest.raises(InvalidInput, match="transcript"):
        model.encode_voice(expected["ref_a_wav"], 24000, "  ")


def test_reference_longer_than_20_s_is_encoded_with_a_warning(
    model: OmniVoice, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(0)
    wav = (0.1 * rng.standard_normal(24000 * 22)).astype(np.float32)
    with caplog.at_level("WARNING"):
        prompt = model.encode_voice(wav, 24000, "a long noisy reference")
    assert prompt.tokens.shape[1] == pytest.approx(22 * 25, abs=2)
    assert any(">20s" in r.getMessage() for r in caplog.records)


def test_malformed_voice_tokens_are_refused(model: OmniVoice) -> None:
    bad = VoicePrompt(tokens=np.full((8, 10), 1024, dtype=np.int64), ref_text="x.", ref_rms=0.1)
    with pytest.raises(InvalidInput, match="codebook"):
        model.generate([GenerationRequest(text="Hi.", voice=bad)])


def test_bfloat16_and_float16_generate_finite_audio(checkpoint_dir: Path) -> None:
    for dtype in ("bfloat16", "float16"):
        m = OmniVoice.load(str(checkpoint_dir), dtype=dtype)
        [r] = m.generate([GenerationRequest(text="Half precision.", num_step=2)])
        assert np.isfinite(r.audio).all() and r.audio.size > 0, dtype


# ---------------------------------------------------------------- checkpoint errors


def copy_checkpoint(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def test_missing_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not found"):
        OmniVoice.load(str(tmp_path / "nope"))


@pytest.mark.parametrize(
    "missing",
    ["config.json", "tokenizer.json", "model.safetensors", "audio_tokenizer/model.safetensors"],
)
def test_missing_piece_is_named(checkpoint_dir: Path, tmp_path: Path, missing: str) -> None:
    ckpt = copy_checkpoint(checkpoint_dir, tmp_path / "ckpt")
    (ckpt / missing).unlink()
    with pytest.raises(CheckpointError, match=f"missing {missing}".replace(".", r"\.")) as caught:
        OmniVoice.load(str(ckpt))
    assert "a checkpoint holds config.json, model.safetensors" in str(
        caught.value
    )  # what a whole one has


def test_corrupt_weights_and_config_are_named(checkpoint_dir: Path, tmp_path: Path) -> None:
    ckpt = copy_checkpoint(checkpoint_dir, tmp_path / "ckpt")
    (ckpt / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        OmniVoice.load(str(ckpt))
    ckpt2 = copy_checkpoint(checkpoint_dir, tmp_path / "ckpt2")
    config = json.loads((ckpt2 / "config.json").read_text())
    del config["llm_config"]["hidden_size"]
    (ckpt2 / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="hidden_size"):
        OmniVoice.load(str(ckpt2))


def test_weights_of_the_wrong_shape_are_named(checkpoint_dir: Path, tmp_path: Path) -> None:
    ckpt = copy_checkpoint(checkpoint_dir, tmp_path / "ckpt")
    config = json.loads((ckpt / "config.json").read_text())
    config["llm_config"]["intermediate_size"] = 96
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="gate_proj"):
        OmniVoice.load(str(ckpt))


def test_unreachable_hub_id_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        CheckpointError, match="not in the Hugging Face cache and HF_HUB_OFFLINE is set"
    ) as caught:
        OmniVoice.load("nobody/no-such-omnivoice")
    assert "hf download nobody/no-such-omnivoice" in str(caught.value) and "\n" not in str(
        caught.value
    )


def test_unknown_dtype_is_refused(checkpoint_dir: Path) -> None:
    with pytest.raises(InvalidInput, match="dtype"):
        OmniVoice.load(str(checkpoint_dir), dtype="int8")


def test_stats_count_passes_tokens_and_flops(model: OmniVoice) -> None:
    model.device_times()  # what earlier tests left unreported
    before = model.stats()
    [r] = model.generate(
        [GenerationRequest(text="Count the work.", num_step=3, return_tokens=True)]
    )
    after = model.stats()
    assert after["forward_passes"] - before["forward_passes"] == 3
    t = r.tokens[0].shape[1]
    tokens = (after["real_tokens"] - before["real_tokens"]) / 3
    assert tokens > 2 * t  # the conditional row (style, text, target) plus the unconditional target
    cfg = model.model.cfg
    assert (after["useful_flops"] - before["useful_flops"]) / 3 >= 2 * tokens * cfg.num_parameters
    assert after["graph_hits"] == 0  # no CUDA graphs on the CPU
    # The device seconds come apart, once the device is past the batch (on the CPU, at once).
    assert "forward_s" not in after
    times = model.device_times()
    assert 0 < times["forward_s"] <= times["batch_s"]
    assert model.device_times() == dict.fromkeys(times, 0.0)  # reported once


def test_a_mixed_batch_runs_in_two_rounds_and_each_item_as_if_alone(
    model: OmniVoice, voice: VoicePrompt, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_text = " ".join(["This sentence is long enough to add up over many repetitions."] * 8)
    settings = {
        "num_step": 2,
        "audio_chunk_threshold": 5.0,
        "audio_chunk_duration": 4.0,
        "return_tokens": True,
    }
    requests = [
        GenerationRequest(text="A short one.", seed=1, **settings),
        GenerationRequest(
            text=long_text, seed=2, **settings
        ),  # long, no voice prompt: chunks 1.. wait for chunk 0
        GenerationRequest(text="A short cloned one.", voice=voice, seed=3, **settings),
        GenerationRequest(
            text=long_text, voice=voice, seed=4, **settings
        ),  # long with a voice prompt: all chunks at once
    ]
    rounds: list[int] = []
    real = stepper.BatchState

    def counting(net: object, prompts: list, *rest: object) -> object:  # counts, then builds
        rounds.append(len(prompts))
        return real(net, prompts, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(stepper, "BatchState", counting)
    batch = model.generate(requests)
    assert len(batch[1].tokens) > 1 and len(batch[3].tokens) > 1
    # Round 1: both short items, chunk 0 of the bare long item, every chunk of the cloned one;
    # round 2: the bare long item's later chunks.
    assert rounds == [2 + 1 + len(batch[3].tokens), len(batch[1].tokens) - 1]
    for request, together in zip(requests, batch):
        [alone] = model.generate([request])
        assert len(alone.tokens) == len(together.tokens)
        for a, b in zip(alone.tokens, together.tokens):
            assert np.array_equal(a, b)


def test_decode_copies_audio_and_tokens_to_the_host_on_the_decode_stream(
    model: OmniVoice, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU a copy to the host waits for everything queued before it on its stream. The
    denoising stream holds the next batches' steps by then, so every copy of a decode (the audio,
    and the tokens an item asked for back) must be made on the decode stream. There is no GPU
    here: a fake stream stands in for it, and `torch.cuda.stream` and the tensors' `cpu` and
    `record_stream` are patched to record where each copy is made."""
    inside = [False]
    copies: list[bool] = []

    class FakeStream:
        def wait_event(self, event: object) -> None:
            pass

    @contextlib.contextmanager
    def on_stream(stream: object) -> Iterator[None]:
        assert isinstance(stream, FakeStream)
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    real_cpu = torch.Tensor.cpu

    def cpu(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        copies.append(inside[0])
        return real_cpu(self, *args, **kwargs)

    requests = [
        GenerationRequest(text="Give my tokens back.", num_step=2, seed=1, return_tokens=True),
        GenerationRequest(text="Only the audio.", num_step=2, seed=2),
    ]
    denoised = model.denoise(requests)
    expected = model.decode(denoised)
    monkeypatch.setattr(model, "decode_stream", FakeStream())
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: None)
    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    results = model.decode(denoised)
    assert copies and all(copies), copies  # every copy to the host made on the decode stream
    assert len(copies) == len(expected) + len(expected[0].tokens)  # the audio, and item 0's tokens
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got.audio, want.audio)
        assert len(got.tokens) == len(want.tokens)
        for a, b in zip(got.tokens, want.tokens):
            np.testing.assert_array_equal(a, b)
    assert results[0].tokens and not results[1].tokens


def test_decode_reports_its_codec_and_post_processing_times(model: OmniVoice) -> None:
    """`decode` adds the host's seconds for the codec and for the post-processing to a caller's
    `timings`, accumulating over calls, and decodes the same audio with or without them."""
    requests = [GenerationRequest(text="Time my decoding, please.", num_step=2, seed=5)]
    plain = model.decode(model.denoise(requests))
    timings: dict[str, float] = {}
    timed = model.decode(model.denoise(requests), timings)
    np.testing.assert_array_equal(timed[0].audio, plain[0].audio)
    assert set(timings) == {"codec_s", "postprocess_s"}
    assert timings["codec_s"] > 0 and timings["postprocess_s"] > 0
    first = dict(timings)
    model.decode(model.denoise(requests), timings)
    assert all(timings[k] > first[k] for k in first)


def test_the_codec_decodes_in_float32_whatever_the_models_dtype(checkpoint_dir: Path) -> None:
    """The acoustic decoder is float32 (bfloat16 rounds more than the parity fixtures' audio
    rule allows: bench/decode_cost.py), also under a bf16 model."""
    model = OmniVoice.load(str(checkpoint_dir), dtype="bfloat16")
    assert model.codec.decoder_dtype == torch.float32
    assert {p.dtype for p in model.codec.acoustic_decoder.parameters()} == {torch.float32}
    [result] = model.generate([GenerationRequest(text="A float32 decode.", num_step=2, seed=3)])
    assert np.isfinite(result.audio).all() and np.abs(result.audio).max() > 0
