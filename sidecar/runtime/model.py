"""The OmniVoice network: audio/text embeddings, a bidirectional Qwen3 backbone, the audio head.

Pure `nn.Module`s with no I/O. The operations follow transformers' Qwen3 in the same order and
dtypes (RMSNorm in float32, RoPE cos/sin in float32 cast to the activation dtype, q/k norms
before RoPE, SDPA with a boolean mask), so that in float32 on the CPU the logits match the
reference implementation bit for bit. Attention is never causal: every position of an item
sees every other position of the same item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from sidecar.runtime.attention import varlen_attention
from sidecar.runtime.config import ModelConfig
from sidecar.runtime.residual import add_product_


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
        )
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        # The packed path's q/k norm and rotary as one Triton kernel (sidecar/runtime/kernels/norm_rope.py); the
        # runner turns it on, on a GPU in half precision, where the custom op is registered.
        self.fused_norm_rope = False
        self.attention_kernel = "fa2"  # the runner's choice (sidecar/runtime/attention.py)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        rows, length, _ = x.shape
        shape = (rows, length, -1, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(shape)).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            # Materialised like transformers' repeat_kv, which the reference runs whenever a
            # mask is given; SDPA's enable_gqa would take another kernel path.
            k = (
                k[:, :, None]
                .expand(rows, self.num_kv_heads, groups, length, self.head_dim)
                .reshape(rows, -1, length, self.head_dim)
            )
            v = (
                v[:, :, None]
                .expand(rows, self.num_kv_heads, groups, length, self.head_dim)
                .reshape(rows, -1, length, self.head_dim)
            )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.head_dim**-0.5)
        return self.o_proj(out.transpose(1, 2).reshape(rows, length, -1))

    def forward_packed(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
    ) -> torch.Tensor:
        """x [N, hidden] holding many segments end to end; attention stays inside each segment."""
        return self.o_proj(self.attend_packed(x, cos, sin, cu_seqlens, max_seqlen))

    def attend_packed(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
    ) -> torch.Tensor:
        """`forward_packed` up to the output projection: the heads' outputs [N, heads * dim]."""
        shape = (x.shape[0], -1, self.head_dim)
        q, k, v = (proj(x).view(shape) for proj in (self.q_proj, self.k_proj, self.v_proj))
        if self.fused_norm_rope:
            fused = torch.ops.omnivoice.norm_rope  # takes rows laid end to end
            q = fused(q.contiguous(), self.q_norm.weight, cos, sin, self.q_norm.eps)
            k = fused(k.contiguous(), self.k_norm.weight, cos, sin, self.k_norm.eps)
        else:
            q = self.q_norm(q)
            k = self.k_norm(k)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        out = varlen_attention(
            q, k, v, cu_seqlens, max_seqlen, self.head_dim**-0.5, self.attention_kernel
        )
        return out.reshape(x.shape[0], -1)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward_packed(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.gated_packed(x))

    def gated_packed(self, x: torch.Tensor) -> torch.Tensor:
        """`forward_packed` up to the down projection: silu(gate) * up."""
        return F.silu(self.gate_proj(x)) * self.up_proj(x)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)
        # The packed path adds its two projections onto the residual stream in place
        # (sidecar/runtime/residual.py); the runner turns it on where it compiles them for a GPU in
        # half precision.
        self.residual_in_place = False

    def forward(
        self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, mask)
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward_packed(
        self,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
    ) -> torch.Tensor:
        """h [N, hidden], packed. With `residual_in_place` h itself is updated and returned."""
        if not self.residual_in_place:
            h = h + self.self_attn.forward_packed(
                self.input_layernorm(h), cos, sin, cu_seqlens, max_seqlen
            )
            return h + self.mlp.forward_packed(self.post_attention_layernorm(h))
        attn = self.self_attn.attend_packed(
            self.input_layernorm(h), cos, sin, cu_seqlens, max_seqlen
        )
        add_product_(h, attn, self.self_attn.o_proj.weight)
        add_product_(
            h, self.mlp.gated_packed(self.post_attention_layernorm(h)), self.mlp.down_proj.weight
        )
        return h


class Backbone(nn.Module):
    """Qwen3 without its language-model head; key names match the checkpoint's `llm.*`."""

    inv_freq: (
        torch.Tensor
    )  # a buffer: nn.Module's attribute lookup types it only as Tensor | Module

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = cast(
            "Sequence[DecoderLayer]",
            nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers)),
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        inv_freq = 1.0 / (
            cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float) / cfg.head_dim)
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rope(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(
        self, h: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        cos, sin = self.rope(positions, h.dtype)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.norm(h)


class OmniVoiceModel(nn.Module):
    """Embeds [rows, codebooks, length] token ids, runs the backbone, returns audio logits."""

    codebook_layer_offsets: torch.Tensor  # a buffer

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.llm = Backbone(cfg)
        self.audio_embeddings = nn.Embedding(
            cfg.num_codebooks * cfg.audio_vocab_size, cfg.hidden_size
        )
        self.audio_heads = nn.Linear(
            cfg.hidden_size, cfg.num_codebooks * cfg.audio_vocab_size, bias=False
        )
        offsets = torch.arange(cfg.num_codebooks) * cfg.audio_vocab_size
        self.register_buffer("codebook_layer_offsets", offsets)

    def embed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """Text positions take the text embedding of codebook row 0; audio positions the sum of
        their eight codebook embeddings (ids on text positions are zeroed, as upstream does)."""
        text = self.llm.embed_tokens(input_ids[:, 0, :])
        shifted = input_ids * audio_mask.unsqueeze(1) + self.codebook_layer_offsets.view(1, -1, 1)
        audio = self.audio_embeddings(shifted).sum(dim=1)
        return torch.where(audio_mask.unsqueeze(-1), audio, text)

    def forward(
        self,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids [R, C, L], audio_mask [R, L], attention_mask [R, 1, L, L] bool (None: every
        position sees every other). Returns logits [R, C, L, V] in the model's dtype."""
        h = self.embed(input_ids, audio_mask)
        rows, length, _ = h.shape
        positions = torch.arange(length, device=h.device).unsqueeze(0)
        h = self.llm(h, positions, attention_mask)
        logits = self.audio_heads(h)
        return logits.view(rows, length, self.cfg.num_codebooks, self.cfg.audio_vocab_size).permute(
            0, 2, 1, 3
        )

    def hidden_packed(  # noqa: PLR0913  the packed batch's tensors, passed on to stack_packed as they are
        self,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        positions: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
        head_index: torch.Tensor,
        stack: Callable[..., torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The packed layout of `sidecar.runtime.batch`: input_ids [C, N], audio_mask [N], positions [N].
        Returns the final hidden states [M, hidden] of the M positions in head_index. `stack`
        stands in for `stack_packed` (the runner passes its compiled one)."""
        cos, sin = self.llm.rope(positions, self.llm.embed_tokens.weight.dtype)
        return (stack or self.stack_packed)(
            input_ids, audio_mask, cos, sin, cu_seqlens, max_seqlen, head_index
        )

    def stack_packed(  # noqa: PLR0913  the compiled graph's inputs: a container would be traced as one more
        self,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
        head_index: torch.Tensor,
    ) -> torch.Tensor:
        """`hidden_packed` once the rotary tables are made: the part the runner compiles. The
        tables come in as inputs so that the compiler cannot fold their cos and sin into each
        layer's q/k kernel, where they were computed again for every head of every layer (a
        sizeable share of a forward pass)."""
        h = self.embed_packed(input_ids, audio_mask)
        for layer in self.llm.layers:
            h = layer.forward_packed(h, cos, sin, cu_seqlens, max_seqlen)
        return self.norm_packed(h, head_index)

    def embed_packed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """The packed rows' input embeddings [N, hidden]: `stack_packed` before its layers."""
        return self.embed(input_ids.unsqueeze(0), audio_mask.unsqueeze(0))[0]

    def norm_packed(self, h: torch.Tensor, head_index: torch.Tensor) -> torch.Tensor:
        """The final norm of the positions in head_index: `stack_packed` after its layers."""
        return self.llm.norm(h.index_select(0, head_index))

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Audio logits [M, C, V] from hidden states [M, hidden]."""
        return self.audio_heads(hidden).view(-1, self.cfg.num_codebooks, self.cfg.audio_vocab_size)

    def forward_packed(self, *inputs: Any) -> torch.Tensor:
        """Logits [M, C, V] for the M positions in head_index only (see `hidden_packed`)."""
        return self.head(self.hidden_packed(*inputs))
