"""Writes a Whisper checkpoint with seeded random weights through transformers' own classes.

`make-checkpoint OUT --size tiny --kind whisper` calls it, so the ASR code path (config, weights,
feature extractor, tokenizer and generation config, loaded by the Auto classes) is real in CI,
where no hub can be reached. The tokenizer is byte-level with no merges: the 256 byte symbols
plus the special tokens Whisper's generation looks up. Random weights transcribe noise into
noise; only a real checkpoint gives meaningful text (docs/RELIABILITY.md). Its config.json says
`"random_weights": true`, so a server given it as `--asr-model` reports the ASR checks without
failing a chunk on them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from sidecar.shared.layout import RANDOM_WEIGHTS

END = "<|endoftext|>"
SPECIAL = (
    END,
    "<|startoftranscript|>",
    "<|en|>",
    "<|zh|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
)


class WhisperSize(TypedDict):
    """WhisperConfig's sizes: the tiny test model's."""

    num_mel_bins: int
    encoder_layers: int
    decoder_layers: int
    encoder_attention_heads: int
    decoder_attention_heads: int
    d_model: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_source_positions: int
    max_target_positions: int


TINY: WhisperSize = {
    "num_mel_bins": 80,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "d_model": 16,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
    "max_source_positions": 1500,  # 30 s of 10 ms mel frames, halved by the stride-2 conv
    "max_target_positions": 64,
}


def _tokenizer() -> Tokenizer:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    for content in SPECIAL:  # one at a time, so ids follow this order
        tok.add_tokens([AddedToken(content, special=True, normalized=False)])
    return tok


def make_whisper_checkpoint(out: Path, seed: int = 0) -> None:
    """Write config, weights, processor and generation config of a tiny random Whisper."""
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.utils import logging as transformers_logging

    from sidecar.devtools.checkpoint import give_umask_modes

    transformers_logging.disable_progress_bar()  # "Writing model shards" for one tiny file

    tok = _tokenizer()
    ids: dict[str, int] = {token: tok.token_to_id(token) for token in SPECIAL}  # type: ignore[misc]
    end, start = ids[END], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=tok.get_vocab_size(),
        pad_token_id=end,
        bos_token_id=end,
        eos_token_id=end,
        decoder_start_token_id=start,
        suppress_tokens=[],
        begin_suppress_tokens=[],
        **TINY,
    )
    setattr(config, RANDOM_WEIGHTS, True)  # config.json says so: the server's checks of it inform
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config)
    out = Path(out)
    model.save_pretrained(out)
    tokenizer = WhisperTokenizer(
        tokenizer_object=tok, unk_token=END, bos_token=END, eos_token=END, pad_token=END
    )
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=TINY["num_mel_bins"]),
        tokenizer=tokenizer,
    )
    processor.save_pretrained(out)
    GenerationConfig(
        decoder_start_token_id=start,
        eos_token_id=end,
        pad_token_id=end,
        max_length=TINY["max_target_positions"],
        is_multilingual=True,
        lang_to_id={"<|en|>": ids["<|en|>"], "<|zh|>": ids["<|zh|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
    ).save_pretrained(out)
    give_umask_modes(out)  # the weights too, not safetensors' private 0600
