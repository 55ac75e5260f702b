"""The Higgs Audio v2 codec (24 kHz audio <-> 8 x 25 Hz codes), composed without torchaudio."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn
from transformers.models.dac.configuration_dac import DacConfig
from transformers.models.dac.modeling_dac import DacDecoder, DacEncoder, Snake1d
from transformers.models.hubert.configuration_hubert import HubertConfig
from transformers.models.hubert.modeling_hubert import HubertModel

from sidecar.audio.resample import resample_tensor
from sidecar.shared.errors import CheckpointError

# transformers' HiggsAudioV2TokenizerConfig fills these in under whatever the checkpoint's config gives;
# we apply the same defaults so a config that leaves them out builds the same network.
_ACOUSTIC_DEFAULTS: dict[str, Any] = {
    "encoder_hidden_size": 64,
    "downsampling_ratios": [8, 5, 4, 2],
    "decoder_hidden_size": 1024,
    "upsampling_ratios": [8, 5, 4, 2],
    "hidden_size": 256,
}
# SpecAugment masking only runs in training; forcing it off also keeps HubertModel from creating the
# training-only `masked_spec_embed` parameter, which the checkpoint may carry and we then skip.
_SEMANTIC_OVERRIDES: dict[str, Any] = {"mask_time_prob": 0.0, "mask_feature_prob": 0.0}
_SKIPPED_KEYS = frozenset({"semantic_model.masked_spec_embed"})
# Old-style weight-norm names that transformers renames on load; a checkpoint saved by an older
# torch may use them for HuBERT's positional convolution.
_LEGACY_WEIGHT_NORM = {
    ".weight_g": ".parametrizations.weight.original0",
    ".weight_v": ".parametrizations.weight.original1",
}


# Measured on the decoder (tests/sidecar/test_codec.py keeps it true): frames appended after an
# item change its last ~7 frames of audio, and ~8 frames of left context make a decode of a
# window equal to the full decode. Both margins are doubled.
TAIL_FRAMES = 16
TAIL_CONTEXT_FRAMES = 16
DECODE_FRAMES_PER_CALL = 15000  # 600 s of audio per batched decode call bounds its memory


@dataclass(frozen=True)
class CodecConfig:
    """The fields of `audio_tokenizer/config.json` that shape the network."""

    acoustic: dict[str, Any]
    semantic: dict[str, Any]
    sample_rate: int = 24000
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    kernel_size: int = 3
    unit_kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    codebook_size: int = 1024
    codebook_dim: int = 64
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2, 4)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CodecConfig:
        try:
            return cls(
                acoustic={**_ACOUSTIC_DEFAULTS, **d.get("acoustic_model_config", {})},
                semantic={**d.get("semantic_model_config", {}), **_SEMANTIC_OVERRIDES},
                sample_rate=int(d.get("sample_rate", 24000)),
                semantic_sample_rate=int(d.get("semantic_sample_rate", 16000)),
                downsample_factor=int(d.get("downsample_factor", 320)),
                kernel_size=int(d.get("kernel_size", 3)),
                unit_kernel_size=int(d.get("unit_kernel_size", 3)),
                channel_ratios=tuple(d.get("channel_ratios", (1, 1))),
                strides=tuple(int(s) for s in d.get("strides", (1, 1))),
                block_dilations=tuple(int(x) for x in d.get("block_dilations", (1, 1))),
                codebook_size=int(d.get("codebook_size", 1024)),
                codebook_dim=int(d.get("codebook_dim", 64)),
                target_bandwidths=tuple(d.get("target_bandwidths", (0.5, 1, 1.5, 2, 4))),
                raw=dict(d),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"audio_tokenizer/config.json is malformed: {exc}") from exc

    @property
    def hop_length(self) -> int:
        return math.prod(int(r) for r in self.acoustic["downsampling_ratios"])

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def semantic_hidden_size(self) -> int:
        return int(self.semantic["hidden_size"])

    @property
    def acoustic_hidden_size(self) -> int:
        return int(self.acoustic["hidden_size"])

    @property
    def hidden_size(self) -> int:
        return self.acoustic_hidden_size + self.semantic_hidden_size

    @property
    def num_quantizers(self) -> int:
        # The codec runs at its highest bandwidth; the number of codebooks follows from it.
        nbits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * nbits))

    @property
    def semantic_downsample_factor(self) -> int:
        return int(
            self.hop_length
            / (self.sample_rate / self.semantic_sample_rate)
            / self.downsample_factor
        )


class _ResidualUnit(nn.Module):
    """ELU -> dilated conv -> ELU -> 1x1 conv, plus the skip; no biases."""

    def __init__(self, cfg: CodecConfig, channels: int, dilation: int) -> None:
        super().__init__()
        k = cfg.unit_kernel_size
        self.conv1 = nn.Conv1d(
            channels, channels, k, padding=((k - 1) // 2) * dilation, dilation=dilation, bias=False
        )
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class _SemanticEncoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(_ResidualUnit(cfg, c_in, d) for d in cfg.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride  # stride 1 would otherwise get an even kernel
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class _SemanticEncoder(nn.Module):
    """Conv stack over the averaged HuBERT features."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        h = cfg.semantic_hidden_size
        self.conv = nn.Conv1d(h, h, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)
        blocks, c_in = [], h
        for ratio, stride in zip(cfg.channel_ratios, cfg.strides, strict=True):
            c_out = int(h * ratio)
            blocks.append(_SemanticEncoderBlock(cfg, c_in, c_out, stride))
            c_in = c_out
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


class _SemanticDecoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv: nn.Module
        if stride == 1:
            self.conv = nn.Conv1d(c_in, c_out, 3, padding=1)
        else:
            self.conv = nn.ConvTranspose1d(
                c_in,
                c_out,
                2 * stride,
                stride,
                padding=(stride + 1) // 2,
                output_padding=stride % 2,
                bias=False,
            )
        self.res_units = nn.ModuleList(_ResidualUnit(cfg, c_out, d) for d in cfg.block_dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for unit in self.res_units:
            x = unit(x)
        return x


class _SemanticDecoder(nn.Module):
    """The training-time semantic reconstruction head; inference never runs it, but its weights are
    in the checkpoint, so it exists to load them strictly."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        h, ratios = cfg.semantic_hidden_size, cfg.channel_ratios
        self.conv1 = nn.Conv1d(
            h, int(h * ratios[0]), cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False
        )
        blocks = []
        for i, stride in enumerate(cfg.strides):
            c_out = int(h * ratios[i + 1]) if i < len(ratios) - 1 else h
            blocks.append(_SemanticDecoderBlock(cfg, int(h * ratios[i]), c_out, stride))
        self.conv_blocks = nn.ModuleList(blocks)
        self.conv2 = nn.Conv1d(h, h, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for block in self.conv_blocks:
            x = block(x)
        return self.conv2(x)


class _Codebook(nn.Module):
    """Euclidean codebook; `cluster_size`, `embed_avg` and `inited` are EMA training state kept for loading."""

    inited: torch.Tensor  # buffers: nn.Module's attribute lookup types them only as Tensor | Module
    cluster_size: torch.Tensor
    embed: torch.Tensor
    embed_avg: torch.Tensor

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("inited", torch.ones(1))
        self.register_buffer("cluster_size", torch.zeros(size))
        self.register_buffer("embed", torch.zeros(size, dim))
        self.register_buffer("embed_avg", torch.zeros(size, dim))

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """Index of the nearest code for each row of x [N, dim]."""
        # Same expression and operation order as the reference, so near-ties resolve identically.
        embed = self.embed.t()
        dist = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices


class _Quantizer(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.codebook = _Codebook(cfg.codebook_size, cfg.codebook_dim)
        self.project_in = nn.Linear(cfg.hidden_size, cfg.codebook_dim)
        self.project_out = nn.Linear(cfg.codebook_dim, cfg.hidden_size)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> codes [B, T]."""
        z = self.project_in(x)
        return self.codebook.nearest(z.reshape(-1, z.shape[-1])).view(z.shape[:-1])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T] -> [B, T, hidden]."""
        return self.project_out(F.embedding(codes, self.codebook.embed))


class _ResidualVQ(nn.Module):
    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.quantizers = cast(
            "Sequence[_Quantizer]",
            nn.ModuleList(_Quantizer(cfg) for _ in range(cfg.num_quantizers)),
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> codes [B, Q, T]."""
        residual, codes = x, []
        for q in self.quantizers:
            idx = q.encode(residual)
            residual = residual - q.decode(idx)
            codes.append(idx)
        return torch.stack(codes, dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, Q, T] -> [B, T, hidden], summed in codebook order as the reference does."""
        out = self.quantizers[0].decode(codes[:, 0])
        for i in range(1, codes.shape[1]):
            out = out + self.quantizers[i].decode(codes[:, i])
        return out


def _snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Snake, x + sin(alpha x)^2 / alpha, written as transformers' Snake1d computes it."""
    shape = x.shape
    x = x.reshape(shape[0], shape[1], -1)
    return (x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)).reshape(shape)


def _strip_final_tanh(decoder: DacDecoder) -> None:
    """Higgs' DAC decoder differs from transformers' DAC: each transposed conv gets output_padding
    stride % 2 (so every block multiplies the length exactly by its stride) and there is no final tanh."""
    for module in decoder.modules():
        if isinstance(module, nn.ConvTranspose1d):
            module.output_padding = (module.stride[0] % 2,)
    decoder.tanh = nn.Identity()  # type: ignore[assignment]  # a Tanh slot, deliberately emptied


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

    Parameter names match `audio_tokenizer/model.safetensors`. All weights are float32: HuBERT and the
    RVQ argmax must match the reference's fp32 codes exactly, and Snake / the DAC decoder overflow in
    float16. `io_dtype` only sets the dtype `decode` returns.
    """

    def __init__(self, config: CodecConfig, io_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.config = config
        self.io_dtype = io_dtype
        self.sample_rate = config.sample_rate
        self.hop_length = config.hop_length
        self.frame_rate = config.frame_rate
        self.num_codebooks = config.num_quantizers
        acoustic = DacConfig(**config.acoustic)
        self.acoustic_encoder = DacEncoder(acoustic)
        self.acoustic_decoder = DacDecoder(acoustic)
        _strip_final_tanh(self.acoustic_decoder)
        self.encoder_semantic = _SemanticEncoder(config)
        self.decoder_semantic = _SemanticDecoder(config)
        semantic = HubertConfig(**config.semantic)
        semantic._attn_implementation = (
            "sdpa"  # what from_pretrained picks for the reference on CPU
        )
        self.semantic_model = HubertModel(semantic)
        h = config.hidden_size
        self.fc = nn.Linear(h, h)
        self.fc1 = nn.Linear(h, config.semantic_hidden_size)  # training-only semantic head input
        self.fc2 = nn.Linear(h, config.acoustic_hidden_size)
        self.quantizer = _ResidualVQ(config)
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
        hidden = self.semantic_model(x, output_hidden_states=True).hidden_states
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
        latent = self.fc2(self.quantizer.decode(codes.to(device=self.device, dtype=torch.long)))
        audio = self.acoustic_decoder(latent.transpose(1, 2))
        return audio.to(self.io_dtype)

    def fuse_activations(self) -> None:
        """Compile the decoder's Snake activations into one kernel each (a GPU's fast path).

        Eager Snake is five element-wise kernels over float32 audio-rate tensors, most of the
        decode's device time. The arithmetic stays float32. Compiles now, on short decodes of one and of two items, so that no
        compilation happens during traffic (dynamic shapes; a batch of one is its own case)."""
        fused = torch.compile(_snake, dynamic=True)
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

        Items are sorted by length and decoded together, padded to the longest of their group.
        The decoder's convolutions let padding change the last ~7 frames of a shorter item, so
        those items' tails are decoded again, batched, from windows ending at their true end with
        enough left context to be exact; the result equals decoding each item on its own (to
        float32 rounding, ~1e-6). Returns 1-D audio tensors of hop_length * T_i samples.
        """
        out: dict[int, torch.Tensor] = {}  # item index -> its audio
        order = sorted(range(len(codes)), key=lambda i: codes[i].shape[-1])
        groups: list[list[int]] = [[]]
        for i in order:
            frames = codes[i].shape[-1]
            if groups[-1] and frames * (len(groups[-1]) + 1) > max_frames:
                groups.append([])
            groups[-1].append(i)
        window = TAIL_CONTEXT_FRAMES + TAIL_FRAMES
        hop = self.hop_length
        for group in groups:
            t_max = codes[group[-1]].shape[-1]
            batch = torch.zeros(
                (len(group), self.num_codebooks, t_max), dtype=torch.long, device=self.device
            )
            for row, i in enumerate(group):
                batch[row, :, : codes[i].shape[-1]] = codes[i]
            audio = self.decode(batch)[:, 0]
            for row, i in enumerate(group):
                out[i] = audio[row, : codes[i].shape[-1] * hop]
            shorter = [i for i in group if codes[i].shape[-1] < t_max]
            for i in [i for i in shorter if codes[i].shape[-1] <= window]:
                out[i] = self.decode(codes[i].unsqueeze(0))[0, 0]  # short enough to decode whole
            tails = [i for i in shorter if codes[i].shape[-1] > window]
            if tails:
                tail_audio = self.decode(
                    torch.stack([codes[i][:, -window:] for i in tails]).to(self.device)
                )[:, 0]
                for row, i in enumerate(tails):
                    t = codes[i].shape[-1]
                    fixed = out[i].clone()
                    fixed[(t - TAIL_FRAMES) * hop :] = tail_audio[row, TAIL_CONTEXT_FRAMES * hop :]
                    out[i] = fixed
        return [out[i] for i in range(len(codes))]


def read_codec_config(audio_tokenizer_dir: Path) -> CodecConfig:
    path = Path(audio_tokenizer_dir) / "config.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"codec config not found: {path}") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"codec config {path} is unreadable: {exc}") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"codec config {path} is not a JSON object")
    return CodecConfig.from_dict(raw)


def _rename_legacy(key: str) -> str:
    for old, new in _LEGACY_WEIGHT_NORM.items():
        if key.endswith(old):
            return key[: -len(old)] + new
    return key


def load_state_strict(module: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Load `state` into `module`, requiring the key sets and shapes to agree exactly."""
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
    module.load_state_dict({k: v.to(wanted[k].dtype) for k, v in state.items()}, strict=True)


def load_codec(
    audio_tokenizer_dir: Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Codec:
    """Build the codec from `<checkpoint>/audio_tokenizer`. Weights stay float32 whatever `dtype` is
    (see `Codec`); `dtype` is the dtype `decode` returns."""
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
        codec = Codec(config, io_dtype=dtype)
    except (TypeError, ValueError, KeyError) as exc:  # a config whose sizes do not fit together
        raise CheckpointError(
            f"{directory / 'config.json'} does not describe a buildable codec: {exc}"
        ) from exc
    load_state_strict(codec, state, str(weights))
    return codec.to(device).eval()
