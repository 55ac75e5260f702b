"""The shape of a parity fixtures directory's cases.json: one TypedDict per section (each a list
of cases, as the reference implementation recorded them), read by `sidecar.devtools.parity`."""

from __future__ import annotations

from typing import TypedDict


class DurationCase(TypedDict):
    text: str
    ref_text: str
    ref_tokens: int
    estimate: float  # seconds


class TargetTokensCase(TypedDict):
    text: str
    ref_text: str | None
    ref_tokens: int | None
    speed: float
    tokens: int


class ChunksCase(TypedDict):
    text: str
    chunk_len: int
    min_chunk_len: int
    chunks: list[str]


class TextCase(TypedDict):
    """add_punctuation: `text` in, `out` out."""

    text: str
    out: str


class _InstructCaseBase(TypedDict):
    instruct: str
    use_zh: bool


class InstructCase(_InstructCaseBase, total=False):
    out: str | None  # as the reference resolves it
    error: bool  # the reference rejects it


LanguageCase = TypedDict("LanguageCase", {"in": str | None, "out": str | None})


class CombineTextCase(TypedDict):
    text: str
    ref_text: str | None
    out: str


class TokenizeCase(TypedDict):
    text: str
    ids: list[int]


class ScheduleCase(TypedDict):
    target_len: int
    num_step: int
    t_shift: float
    counts: list[int]


class ClonePromptCase(TypedDict):
    name: str
    preprocess_prompt: bool
    ref_text_in: str
    ref_text_out: str
    ref_rms: float
    wav: str  # names in expected.npz
    tokens: str


class GeneratedItem(TypedDict):
    tokens: list[str]  # names in expected.npz: one array per chunk
    audio: str  # post-processed
    audio_raw: str


class GenerateCase(TypedDict):
    name: str
    kwargs: dict[str, object]  # generate()'s arguments: `text`, and GenerationRequest fields
    clone_prompt: str | None  # a ClonePromptCase's name
    deterministic: dict[str, float] | None  # sampling temperatures (None: DETERMINISTIC)
    iterative_calls: list[object]
    items: list[GeneratedItem]


class Cases(TypedDict, total=False):
    reference: str
    torch: str
    seed: int
    variant: str
    sample_rate: int
    duration_estimates: list[DurationCase]
    target_tokens: list[TargetTokensCase]
    chunks: list[ChunksCase]
    add_punctuation: list[TextCase]
    instructs: list[InstructCase]
    languages: list[LanguageCase]
    combine_text: list[CombineTextCase]
    tokenize: list[TokenizeCase]
    schedules: list[ScheduleCase]
    clone_prompts: list[ClonePromptCase]
    generate: list[GenerateCase]
