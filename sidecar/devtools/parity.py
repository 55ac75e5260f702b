"""The `parity` command: hold the runtime to fixtures recorded from the reference implementation.

A section is each list-valued key of cases.json, plus `audio` for the arrays no case names.
Prints `SECTION: passed/total` per section and `parity: N/M passed`; details of each failure go
to stderr. Tokens, tables and strings must be equal; audio the same length and within 1e-3.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sidecar.devtools.parity_cases import (
    Cases,
    ChunksCase,
    ClonePromptCase,
    CombineTextCase,
    DurationCase,
    GenerateCase,
    InstructCase,
    LanguageCase,
    ScheduleCase,
    TargetTokensCase,
    TextCase,
    TokenizeCase,
)

AUDIO_TOL = 1e-3
RESAMPLE_TOL = 1e-4
FLOAT_RTOL = 1e-6
DETERMINISTIC = {"position_temperature": 0.0, "class_temperature": 0.0}
# generate() arguments that map one to one onto GenerationRequest fields.
REQUEST_FIELDS = (
    "language",
    "instruct",
    "duration",
    "speed",
    "num_step",
    "guidance_scale",
    "t_shift",
    "layer_penalty_factor",
    "position_temperature",
    "class_temperature",
    "denoise",
    "postprocess_output",
    "audio_chunk_duration",
    "audio_chunk_threshold",
)


class Mismatch(Exception):
    """A case whose output differs from the fixture; the message says where."""


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=FLOAT_RTOL, abs_tol=1e-12)


def same_tokens(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.shape != want.shape:
        raise Mismatch(f"{what}: shape {got.shape} != {want.shape}")
    if not np.array_equal(got, want):
        raise Mismatch(f"{what}: {int((got != want).sum())} of {got.size} tokens differ")


def same_audio(got: np.ndarray, want: np.ndarray, what: str, tol: float = AUDIO_TOL) -> None:
    got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    if got.shape != want.shape:
        raise Mismatch(f"{what}: {got.size} samples != {want.size}")
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    if not err <= tol:
        raise Mismatch(f"{what}: max abs error {err:.3g} > {tol}")


def equal(got: Any, want: Any, what: str) -> None:
    if got != want:
        raise Mismatch(f"{what}: got {got!r}, want {want!r}")


class Parity:
    """Runs every section of one fixtures directory against the runtime."""

    def __init__(self, fixtures: Path, device: str = "cpu") -> None:
        self.fixtures = fixtures
        self.device = device
        self.cases: Cases = json.loads((fixtures / "cases.json").read_text(encoding="utf-8"))
        with np.load(fixtures / "expected.npz") as npz:
            self.arrays = {k: npz[k] for k in npz.files}
        self._runtime: Any = None

    @property
    def runtime(self) -> Any:
        if self._runtime is None:
            from sidecar.runtime.omnivoice import OmniVoice

            self._runtime = OmniVoice.load(
                str(self.fixtures / "checkpoint"), device=self.device, dtype="float32"
            )
        return self._runtime

    # Each check_<section> raises Mismatch (or any error) for a failing case.

    def check_duration_estimates(self, c: DurationCase) -> None:
        from sidecar.shared.duration import estimate_duration

        got = estimate_duration(c["text"], c["ref_text"], c["ref_tokens"])
        if not close(got, c["estimate"]):
            raise Mismatch(f"estimate {got!r} != {c['estimate']!r}")

    def check_target_tokens(self, c: TargetTokensCase) -> None:
        from sidecar.shared.duration import target_tokens

        equal(
            target_tokens(
                c["text"], c.get("ref_text"), c.get("ref_tokens"), speed=c.get("speed", 1.0)
            ),
            c["tokens"],
            "tokens",
        )

    def check_chunks(self, c: ChunksCase) -> None:
        from sidecar.shared.text import chunk_text

        equal(
            chunk_text(c["text"], c["chunk_len"], c.get("min_chunk_len", 3)), c["chunks"], "chunks"
        )

    def check_add_punctuation(self, c: TextCase) -> None:
        from sidecar.shared.text import add_punctuation

        equal(add_punctuation(c["text"]), c["out"], "text")

    def check_instructs(self, c: InstructCase) -> None:
        from sidecar.shared.errors import InvalidInstruct
        from sidecar.shared.voice_design import resolve_instruct

        try:
            got = resolve_instruct(c["instruct"], use_zh=c["use_zh"])
        except InvalidInstruct as exc:
            if not c.get("error"):
                raise Mismatch(
                    f"rejected ({exc}), the reference accepts it as {c.get('out')!r}"
                ) from None
            return
        if c.get("error"):
            raise Mismatch(f"accepted as {got!r}, the reference rejects it")
        equal(got, c["out"], "instruct")

    def check_languages(self, c: LanguageCase) -> None:
        from sidecar.shared.languages import resolve_language

        equal(resolve_language(c["in"]), c["out"], "language")

    def check_combine_text(self, c: CombineTextCase) -> None:
        from sidecar.shared.text import combine_text

        equal(combine_text(c["text"], c.get("ref_text")), c["out"], "text")

    def check_tokenize(self, c: TokenizeCase) -> None:
        from sidecar.shared.text import tokenize_text

        equal(tokenize_text(self.runtime.tokenizer, c["text"]), c["ids"], "ids")

    def check_schedules(self, c: ScheduleCase) -> None:
        from sidecar.runtime.generate import unmask_schedule

        equal(
            unmask_schedule(c["target_len"] * 8, c["num_step"], c["t_shift"]), c["counts"], "counts"
        )

    def check_clone_prompts(self, c: ClonePromptCase) -> None:
        prompt = self.runtime.encode_voice(
            self.arrays[c["wav"]], 24000, c["ref_text_in"], preprocess=c["preprocess_prompt"]
        )
        equal(prompt.ref_text, c["ref_text_out"], "ref_text")
        if not close(prompt.ref_rms, c["ref_rms"]):
            raise Mismatch(f"ref_rms {prompt.ref_rms!r} != {c['ref_rms']!r}")
        same_tokens(prompt.tokens, self.arrays[c["tokens"]], "tokens")

    def check_generate(self, c: GenerateCase) -> None:
        from sidecar.runtime.request import GenerationRequest, VoicePrompt

        # JSON that becomes GenerationRequest's keyword arguments: it checks them itself
        kwargs: dict[str, Any] = dict(c["kwargs"])
        kwargs.update(c.get("deterministic") or DETERMINISTIC)
        texts = kwargs.pop("text")
        texts = [texts] if isinstance(texts, str) else list(texts)
        voice = None
        if c.get("clone_prompt"):
            entry = next(p for p in self.cases["clone_prompts"] if p["name"] == c["clone_prompt"])
            voice = VoicePrompt(
                self.arrays[entry["tokens"]].astype(np.int64),
                entry["ref_text_out"],
                entry["ref_rms"],
            )
        unknown = set(kwargs) - set(REQUEST_FIELDS)
        if unknown:
            raise Mismatch(f"generate() arguments this runtime does not take: {sorted(unknown)}")

        def per_item(i: int) -> dict[str, Any]:
            out = {}
            for key, value in kwargs.items():
                if isinstance(value, list):
                    value = value[0] if len(value) == 1 else value[i]
                if value is not None:
                    out[key] = value
            return out

        outputs: tuple[tuple[bool, Literal["audio", "audio_raw"]], ...] = (
            (True, "audio"),
            (False, "audio_raw"),
        )
        for post, key in outputs:
            requests = [
                GenerationRequest(
                    text=t,
                    voice=voice,
                    return_tokens=True,
                    **{**per_item(i), "postprocess_output": post},
                )
                for i, t in enumerate(texts)
            ]
            results = self.runtime.generate(requests)
            for i, (result, want) in enumerate(zip(results, c["items"])):
                if post:
                    if len(result.tokens) != len(want["tokens"]):
                        raise Mismatch(
                            f"item {i}: {len(result.tokens)} chunks != {len(want['tokens'])}"
                        )
                    for j, (got_t, name) in enumerate(zip(result.tokens, want["tokens"])):
                        same_tokens(got_t, self.arrays[name], f"item {i} chunk {j}")
                same_audio(result.audio, self.arrays[want[key]], f"item {i} {key}")

    def audio_cases(self) -> list[tuple[str, Callable[[], None]]]:
        from sidecar.audio import processing as audio
        from sidecar.audio.resample import resample

        a, sr = self.arrays, 24000
        x = a["resample_in"]
        return [
            (
                "resample_24k_16k",
                lambda: same_audio(
                    resample(x, 24000, 16000), a["resample_24k_16k"], "resample", RESAMPLE_TOL
                ),
            ),
            (
                "resample_44k_24k",
                lambda: same_audio(
                    resample(a["resample_44k_24k_in"], 44100, 24000),
                    a["resample_44k_24k"],
                    "resample",
                    RESAMPLE_TOL,
                ),
            ),
            (
                "remove_silence_gen",
                lambda: same_audio(
                    audio.remove_silence(a["silence_in"], sr, 500, 100, 100),
                    a["remove_silence_gen"],
                    "silence",
                ),
            ),
            (
                "remove_silence_ref",
                lambda: same_audio(
                    audio.remove_silence(a["silence_in"], sr, 200, 100, 200),
                    a["remove_silence_ref"],
                    "silence",
                ),
            ),
            (
                "fade_pad",
                lambda: same_audio(audio.fade_and_pad(x[:24000], sr), a["fade_pad"], "fade_pad"),
            ),
            (
                "cross_fade",
                lambda: same_audio(
                    audio.cross_fade_chunks([x[0:24000], x[24000:48000], x[48000:60000]], sr, 0.3),
                    a["cross_fade"],
                    "cross_fade",
                ),
            ),
        ]

    def run(self, out: Callable[[str], None] = print) -> bool:
        passed = total = 0
        sections: list[tuple[str, list[tuple[str, Callable[[], None]]]]] = []
        for name, value in self.cases.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                check = getattr(self, f"check_{name}", None)
                cases: list[tuple[str, Callable[[], None]]] = [
                    (str(c.get("name", i)), functools.partial(self._run_case, name, check, c))
                    for i, c in enumerate(value)
                ]
                sections.append((name, cases))
        sections.append(("audio", self.audio_cases()))
        for name, cases in sections:
            ok = 0
            for label, run in cases:
                try:
                    run()
                    ok += 1
                except (
                    Exception
                ) as exc:  # a crash is a failed case, reported, never the end of the run
                    detail = (
                        str(exc)
                        if isinstance(exc, Mismatch)
                        else "".join(traceback.format_exception_only(exc)).strip()
                    )
                    print(f"  {name}[{label}]: {detail}", file=sys.stderr)
            out(f"{name}: {ok}/{len(cases)}")
            passed, total = passed + ok, total + len(cases)
        out(f"parity: {passed}/{total} passed")
        return passed == total

    @staticmethod
    def _run_case(section: str, check: Callable[[object], None] | None, case: object) -> None:
        if check is None:
            raise Mismatch(f"no check for section {section!r}")
        check(case)


def main(fixtures: str, device: str = "cpu") -> int:
    path = Path(fixtures)
    if not (path / "cases.json").is_file() or not (path / "expected.npz").is_file():
        print(
            f"parity: {path} is not a fixtures directory (needs cases.json and expected.npz)",
            file=sys.stderr,
        )
        return 2
    return 0 if Parity(path, device).run() else 1
