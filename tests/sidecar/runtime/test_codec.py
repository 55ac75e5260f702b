"""The codec against the parity fixtures: exact clone-prompt codes, decoded audio, strict loading."""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from sidecar.runtime.codec import Codec, load_codec
from sidecar.shared.errors import CheckpointError
from tests.helpers.paths import REPO_ROOT

SR = 24000


@pytest.fixture(scope="module")
def codec(checkpoint_dir: Path) -> Codec:
    return load_codec(checkpoint_dir / "audio_tokenizer")


def _fade_pad(audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """Spec 2.12 steps 2-3 (loudness, fade, pad) for a raw decode; no silence removal."""
    audio = audio.astype(np.float32)
    if ref_rms is not None:
        if ref_rms < 0.1:
            audio = audio * (ref_rms / 0.1)
    else:
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if peak > 1e-6:
            audio = audio / peak * 0.5
    k = min(int(0.1 * SR), len(audio) // 2)
    if k > 0:
        audio[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        audio[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    pad = np.zeros(int(0.1 * SR), dtype=np.float32)
    return np.concatenate([pad, audio, pad])


def test_config_numbers(codec: Codec) -> None:
    assert (codec.sample_rate, codec.hop_length, codec.frame_rate, codec.num_codebooks) == (
        24000,
        960,
        25,
        8,
    )


def test_clone_prompt_codes_exact(codec: Codec, cases: dict, expected: dict) -> None:
    checked = 0
    for case in cases["clone_prompts"]:
        if case["preprocess_prompt"]:
            continue  # needs silence removal first; that path is tested with the prompt builder
        wav = expected[case["wav"]].astype(np.float32)
        rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2)))
        assert rms == pytest.approx(case["ref_rms"], rel=1e-6)
        if 0 < rms < 0.1:
            wav = wav * (0.1 / rms)
        wav = wav[: len(wav) - len(wav) % codec.hop_length]
        codes = codec.encode(torch.from_numpy(wav)[None, None])
        assert codes.dtype == torch.int64
        np.testing.assert_array_equal(codes[0].numpy(), expected[case["tokens"]])
        checked += 1
    assert checked >= 1


def _single_chunk_items(cases: dict) -> list[tuple[str, str, float | None]]:
    """(tokens key, audio_raw key, ref_rms) for every generated item that was decoded in one piece."""
    rms_by_prompt = {c["name"]: c["ref_rms"] for c in cases["clone_prompts"]}
    out = []
    for case in cases["generate"]:
        ref_rms = rms_by_prompt[case["clone_prompt"]] if case["clone_prompt"] else None
        for item in case["items"]:
            if len(item["tokens"]) == 1:
                out.append((item["tokens"][0], item["audio_raw"], ref_rms))
    return out


def test_decode_matches_reference_audio(codec: Codec, cases: dict, expected: dict) -> None:
    items = _single_chunk_items(cases)
    assert items
    for tokens_key, audio_key, ref_rms in items:
        tokens = torch.from_numpy(expected[tokens_key])
        raw = codec.decode(tokens[None])[0, 0].numpy()
        got = _fade_pad(raw, ref_rms)
        want = expected[audio_key]
        assert got.shape == want.shape, tokens_key
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0, err_msg=tokens_key)


@pytest.mark.parametrize("frames", [1, 2, 7, 26])
def test_decode_length_is_hop_times_frames(codec: Codec, frames: int) -> None:
    codes = torch.randint(0, 1024, (1, 8, frames), generator=torch.Generator().manual_seed(frames))
    audio = codec.decode(codes)
    assert audio.shape == (1, 1, 960 * frames)
    assert audio.dtype == torch.float32
    assert torch.isfinite(audio).all()


def test_batch_decode_equals_single(codec: Codec) -> None:
    codes = torch.randint(0, 1024, (3, 8, 12), generator=torch.Generator().manual_seed(1))
    batch = codec.decode(codes)
    for i in range(3):
        torch.testing.assert_close(
            batch[i : i + 1], codec.decode(codes[i : i + 1]), atol=1e-6, rtol=0
        )


def test_fused_activations_decode_as_eager(checkpoint_dir: Path) -> None:
    """The compiled Snake (a GPU's fast path) decodes as the eager one. torch.compile runs here on
    inductor's CPU backend; bench/profile_kernels.py checks the CUDA kernels on the GPU."""
    from torch._dynamo.utils import counters

    eager = load_codec(checkpoint_dir / "audio_tokenizer")
    fused = load_codec(checkpoint_dir / "audio_tokenizer")
    before = counters["stats"]["unique_graphs"]
    fused.fuse_activations()
    compiled = counters["stats"]["unique_graphs"] - before
    # One graph for every Snake (dynamic shapes), times the size-1 cases torch.compile keeps apart
    # (one item; a one-channel layer in this tiny codec). One per layer would hit torch.compile's
    # recompile limit and leave the rest eager, as a first version did on the GPU.
    assert 1 <= compiled <= 4
    codes = torch.randint(0, 1024, (3, 8, 12), generator=torch.Generator().manual_seed(2))
    for batch in (
        codes,
        codes[:1],
        codes[:, :, :7],
    ):  # batched, one item (its own compiled case), other length
        torch.testing.assert_close(fused.decode(batch), eager.decode(batch), atol=1e-5, rtol=1e-5)
    assert (
        counters["stats"]["unique_graphs"] - before == compiled
    )  # no compilation after the warm-up
    snakes = [m for m in fused.acoustic_decoder.modules() if type(m).__name__ == "Snake1d"]
    assert snakes and all(isinstance(m.forward, partial) for m in snakes)


def test_batch_encode_equals_single(codec: Codec, expected: dict) -> None:
    wav = torch.from_numpy(expected["ref_a_wav"][: 960 * 20])
    batch = torch.stack([wav, wav.flip(0) * 0.5])[:, None]
    codes = codec.encode(batch)
    for i in range(2):
        torch.testing.assert_close(codes[i : i + 1], codec.encode(batch[i : i + 1]))


def test_encode_decode_roundtrip_shapes(codec: Codec) -> None:
    wav = torch.randn(1, 1, 960 * 5, generator=torch.Generator().manual_seed(0)) * 0.1
    codes = codec.encode(wav)
    assert codes.shape == (1, 8, 5)
    assert int(codes.min()) >= 0 and int(codes.max()) < 1024
    assert codec.decode(codes).shape == wav.shape


def test_encode_rejects_stereo(codec: Codec) -> None:
    with pytest.raises(ValueError):
        codec.encode(torch.zeros(1, 2, 960))


def test_half_dtype_keeps_fp32_weights(checkpoint_dir: Path) -> None:
    codec = load_codec(checkpoint_dir / "audio_tokenizer", dtype=torch.float16)
    assert all(p.dtype == torch.float32 for p in codec.parameters())
    audio = codec.decode(torch.zeros(1, 8, 3, dtype=torch.long))
    assert audio.dtype == torch.float16


def test_bf16_decoder(codec: Codec, checkpoint_dir: Path) -> None:
    """`decoder_dtype` casts the acoustic decoder alone, whose audio then rounds to bfloat16's
    precision: near the float32 decode, not equal to it."""
    bf16 = load_codec(checkpoint_dir / "audio_tokenizer", decoder_dtype=torch.bfloat16)
    decoder = {p.dtype for p in bf16.acoustic_decoder.parameters()}
    rest = {p.dtype for name, p in bf16.named_parameters() if not name.startswith("acoustic_dec")}
    assert (decoder, rest) == ({torch.bfloat16}, {torch.float32})
    codes = torch.randint(0, 1024, (2, 8, 12), generator=torch.Generator().manual_seed(3))
    want, got = codec.decode(codes), bf16.decode(codes)
    assert got.dtype == torch.float32 and got.shape == want.shape
    error = float((got - want).abs().max() / want.abs().max())
    assert 1e-4 < error < 0.1


def _copy_with_state(src: Path, dst: Path, state: dict[str, torch.Tensor]) -> Path:
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    save_file(state, str(dst / "model.safetensors"))
    return dst


def test_every_tensor_is_the_files_and_old_weight_norm_names_load(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    """The codec is built on the meta device: every tensor it ends with must come from the file,
    also where an older torch saved HuBERT's weight norm as weight_g / weight_v."""
    src = checkpoint_dir / "audio_tokenizer"
    state = load_file(str(src / "model.safetensors"))
    conv = "semantic_model.encoder.pos_conv_embed.conv."
    legacy = dict(state)
    legacy[conv + "weight_g"] = legacy.pop(conv + "parametrizations.weight.original0")
    legacy[conv + "weight_v"] = legacy.pop(conv + "parametrizations.weight.original1")
    old = _copy_with_state(src, tmp_path / "old", legacy)
    for codec in (load_codec(src), load_codec(old)):
        loaded = codec.state_dict()
        assert set(loaded) == set(state) - {"semantic_model.masked_spec_embed"}
        for key, tensor in loaded.items():
            assert tensor.device.type == "cpu" and torch.equal(tensor, state[key]), key


def test_renamed_key_is_a_checkpoint_error(checkpoint_dir: Path, tmp_path: Path) -> None:
    src = checkpoint_dir / "audio_tokenizer"
    state = load_file(str(src / "model.safetensors"))
    state["fc.weight_renamed"] = state.pop("fc.weight")
    bad = _copy_with_state(src, tmp_path / "bad", state)
    with pytest.raises(CheckpointError, match=r"fc\.weight"):
        load_codec(bad)


def test_extra_key_is_a_checkpoint_error(checkpoint_dir: Path, tmp_path: Path) -> None:
    src = checkpoint_dir / "audio_tokenizer"
    state = load_file(str(src / "model.safetensors"))
    state["quantizer.quantizers.8.project_in.bias"] = torch.zeros(16)
    bad = _copy_with_state(src, tmp_path / "bad", state)
    with pytest.raises(CheckpointError, match=r"quantizer\.quantizers\.8\.project_in\.bias"):
        load_codec(bad)


def test_wrong_shape_is_a_checkpoint_error(checkpoint_dir: Path, tmp_path: Path) -> None:
    src = checkpoint_dir / "audio_tokenizer"
    state = load_file(str(src / "model.safetensors"))
    state["fc2.bias"] = torch.zeros(5)
    bad = _copy_with_state(src, tmp_path / "bad", state)
    with pytest.raises(CheckpointError, match=r"fc2\.bias"):
        load_codec(bad)


def test_missing_files_are_checkpoint_errors(checkpoint_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError):
        load_codec(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps(json.loads((checkpoint_dir / "audio_tokenizer" / "config.json").read_text()))
    )
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_codec(tmp_path)


# Runs in a child process: it puts a stand-in `torchaudio` module (backed by our resampler) into
# sys.modules so transformers' own HiggsAudioV2TokenizerModel can be built, which must never happen
# in the test process itself.
_REFERENCE_SCRIPT = r"""
import importlib.machinery, json, sys, types
from pathlib import Path
import numpy as np, torch
from sidecar.audio.resample import resample_tensor

fn = types.ModuleType("torchaudio.functional")
fn.resample = lambda x, orig, new: resample_tensor(x, orig, new)
ta = types.ModuleType("torchaudio")
ta.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
ta.__version__ = "2.9.0"
ta.functional = fn
sys.modules.update({"torchaudio": ta, "torchaudio.functional": fn})
try:
    from transformers.models.higgs_audio_v2_tokenizer.modeling_higgs_audio_v2_tokenizer import (
        HiggsAudioV2TokenizerModel)
except Exception as exc:
    print(json.dumps({"skip": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
from sidecar.runtime.codec import load_codec

src, npz = Path(sys.argv[1]), sys.argv[2]
ours = load_codec(src)
# The fixture's codebooks and biases are all zero (transformers' init), which hides most of the
# computation; give them values so every code and every branch matters.
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    for q in ours.quantizer.quantizers:
        q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=g) * 0.05)
    for name, p in ours.named_parameters():
        if name.endswith("bias"):
            p.add_(torch.randn(p.shape, generator=g) * 0.01)
ref = HiggsAudioV2TokenizerModel.from_pretrained(str(src)).eval()
missing, unexpected = ref.load_state_dict(ours.state_dict(), strict=False)
assert set(missing) <= {"semantic_model.masked_spec_embed"} and not unexpected, (missing, unexpected)
z = np.load(npz)
out = {}
for key in ("ref_a_wav", "ref_b_wav"):
    wav = torch.from_numpy(z[key])
    wav = wav[: len(wav) - len(wav) % 960][None, None]
    with torch.no_grad():
        want = ref.encode(wav, return_dict=False)
        got = ours.encode(wav)
        audio_ref = ref.decode(want, return_dict=False)
    audio = ours.decode(want)
    out[key] = {"equal": bool(torch.equal(want, got)), "distinct": int(torch.unique(want).numel()),
                "decode_err": float((audio - audio_ref).abs().max()), "peak": float(audio_ref.abs().max())}
print(json.dumps(out))
"""


def test_matches_transformers_higgs_with_live_codebooks(
    checkpoint_dir: Path, fixtures_dir: Path
) -> None:
    """Our composition against transformers' own Higgs model on the same (de-zeroed) weights: codes equal,
    audio equal to float rounding. The resampler is shared here; its own tests hold it to torchaudio."""
    import os
    import subprocess
    import sys

    root = REPO_ROOT
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _REFERENCE_SCRIPT,
            str(checkpoint_dir / "audio_tokenizer"),
            str(fixtures_dir / "expected.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(f"transformers' Higgs model is unavailable: {result['skip']}")
    for key, r in result.items():
        assert r["equal"], key
        assert r["distinct"] > 50, key  # the comparison exercised many codes
        assert r["decode_err"] <= 1e-5 * max(1.0, r["peak"]), key


@pytest.fixture(scope="module")
def live_codec(checkpoint_dir: Path) -> Codec:
    """The fixture codec with random codebooks: its own are zeros, so its audio ignores the codes."""
    c = load_codec(checkpoint_dir / "audio_tokenizer")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for q in c.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=gen))
    return c


def test_padding_changes_only_the_last_frames(live_codec: Codec) -> None:
    """Keeps TAIL_FRAMES / TAIL_CONTEXT_FRAMES honest: what padding reaches, and what context fixes."""
    from sidecar.runtime.codec import TAIL_CONTEXT_FRAMES, TAIL_FRAMES

    codes = torch.randint(0, 1024, (1, 8, 120), generator=torch.Generator().manual_seed(1))
    hop = live_codec.hop_length
    alone = live_codec.decode(codes)[0, 0]
    padded = live_codec.decode(torch.cat([codes, torch.randint(0, 1024, (1, 8, 40))], dim=2))[
        0, 0, : 120 * hop
    ]
    changed = torch.nonzero((alone - padded).abs() > 1e-6)
    assert changed.numel() > 0, "appending frames changed nothing: the test lost its power"
    assert int(changed.min()) >= (120 - TAIL_FRAMES) * hop
    window = live_codec.decode(codes[:, :, -(TAIL_FRAMES + TAIL_CONTEXT_FRAMES) :])[
        0, 0, TAIL_CONTEXT_FRAMES * hop :
    ]
    torch.testing.assert_close(window, alone[(120 - TAIL_FRAMES) * hop :], atol=1e-6, rtol=0)


def test_decode_many_equals_decoding_one_by_one(live_codec: Codec) -> None:
    gen = torch.Generator().manual_seed(2)
    lengths = [50, 7, 120, 33, 120, 64, 31, 90]
    codes = [torch.randint(0, 1024, (8, t), generator=gen) for t in lengths]
    together = live_codec.decode_many(codes, max_frames=400)  # forces several groups
    for c, got in zip(codes, together):
        want = live_codec.decode(c.unsqueeze(0))[0, 0]
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)  # audio peaks near 0.13 here


def recorded_shapes(codec: Codec, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (rows, frames) of every `codec.decode` call from now on, in order; `Codec.decode`
    called on the class decodes without being recorded."""
    shapes: list[tuple[int, int]] = []

    def recording(codes: torch.Tensor) -> torch.Tensor:
        shapes.append((codes.shape[0], codes.shape[-1]))
        return Codec.decode(codec, codes)

    monkeypatch.setattr(codec, "decode", recording)
    return shapes


def test_decode_many_decodes_few_shapes_and_one_item_exactly(
    live_codec: Codec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decode's first run of a shape is slow on a GPU (docs/PERFORMANCE.md, "Decode"), so
    decode_many rounds its batches' shapes: a length of whole LENGTH_STEPs, rows of 1, 2, 4, 8
    or a multiple of 8; only an item of at most one tail window is decoded at its own length.
    Every item still comes out as its own decode (its tail decoded again), one alone too."""
    from sidecar.runtime.codec import LENGTH_STEP, TAIL_CONTEXT_FRAMES, TAIL_FRAMES

    window = TAIL_CONTEXT_FRAMES + TAIL_FRAMES
    shapes = recorded_shapes(live_codec, monkeypatch)
    gen = torch.Generator().manual_seed(3)
    lengths = [37, 61, 75, 100, 9, 130, 141, 150, 77, 90, 33, 52]
    codes = [torch.randint(0, 1024, (8, t), generator=gen) for t in lengths]
    batches = {(1, 48): [codes[0]], (2, 80): codes[1:3], (16, 160): codes}  # first decode: rounded
    batches[1, 9] = [codes[4]]  # one item of at most a window: decoded whole, and only so
    for first, batch in batches.items():
        shapes.clear()
        got = live_codec.decode_many(batch, max_frames=100_000)
        assert shapes[0] == first
        if first == (1, 9):
            assert shapes == [(1, 9)]  # no rounded decode thrown away
        for rows, frames in shapes:
            assert rows in (1, 2, 4, 8) or rows % 8 == 0, shapes
            assert frames % LENGTH_STEP == 0 or frames <= window, shapes
        for c, audio in zip(batch, got):
            want = Codec.decode(live_codec, c.unsqueeze(0))[0, 0]
            torch.testing.assert_close(audio, want, atol=1e-6, rtol=0)


def test_warm_shapes_decodes_what_a_short_request_meets(
    live_codec: Codec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.runtime.codec import LENGTH_STEP, TAIL_CONTEXT_FRAMES, TAIL_FRAMES

    shapes = recorded_shapes(live_codec, monkeypatch)
    assert live_codec.warm_shapes(max_frames=64) == len(shapes) == 6
    window = TAIL_CONTEXT_FRAMES + TAIL_FRAMES
    assert shapes == [(1, n) for n in range(LENGTH_STEP, 65, LENGTH_STEP)] + [
        (1, window),
        (2, window),
    ]
    # A short request's decode then meets only shapes already decoded.
    codes = torch.randint(0, 1024, (8, 45), generator=torch.Generator().manual_seed(4))
    shapes_before = set(shapes)
    shapes.clear()
    live_codec.decode_many([codes])
    assert set(shapes) <= shapes_before, shapes
