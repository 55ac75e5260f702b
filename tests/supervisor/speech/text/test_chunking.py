"""supervisor/speech/text/chunking.py: long input to balanced chunks at the best gaps, in any script."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.speech.text.chunking import (
    FIRST_CHUNK_CHARS,
    WHOLE_UP_TO,
    atoms,
    estimate_s,
    first_chunk,
    lead_chunk,
    split_text,
    starts_short,
)

EN = (
    "The harbour was quiet that morning. Mr. Smith walked down to the pier, carrying a basket of bread. "
    "Nobody else was there; the boats rocked gently in the grey water. He sat on the bench and waited for the "
    "ferry, which was late again, as it had been every day that week. "
)
ZH = "今天天气很好，我们一起去公园散步吧。公园里有很多花，红的、黄的、白的，非常漂亮。孩子们在草地上玩耍，老人们在树下下棋。"
JA = "今日はとても良い天気です。私たちは公園へ散歩に行きました。花がたくさん咲いていて、とてもきれいでした。"
KO = "오늘은 날씨가 정말 좋습니다. 우리 함께 공원에 산책하러 가요. 공원에는 꽃이 많이 있어요. "
TH = "วันนี้อากาศดีมาก เราไปเดินเล่นที่สวนสาธารณะกัน ในสวนมีดอกไม้มากมาย สวยงามมาก "
MIXED = "我们今天用 OmniVoice 来测试 mixed-language 的 chunking，效果怎么样？Let's see how it handles this. 日本語も少し：これはテストです。"
RUNTIME_THRESHOLD_S = 30.0  # the runtime chunks an item estimated above this again


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def balance(chunks: list[str]) -> float:
    """Longest over shortest chunk, in estimated seconds (1.0 is perfectly even)."""
    lengths = [estimate_s(c) for c in chunks]
    return max(lengths) / max(min(lengths), math.ulp(1.0))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("english", EN * 6),
        ("chinese", ZH * 6),
        ("japanese", JA * 8),
        ("korean", KO * 10),
        ("thai", TH * 10),
        ("mixed", MIXED * 5),
        ("no punctuation", "word " * 400),
        ("one giant word", "x" * 3000),
    ],
)
def test_long_text_becomes_balanced_chunks_below_the_runtime_threshold(
    name: str, text: str
) -> None:
    chunks = split_text(text, 15.0)
    assert len(chunks) == max(2, round(estimate_s(text) / 15.0))
    assert squash("".join(chunks)) == squash(text), "nothing lost, nothing repeated, order kept"
    assert all(chunk and chunk == chunk.strip() for chunk in chunks)
    assert all(estimate_s(chunk) < RUNTIME_THRESHOLD_S for chunk in chunks)
    assert balance(chunks) < 1.7


@pytest.mark.parametrize(
    ("text", "ending"),
    [(EN * 6, "."), (ZH * 6, "。"), (JA * 8, "。"), (KO * 10, "."), (MIXED * 5, ("。", ".", "？"))],
)
def test_chunks_end_at_sentence_ends_where_the_text_has_them(
    text: str, ending: str | tuple[str, ...]
) -> None:
    assert all(chunk.endswith(ending) for chunk in split_text(text, 15.0))


def test_short_text_stays_whole_up_to_twice_the_chunk_length() -> None:
    sentence = "A short sentence that says very little at all."
    assert split_text(sentence, 15.0) == [sentence]
    text = EN + EN[:150]
    assert estimate_s(text) <= WHOLE_UP_TO * 15.0 and split_text(text, 15.0) == [text.strip()]
    assert len(split_text(text, 5.0)) > 1


def test_abbreviations_and_initials_are_not_sentence_ends() -> None:
    gaps = {
        atom.text.strip(): atom.strength
        for atom in atoms("Ask Dr. Who and J. Smith. Then stop, please.")
    }
    assert gaps["Dr."] == 1 and gaps["J."] == 1 and gaps["Smith."] == 3 and gaps["stop,"] == 2


def test_gap_strengths_by_script() -> None:
    strengths = [(a.text, a.strength) for a in atoms("你好。我们\n\n走吧，好 ok")]
    assert strengths == [
        ("你", 1),
        ("好。", 3),
        ("我", 1),
        ("们\n\n", 4),
        ("走", 1),
        ("吧，", 2),
        ("好 ", 1),
        ("ok", 0),
    ]
    thai = atoms("สวัสดีครับ ไป")
    assert [a.strength for a in thai][:3] == [0, 0, 0] and thai[
        -3
    ].strength == 2  # inside a word; a phrase space
    assert atoms("「你好」")[0].strength == 0  # never cut right after an opening bracket


def test_speed_and_voice_change_the_estimate() -> None:
    text = EN * 4
    assert estimate_s(text, speed=2.0) < estimate_s(text) < estimate_s(text, speed=0.5)
    assert len(split_text(text, 10.0, estimate_s(text, speed=2.0))) < len(split_text(text, 10.0))


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.characters(codec="utf-8", categories=("L", "M", "N", "P", "Z", "S")),
        min_size=1,
        max_size=600,
    ),
    st.floats(min_value=1.0, max_value=20.0),
)
def test_any_text_is_split_without_loss(text: str, chunk_s: float) -> None:
    chunks = split_text(text, chunk_s)
    assert squash("".join(chunks)) == squash(text)
    assert (len(chunks) >= 1 and all(chunks)) or text.strip() == ""


def test_a_streamed_answers_first_chunk_ends_at_its_first_sentence_or_clause() -> None:
    sentence = "Good morning. The harbour was quiet, and Mr. Smith walked down to the pier."
    assert first_chunk(sentence + " " + sentence) == (
        "Good morning.",
        sentence[14:] + " " + sentence,
    )
    clause = "Walking down to the pier that morning, Mr. Smith saw a boat he knew from long before."
    head, rest = first_chunk(clause)
    assert (head, rest) == ("Walking down to the pier that morning,", clause[39:])
    # No sentence end or clause mark within the bound: the last word boundary inside it.
    words = (
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    )
    head, rest = first_chunk(words)
    assert len(head) <= FIRST_CHUNK_CHARS and head + " " + rest == words and rest
    assert first_chunk("Short enough to say at once. Really.") == (
        "Short enough to say at once. Really.",
        "",
    )
    assert first_chunk("x" * 200) == ("x" * 200, "")  # no gap: whole (split_text cuts it later)


@pytest.mark.parametrize(
    ("stream_format", "response_format", "short"),
    [
        ("sse", "pcm", True),
        ("sse", "mp3", True),
        ("audio", "pcm", True),  # played as it arrives, as OpenAI's streaming example does
        ("audio", "mp3", False),  # a file: the throughput-friendly chunks
        ("audio", "wav", False),
        ("audio", "opus", False),
    ],
)
def test_what_is_played_as_it_comes_starts_short(
    stream_format: str, response_format: str, short: bool
) -> None:
    assert starts_short(stream_format, response_format) is short


def test_a_lead_chunk_is_about_its_length_at_the_best_gap_near_it() -> None:
    text = EN * 6
    total = estimate_s(text)
    head, rest = lead_chunk(text, 5.0, total)
    assert squash(head + rest) == squash(text)
    assert 5.0 * 0.75 <= estimate_s(head) <= 5.0 * 1.25  # within the window of its aim
    assert head.endswith((".", ";", ","))  # the strongest gap near its aim, not a word's
    sentences = "One two three four five six seven. " * 40  # sentence ends ~2.4 s apart
    head, _ = lead_chunk(sentences, 5.0, estimate_s(sentences))
    assert head.endswith(".") and head.count(".") == 2  # the sentence end nearest 5 s
    short = "A text of a few seconds. It stays whole."
    assert lead_chunk(short, 5.0, estimate_s(short)) == (short, "")
    assert lead_chunk("x" * 300, 5.0, estimate_s("x" * 300)) == ("x" * 300, "")  # no gap


@settings(max_examples=100, deadline=None)
@given(
    st.text(
        alphabet=st.characters(codec="utf-8", categories=("L", "M", "N", "P", "Z", "S")),
        min_size=1,
        max_size=600,
    ),
    st.floats(min_value=2.0, max_value=30.0),
)
def test_a_lead_chunk_loses_nothing(text: str, lead_s: float) -> None:
    head, rest = lead_chunk(text, lead_s, estimate_s(text))
    assert squash(head + rest) == squash(text)
    assert head or not text.strip()
