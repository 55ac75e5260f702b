"""The Higgs Audio v2 codec (24 kHz audio <-> 8 x 25 Hz codes), in plain torch (no transformers, no
torchaudio), and its loading: `Codec` composes the acoustic DAC stacks (codec_acoustic.py), HuBERT
(codec_semantic.py), the semantic conv stacks around it (codec_semantic_convs.py) and the residual
vector quantizer (codec_quantizer.py), as its configuration (codec_config.py) sizes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from sidecar.audio.resample import resample_tensor
from sidecar.runtime.codec_acoustic import AcousticDecoder, AcousticEncoder, Snake1d, snake
from sidecar.runtime.codec_config import CodecConfig, read_codec_config
from sidecar.runtime.codec_graphs import DecodeGraphs, stream_key
from sidecar.runtime.codec_quantizer import ResidualVQ
from sidecar.runtime.codec_semantic import SemanticConfig, SemanticModel
from sidecar.runtime.codec_semantic_convs import SemanticDecoder, SemanticEncoder
from sidecar.shared.errors import CheckpointError

DECODE_FRAMES_PER_CALL = 15000  # 600 s of audio per batched decode call bounds its memory
_SKIPPED_KEYS = frozenset({"semantic_model.masked_spec_embed"})
# Old-style weight-norm names, renamed on load as transformers does; a checkpoint saved by an older
# torch may use them for HuBERT's positional convolution.
_LEGACY_WEIGHT_NORM = {
    ".weight_g": ".parametrizations.weight.original0",
    ".weight_v": ".parametrizations.weight.original1",
}


# Measured on the decoder (tests/sidecar/runtime/test_codec.py keeps it true): frames appended after an
# item change its last ~7 frames of audio, and ~8 frames of left context make a decode of a
# window equal to the full decode. Both margins are doubled.
TAIL_FRAMES = 16
TAIL_CONTEXT_FRAMES = 16
# A batched decode's shape is rounded up: its length to a multiple of LENGTH_STEP frames, its
# rows by `decode_rows`. On a GPU the convolutions set up each shape they have not run before,
# at a cost many times a short decode's, and every request's length is new at first; rounded,
# few shapes recur (docs/PERFORMANCE.md, "Decode").
LENGTH_STEP = 16
WARM_FRAMES = 256  # `warm_shapes` decodes one item of each rounded length up to this (~10 s)


def decode_length(frames: int) -> int:
    """A batched decode's length for items of at most `frames` frames."""
    return -(-frames // LENGTH_STEP) * LENGTH_STEP


def short_request_shapes(max_frames: int = WARM_FRAMES) -> list[tuple[int, int]]:
    """The decode shapes (rows, frames) a short request meets: one item of each rounded length up
    to `max_frames`, and one or two tail windows."""
    window = TAIL_CONTEXT_FRAMES + TAIL_FRAMES
    shapes = [(1, n) for n in range(LENGTH_STEP, max_frames + 1, LENGTH_STEP)]
    return [*shapes, (1, window), (2, window)]


def decode_rows(items: int) -> int:
    """A batched decode's rows for `items` items: 1, 2, 4, 8, then multiples of 8 (zero rows
    padding it waste at most 7 of them)."""
    if items <= 2:
        return items
    if items <= 8:
        return 1 << (items - 1).bit_length()
    return -(-items // 8) * 8


def _conv_output_length(module: nn.Module, length: int) -> int:
    """Length after every Conv1d in `module`, in registration order (the encoder is a plain chain)."""
    for m in module.modules():
        if isinstance(m, nn.Conv1d):
            if isinstance(m.padding, str):  # "same"/"valid": not a chain this formula describes
                raise ValueError(f"{m}: a string padding has no fixed output length here")
            k, s, d, p = m.kernel_size[0], m.stride[0], m.dilation[0], m.padding[0]
            length = (length + 2 * p - d * (k - 1) - 1) // s + 1
    return length


class Codec(nn.Module):
    """Higgs Audio v2 codec: `encode` 24 kHz mono [B,1,N] -> codes [B,8,N/960], `decode` the reverse.

    Parameter names match `audio_tokenizer/model.safetensors`. The weights are float32: HuBERT and
    the RVQ argmax must match the reference's fp32 codes exactly, and Snake / the DAC decoder
    overflow in float16. `io_dtype` only sets the dtype `decode` returns. The acoustic decoder
    alone may run in another dtype (`use_decoder_dtype`): bfloat16 has float32's range, so
    nothing overflows, but it rounds (`bench/decode_cost.py` measures how much).
    """

    def __init__(self, config: CodecConfig, io_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.config = config
        self.io_dtype = io_dtype
        self.decoder_dtype = torch.float32  # its weights' and activations' (`use_decoder_dtype`)
        self.sample_rate = config.sample_rate
        self.hop_length = config.hop_length
        self.frame_rate = config.frame_rate
        self.num_codebooks = config.num_quantizers
        acoustic = config.acoustic
        self.acoustic_encoder = AcousticEncoder(
            acoustic.encoder_hidden_size, acoustic.downsampling_ratios, acoustic.hidden_size
        )
        self.acoustic_decoder = AcousticDecoder(
            acoustic.hidden_size, acoustic.decoder_hidden_size, acoustic.upsampling_ratios
        )
        self.encoder_semantic = SemanticEncoder(config)
        self.decoder_semantic = SemanticDecoder(config)
        self.semantic_model = SemanticModel(SemanticConfig.from_dict(config.semantic))
        h = config.hidden_size
        self.fc = nn.Linear(h, h)
        self.fc1 = nn.Linear(h, config.semantic_hidden_size)  # training-only semantic head input
        self.fc2 = nn.Linear(h, config.acoustic_hidden_size)
        self.quantizer = ResidualVQ(config)
        self.graphs: DecodeGraphs | None = None  # on a GPU, `capture_graphs`
        self.eval()

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    def _semantic_features(self, wav: torch.Tensor) -> torch.Tensor:
        """[B,1,N] at 24 kHz -> averaged HuBERT hidden states [B, T, semantic_hidden]."""
        x = wav[:, 0, :]
        if self.config.sample_rate != self.config.semantic_sample_rate:
            x = resample_tensor(x, self.config.sample_rate, self.config.semantic_sample_rate)
        # 160 samples (half a HuBERT hop) each side: the reference's fixed padding, which makes
        # HuBERT's frame count exactly 2 per codec frame.
        x = F.pad(x, (160, 160))
        hidden = self.semantic_model(x)
        feats = torch.stack(hidden, dim=1).mean(dim=1)
        step = self.config.semantic_downsample_factor
        return feats[:, ::step, :] if step > 1 else feats

    @torch.inference_mode()
    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        """wav [B,1,N] (24 kHz, N a multiple of hop_length) -> codes int64 [B, num_codebooks, N/hop]."""
        if wav.dim() != 3 or wav.shape[1] != 1:
            raise ValueError(
                f"codec.encode wants mono audio shaped [B,1,N], got {tuple(wav.shape)}"
            )
        wav = wav.to(device=self.device, dtype=torch.float32)
        semantic = self.encoder_semantic(self._semantic_features(wav).transpose(1, 2))
        # As the reference: pad the acoustic input by half a hop each side only when its frame count
        # would otherwise differ from the semantic branch's (never for N a multiple of the hop).
        if _conv_output_length(self.acoustic_encoder, wav.shape[-1]) != semantic.shape[-1]:
            pad = self.hop_length // 2
            wav = F.pad(wav, (pad, pad))
        acoustic = self.acoustic_encoder(wav)
        emb = self.fc(torch.cat([acoustic, semantic], dim=1).transpose(1, 2))
        return self.quantizer.encode(emb)

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, num_codebooks, T] -> audio [B, 1, hop_length*T] in `io_dtype`."""
        if codes.dim() != 3 or codes.shape[1] != self.num_codebooks:
            raise ValueError(
                f"codec.decode wants codes shaped [B,{self.num_codebooks},T], got {tuple(codes.shape)}"
            )
        if self.graphs is not None and codes.is_cuda:
            audio = self.graphs.replay(codes, stream_key())
            if audio is not None:
                return audio
        return self.decode_eagerly(codes)

    def decode_eagerly(self, codes: torch.Tensor) -> torch.Tensor:
        """`decode`, kernel by kernel: what its graphs capture."""
        latent = self.fc2(self.quantizer.decode(codes.to(device=self.device, dtype=torch.long)))
        audio = self.acoustic_decoder(latent.transpose(1, 2).to(self.decoder_dtype))
        return audio.to(self.io_dtype)

    def use_decoder_dtype(self, dtype: torch.dtype) -> Codec:
        """Run the acoustic decoder in `dtype` from now on (before `fuse_activations`, which
        binds Snake's alphas in the dtype they have then)."""
        self.acoustic_decoder.to(dtype)
        self.decoder_dtype = dtype
        return self

    def fuse_activations(self) -> None:
        """Compile the decoder's Snake activations into one kernel each (a GPU's fast path).

        Eager Snake is five element-wise kernels over audio-rate tensors, most of the decode's
        device time; the arithmetic stays in the decoder's dtype. Compiles now, on short decodes
        of one and of two items, so that no compilation happens during traffic (dynamic shapes; a
        batch of one is its own case)."""
        fused = torch.compile(snake, dynamic=True)
        for module in self.acoustic_decoder.modules():
            if isinstance(module, Snake1d):
                # alpha as a plain tensor: torch.compile keeps a Parameter's shape static, which
                # compiled once per layer, hit its recompile limit and left most layers eager.
                module.forward = partial(fused, alpha=module.alpha.detach())  # type: ignore[method-assign]
        for batch in (1, 2):
            for frames in (3, 5):
                self.decode(
                    torch.zeros(
                        (batch, self.num_codebooks, frames), dtype=torch.long, device=self.device
                    )
                )

    @torch.inference_mode()
    def decode_many(
        self, codes: Sequence[torch.Tensor], max_frames: int = DECODE_FRAMES_PER_CALL
    ) -> list[torch.Tensor]:
        """Decode items of any lengths ([num_codebooks, T_i] each) in few batched calls.

        Items are sorted by length and decoded together, padded with zero codes to the group's
        rounded shape (`decode_length`, `decode_rows`: few shapes recur, each set up once). The
        decoder's convolutions let padding change an item's last ~7 frames, so every item that
        does not fill the length has its tail decoded again, batched, from a window ending at
        its true end with enough left context to be exact (one of at most `window` frames is
        decoded whole); the result equals decoding each item on its own (to float32 rounding,
        ~1e-6). Returns 1-D audio tensors of hop_length * T_i samples.
        """
        out: dict[int, torch.Tensor] = {}  # item index -> its audio
        order = sorted(range(len(codes)), key=lambda i: codes[i].shape[-1])
        groups: list[list[int]] = [[]]
        for i in order:
            frames = decode_length(codes[i].shape[-1])
            if groups[-1] and frames * decode_rows(len(groups[-1]) + 1) > max_frames:
                groups.append([])
            groups[-1].append(i)
        window = TAIL_CONTEXT_FRAMES + TAIL_FRAMES
        hop = self.hop_length
        for group in groups:
            length = decode_length(codes[group[-1]].shape[-1])
            shorter = [i for i in group if codes[i].shape[-1] < length]
            whole = [i for i in shorter if codes[i].shape[-1] <= window]
            if len(whole) < len(group):  # else every item is decoded whole below
                audio = self.decode(self._padded([codes[i] for i in group], length))[:, 0]
                for row, i in enumerate(group):
                    out[i] = audio[row, : codes[i].shape[-1] * hop]
            for i in whole:
                out[i] = self.decode(codes[i].unsqueeze(0))[0, 0]  # short enough to decode whole
            tails = [i for i in shorter if codes[i].shape[-1] > window]
            if tails:
                windows = self._padded([codes[i][:, -window:] for i in tails], window)
                tail_audio = self.decode(windows)[:, 0]
                for row, i in enumerate(tails):
                    t = codes[i].shape[-1]
                    fixed = out[i].clone()
                    fixed[(t - TAIL_FRAMES) * hop :] = tail_audio[row, TAIL_CONTEXT_FRAMES * hop :]
                    out[i] = fixed
        return [out[i] for i in range(len(codes))]

    def _padded(self, codes: Sequence[torch.Tensor], length: int) -> torch.Tensor:
        """The items' codes as one batch of `decode_rows` rows and `length` frames, zero-padded."""
        batch = torch.zeros(
            (decode_rows(len(codes)), self.num_codebooks, length),
            dtype=torch.long,
            device=self.device,
        )
        for row, item in enumerate(codes):
            batch[row, :, : item.shape[-1]] = item
        return batch

    @torch.inference_mode()
    def warm_shapes(self, max_frames: int = WARM_FRAMES) -> int:
        """Decode zero codes of each shape one short request meets (`short_request_shapes`), so
        that its first decode does not pay the shape's set-up. Returns how many shapes it
        decoded."""
        shapes = short_request_shapes(max_frames)
        for rows, frames in shapes:
            self.decode(
                torch.zeros(
                    (rows, self.num_codebooks, frames), dtype=torch.long, device=self.device
                )
            )
        return len(shapes)

    @torch.inference_mode()
    def capture_graphs(self, streams: Sequence[torch.cuda.Stream]) -> int:
        """On a GPU: CUDA graphs of the decode of each shape a short request meets, on each of
        `streams` (sidecar/runtime/codec_graphs.py); their set-up is paid here, as `warm_shapes`
        pays it. Returns how many graphs."""
        self.graphs = DecodeGraphs(self.decode_eagerly)
        return self.graphs.capture(streams, short_request_shapes(), self.num_codebooks)


def _rename_legacy(key: str) -> str:
    for old, new in _LEGACY_WEIGHT_NORM.items():
        if key.endswith(old):
            return key[: -len(old)] + new
    return key


def load_state_strict(module: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Load `state` into `module`, requiring the key sets and shapes to agree exactly. The
    module's tensors become `state`'s (cast to their dtypes), so it may be built on the meta
    device."""
    state = {_rename_legacy(k): v for k, v in state.items() if k not in _SKIPPED_KEYS}
    wanted = module.state_dict()
    for key in sorted(wanted):
        if key not in state:
            raise CheckpointError(f"{source}: missing tensor '{key}'")
    for key in sorted(state):
        if key not in wanted:
            raise CheckpointError(f"{source}: unexpected tensor '{key}'")
        if tuple(state[key].shape) != tuple(wanted[key].shape):
            raise CheckpointError(
                f"{source}: tensor '{key}' has shape {tuple(state[key].shape)}, "
                f"expected {tuple(wanted[key].shape)}"
            )
    module.load_state_dict(
        {k: v.to(wanted[k].dtype) for k, v in state.items()}, strict=True, assign=True
    )


def load_codec(
    audio_tokenizer_dir: Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    decoder_dtype: torch.dtype = torch.float32,
) -> Codec:
    """Build the codec from `<checkpoint>/audio_tokenizer`. Weights stay float32 whatever `dtype` is
    (see `Codec`), but for the acoustic decoder's in `decoder_dtype`; `dtype` is the dtype
    `decode` returns."""
    directory = Path(audio_tokenizer_dir)
    config = read_codec_config(directory)
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"codec weights not found: {weights}")
    try:
        state = load_file(str(weights), device="cpu")
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"codec weights {weights} are unreadable: {exc}") from exc
    try:
        with torch.device("meta"):  # shapes only: every tensor comes from the file
            codec = Codec(config, io_dtype=dtype)
    except (TypeError, ValueError, KeyError) as exc:  # a config whose sizes do not fit together
        raise CheckpointError(
            f"{directory / 'config.json'} does not describe a buildable codec: {exc}"
        ) from exc
    load_state_strict(codec, state, str(weights))
    return codec.to(device).use_decoder_dtype(decoder_dtype).eval()
