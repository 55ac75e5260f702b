"""supervisor/speech/text/segmenter.py: text that arrives in pieces, cut where a sentence surely ends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from supervisor.speech.text.segmenter import Segmenter


def test_a_sentence_is_cut_once_its_end_is_sure() -> None:
    cut = Segmenter(300)
    assert cut.feed("Hello the") == []
    assert cut.feed("re. How are") == ["Hello there."]
    assert cut.feed(" you? Mr. Smith is 3.") == ["How are you?"]  # "3." may go on: "3.14"
    assert cut.feed("14 metres tall. Yes") == ["Mr. Smith is 3.14 metres tall."]
    assert cut.feed("!") == ["Yes!"]  # no number ends with "!"
    assert cut.feed("你好。再见") == ["你好。"]
    assert cut.flush() == ["再见"] and cut.flush() == []


def test_a_run_without_an_end_is_cut_at_its_bound() -> None:
    cut = Segmenter(40)
    run = "one two three, four five six seven eight nine ten eleven twelve"
    out = cut.feed(run)
    assert out[0] == "one two three," and all(len(s) <= 40 for s in out + cut.flush())
    giant = Segmenter(10)
    assert giant.feed("x" * 25) == ["x" * 10, "x" * 10]
    assert giant.flush() == ["x" * 5]


@given(st.lists(st.text(alphabet="ab .,!?\n", max_size=30), max_size=20), st.integers(5, 60))
def test_every_character_but_spaces_comes_out_once_in_order(pieces: list[str], bound: int) -> None:
    cut = Segmenter(bound)
    out = [s for piece in pieces for s in cut.feed(piece)] + cut.flush()
    assert "".join(out).replace(" ", "").replace("\n", "") == "".join(pieces).replace(
        " ", ""
    ).replace("\n", "")
    assert all(s == s.strip() and s for s in out)
