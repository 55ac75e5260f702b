"""Long-form text features over HTTP, against a live server on the tiny checkpoint: SSML
breaks as real silence in the returned samples, voices named in the text, lexicons, captions
(their boundaries checked against the samples, the files read by real subtitle parsers, synth
writing them), and the 400s."""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import srt
import webvtt

from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor.speech.request.schemas import MAX_SEED, OPENAI_VOICES, default_seed
from tests.helpers.job_helpers import ended, run_synth, submit, wait_job
from tests.helpers.live_server import KEY, LiveServer, live, tone_wav

RATE = 24000


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        # At debug level the log shows each item sent to the sidecar (supervisor/supervision/session.py).
        folder = tmp_path_factory.mktemp("text")
        with live(folder, "--log-level", "debug", checkpoint=checkpoint_dir) as running:
            yield running


def speech(server: LiveServer, **fields: Any) -> httpx.Response:
    """A pcm answer, seed 5 unless given (None: not sent)."""
    body = {
        key: v
        for key, v in {"response_format": "pcm", "seed": 5, **fields}.items()
        if v is not None
    }
    return httpx.post(
        server.url + "/v1/audio/speech",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=300,
    )


def longest_silence_s(pcm: bytes) -> float:
    """The longest run of exactly zero samples, in seconds."""
    samples = np.frombuffer(pcm, dtype="<i2")
    edges = np.diff(np.concatenate(([0], (samples == 0).astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return float((ends - starts).max(initial=0)) / RATE


def test_a_break_is_that_much_silence_in_the_audio(server: LiveServer) -> None:
    plain = speech(server, input="<speak>One two three. Four five six.</speak>")
    broken = speech(
        server, input='<speak>One two three.<break time="1500ms"/>Four five six.</speak>'
    )
    assert plain.status_code == broken.status_code == 200
    assert broken.headers["X-Chunks"] == "2"
    assert longest_silence_s(plain.content) < 1.5 <= longest_silence_s(broken.content)


def items_sent(server: LiveServer, **fields: Any) -> list[dict[str, Any]]:
    """Speak, and return the items the sidecar was sent for it, in order, as the server's debug
    log shows them (supervisor/supervision/session.py): what the model read, with its seed and voice."""
    mark = server.log.stat().st_size
    answer = speech(server, **fields)
    assert answer.status_code == 200 and answer.content, answer.text
    with server.log.open("rb") as log:
        log.seek(mark)
        lines = log.read().decode().splitlines()
    found = [re.search(r": batch \d+ item (\{.*\})$", line) for line in lines]
    # First attempts only: a chunk the quality checks send again is "<id>-<n>.<attempt>".
    items = [item for m in found if m and "." not in (item := json.loads(m.group(1)))["id"]]
    assert len(items) == int(answer.headers["X-Chunks"]), lines
    return sorted(items, key=lambda item: int(item["id"].rsplit("-", 1)[1]))


def texts_sent(server: LiveServer, **fields: Any) -> list[str]:
    return [item["text"] for item in items_sent(server, **fields)]


# What the model reads for each feature, on the tiny checkpoint.
READS = [
    (
        {"input": "It costs €1 and 3.5 kg.", "language": "en", "normalize": True},
        ["It costs one euro and three point five kilograms."],
    ),
    (
        {"input": "Der 2. Platz kostet 1 €.", "language": "de", "normalize": True},
        ["Der zweite Platz kostet ein Euro."],
    ),
    (
        {"input": "Le 05/03/2024 à 1:00.", "language": "fr", "normalize": True},
        ["Le cinq mars deux mille vingt-quatre à une heure."],
    ),
    (
        {"input": "El 2024-03-05 cuesta $3.", "language": "es", "normalize": True},
        ["El cinco de marzo de dos mil veinticuatro cuesta tres dólares."],
    ),
    (
        {"input": "共有1234人，增长了50%。", "language": "zh", "normalize": True},
        ["共有一千二百三十四人，增长了百分之五十。"],
    ),
    ({"input": "It costs €1 and 3.5 kg.", "language": "en"}, ["It costs €1 and 3.5 kg."]),
    (
        {"input": '<speak>The <sub alias="World Wide Web">WWW</sub> is big.</speak>'},
        ["The World Wide Web is big."],
    ),
    (
        {"input": '<speak>Call <say-as interpret-as="characters">IBM</say-as> now.</speak>'},
        ["Call I B M now."],
    ),
    (
        {"input": '<speak>Take <say-as interpret-as="cardinal">42</say-as>.</speak>'},
        ["Take forty-two."],
    ),
    (
        {"input": '<speak>The <say-as interpret-as="ordinal">3</say-as> one.</speak>'},
        ["The third one."],
    ),
    (
        {"input": '<speak>On <say-as interpret-as="date">2024-03-05</say-as>.</speak>'},
        ["On March fifth, twenty twenty-four."],
    ),
    (
        {"input": '<speak>Dial <say-as interpret-as="telephone">+1 555 0100</say-as>.</speak>'},
        ["Dial plus one, five five five, zero one zero zero."],
    ),
    ({"input": '<speak>One.<break time="500ms"/>Two.</speak>'}, ["One.", "Two."]),
]


@pytest.mark.parametrize(("fields", "read"), READS)
def test_the_model_reads_what_each_feature_makes_of_the_text(
    server: LiveServer, fields: dict[str, Any], read: list[str]
) -> None:
    assert texts_sent(server, **fields) == read


def test_ssml_spans_reach_the_model_in_their_speed_voice_and_language(
    server: LiveServer,
) -> None:
    document = (
        '<speak>Plain. <prosody rate="150%">Quickly now.</prosody> <voice name="onyx">Deep.'
        '</voice> <lang xml:lang="de">Guten Tag.</lang></speak>'
    )
    plain, quick, deep, german = items_sent(server, input=document, language="en", speed=0.8)
    assert (plain["text"], plain["speed"], plain["language"]) == ("Plain.", 0.8, "en")
    assert (quick["text"], quick["speed"]) == ("Quickly now.", pytest.approx(1.2))
    assert (deep["text"], deep["instruct"]) == ("Deep.", OPENAI_VOICES["onyx"])
    assert "instruct" not in plain and (german["text"], german["language"]) == ("Guten Tag.", "de")
    [french] = items_sent(server, input='<speak xml:lang="fr">Bonjour.</speak>')
    assert (french["text"], french["language"]) == ("Bonjour.", "fr")


def test_a_lexicon_is_applied_before_normalisation_on_the_model(server: LiveServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    body = {"language": "en", "entries": {"Dr.": "Drive"}}
    url = server.url + "/v1/audio/lexicons/streets"
    assert httpx.put(url, json=body, headers=auth).status_code == 201
    try:
        text = {"input": "Dr. Lee lives at 12 Dr. Way.", "language": "en", "normalize": True}
        assert texts_sent(server, **text, lexicon="streets") == [
            "Drive Lee lives at twelve Drive Way."
        ]
        assert texts_sent(server, **text) == ["Doctor Lee lives at twelve Doctor Way."]
    finally:
        httpx.delete(url, headers=auth)


def test_voices_named_in_the_text_are_used_and_unknown_ones_refused(server: LiveServer) -> None:
    answer = speech(server, input='<speak>Hello. <voice name="alloy">Hi there.</voice></speak>')
    assert (
        answer.status_code == 200 and answer.headers["X-Chunks"] == "2" and len(answer.content) > 0
    )
    refused = speech(server, input='<speak>Hello. <voice name="nobody">Hi.</voice></speak>')
    error = refused.json()["error"]
    assert (
        refused.status_code == 400
        and error["param"] == "input"
        and "'nobody' not found" in error["message"]
    )


def test_bad_markup_is_a_400_naming_the_element(server: LiveServer) -> None:
    refused = speech(server, input="<speak>Hello <audio src='x.wav'/></speak>")
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": "SSML: element <audio> is not supported; use <speak>, <break>, <sub>, <say-as>, <prosody>, "
        "<voice>, <lang>",
        "type": "invalid_request_error",
        "param": "input",
        "code": "invalid_ssml",
    }


def test_lexicons_are_saved_listed_used_and_deleted(server: LiveServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    url = server.url + "/v1/audio/lexicons"
    body = {"language": "en", "entries": {"SQL": "sequel"}}
    created = httpx.put(url + "/brands", json=body, headers=auth)
    assert created.status_code == 201 and created.json()["entries"] == {"SQL": "sequel"}
    assert httpx.put(url + "/brands", json=body, headers=auth).status_code == 200  # replaced
    assert [x["name"] for x in httpx.get(url, headers=auth).json()["data"]] == ["brands"]
    assert httpx.get(url + "/brands", headers=auth).json()["language"] == "en"
    assert speech(server, input="SQL rocks.", lexicon="brands").status_code == 200
    jobs = httpx.post(
        server.url + "/v1/jobs", json={"items": [{"input": "x", "lexicon": "nope"}]}, headers=auth
    )
    assert jobs.status_code == 400 and jobs.json()["error"]["code"] == "lexicon_not_found"
    assert httpx.delete(url + "/brands", headers=auth).json()["deleted"] is True
    refused = speech(server, input="SQL rocks.", lexicon="brands")
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "lexicon"
    assert httpx.get(url + "/brands", headers=auth).status_code == 404
    huge = {"language": "en", "entries": {f"w{i}": "x" * 190 for i in range(30_000)}}
    assert httpx.put(url + "/huge", json=huge, headers=auth).status_code == 413


TWENTY = " ".join(
    f"Sentence number {word} is here."
    for word in [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ]
)
EDGE_S = (
    0.08  # every chunk begins and ends with 0.1 s of zero samples: so much either side of a cut
)


def assert_cut_at_chunk_boundaries(samples: np.ndarray, bounds: list[tuple[float, float]]) -> None:
    """Each caption starts where the one before ends, at a run of silence between two chunks,
    and holds sound of its own."""
    assert bounds[0][0] == 0.0 and abs(bounds[-1][1] - len(samples) / RATE) <= 0.001
    for (_, end), (start, _) in itertools.pairwise(bounds):
        assert start == end
        cut = round(end * RATE)
        assert not samples[cut - round(EDGE_S * RATE) : cut + round(EDGE_S * RATE)].any(), (
            f"sound at the cut {end}"
        )
    for start, end in bounds:
        assert samples[round(start * RATE) : round(end * RATE)].any()


def test_captioned_speech_times_every_sentence_at_its_chunk(server: LiveServer) -> None:
    answer = httpx.post(
        server.url + "/v1/audio/speech/captioned",
        json={"input": TWENTY, "response_format": "pcm", "seed": 2},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=600,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["format"] == "pcm" and body["sample_rate"] == RATE
    segments = body["segments"]
    assert [s["text"] for s in segments] == [f"{s}." for s in TWENTY.split(". ")[:-1]] + [
        TWENTY.split(". ")[-1]
    ]
    samples = np.frombuffer(base64.b64decode(body["audio"]), dtype="<i2")
    assert_cut_at_chunk_boundaries(samples, [(s["start"], s["end"]) for s in segments])


@pytest.mark.parametrize(
    ("granularities", "status", "code"),
    [
        (["segment"], 200, None),
        (["segment", "word"], 400, "word_timestamps_unavailable"),
        (["word"], 400, "word_timestamps_unavailable"),
        ([], 400, "invalid_request"),
        ("segment", 400, "invalid_request"),
        (["sentence"], 400, "invalid_request"),
    ],
)
def test_word_timestamps_are_a_400_without_an_asr_model(
    server: LiveServer, granularities: Any, status: int, code: str | None
) -> None:
    body = {
        "input": "One. Two.",
        "response_format": "wav",
        "timestamp_granularities": granularities,
    }
    answer = httpx.post(
        server.url + "/v1/audio/speech/captioned",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=300,
    )
    assert answer.status_code == status, answer.text
    if code is None:
        assert [s["text"] for s in answer.json()["segments"]] == ["One.", "Two."]
        assert "words" not in answer.json()["segments"][0]
    else:
        assert answer.json()["error"]["param"] == "timestamp_granularities"
        assert answer.json()["error"]["code"] == code


def test_captioned_speech_takes_the_delivery_fields_and_says_its_quality(
    server: LiveServer,
) -> None:
    body = {
        "input": "One. Two.",
        "response_format": "wav",
        "sample_rate": 8000,
        "loudness": "podcast",
        "seed": 3,
    }
    answer = httpx.post(
        server.url + "/v1/audio/speech/captioned",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=300,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-OmniVoice-QA"].startswith(("passed; attempts=", "failed; attempts="))
    got = answer.json()
    with wave.open(io.BytesIO(base64.b64decode(got["audio"]))) as wav:
        assert wav.getframerate() == got["sample_rate"] == 8000
        seconds = wav.getnframes() / 8000
    assert abs(seconds - got["segments"][-1]["end"]) < 0.01  # the times hold at any rate


def test_a_job_item_with_captions_has_srt_and_vtt_that_parse_and_line_up(
    server: LiveServer, tmp_path: Path
) -> None:
    item = {"id": "read", "input": TWENTY, "response_format": "wav", "seed": 2, "captions": True}
    job = submit(server, [item, {"input": "No captions here.", "response_format": "wav"}])
    done = wait_job(server, job["id"], ended, 600, "the job to end")
    assert done["state"] == "completed", done
    base = f"/v1/jobs/{job['id']}/items"
    with wave.open(io.BytesIO(server.request("GET", f"{base}/0/audio").content)) as wav:
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    subrip = server.request("GET", f"{base}/0/captions.srt")
    web = server.request("GET", f"{base}/0/captions.vtt")
    assert subrip.headers["content-type"].startswith("application/x-subrip")
    assert web.headers["content-type"].startswith("text/vtt")
    cues = list(srt.parse(subrip.text))
    assert len(cues) == 20 and cues[0].content == "Sentence number one is here."
    # SRT and VTT keep milliseconds: each cut is within half a millisecond of the chunk boundary.
    bounds = [
        (round(c.start.total_seconds() * RATE) / RATE, round(c.end.total_seconds() * RATE) / RATE)
        for c in cues
    ]
    assert_cut_at_chunk_boundaries(samples, bounds)
    captions = webvtt.from_buffer(io.StringIO(web.text)).captions
    assert [(c.start_in_seconds + c.start_time.milliseconds / 1000, c.text) for c in captions] == [
        (c.start.total_seconds(), c.content) for c in cues
    ]
    missing = server.request("GET", f"{base}/1/captions.srt")
    assert missing.status_code == 404 and "captions" in missing.json()["error"]["message"]
    refused = server.request(
        "POST", "/v1/jobs", json={"items": [{"input": "x", "captions": "yes"}]}
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"].endswith("captions")


def test_an_idempotency_key_tells_a_job_with_captions_from_one_without(
    server: LiveServer,
) -> None:
    items = [{"input": "Captioned once.", "response_format": "wav", "captions": True}]
    first = submit(server, items, key="captions-differ")
    plain = [{"input": "Captioned once.", "response_format": "wav"}]
    other = server.request(
        "POST", "/v1/jobs", json={"items": plain}, headers={"Idempotency-Key": "captions-differ"}
    )
    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    wait_job(server, first["id"], ended, 300, "the job to end")


def test_synth_writes_captions_beside_the_audio(server: LiveServer, tmp_path: Path) -> None:
    manifest = tmp_path / "script.jsonl"
    manifest.write_text(
        '{"id": "intro", "input": "One sentence. And another.", "response_format": "wav", "captions": true}\n'
    )
    done = run_synth(
        str(manifest), "--out", str(tmp_path / "out"), "--server", server.url, "--api-key", KEY
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c.content for c in srt.parse((tmp_path / "out" / "intro.srt").read_text())] == [
        "One sentence.",
        "And another.",
    ]
    assert len(webvtt.read(str(tmp_path / "out" / "intro.vtt")).captions) == 2
    assert (tmp_path / "out" / "intro.wav").is_file()


def test_a_two_voice_dialogue_is_one_file_with_the_pause_asked_for(server: LiveServer) -> None:
    script = "[alloy] Good morning, how are you?\n[onyx] Very well, thank you."
    answer = speech(server, input=script, dialogue=True, pause_ms=1200)
    assert answer.status_code == 200 and answer.headers["X-Chunks"] == "2"
    assert (
        1.2 <= longest_silence_s(answer.content) < 1.2 + 0.3
    )  # the pause and the chunks' silent edges
    refused = speech(server, input="Hello.\n[alloy] Hi.", dialogue=True)
    assert (
        refused.status_code == 400 and "line 1 has no speaker" in refused.json()["error"]["message"]
    )


def test_dialogue_turns_reach_the_model_in_the_voices_named(server: LiveServer) -> None:
    """Each turn is an item with its text, and the design (OpenAI voice) or the saved prompt of
    the voice named, seeded from that voice's seed at the turn's chunk index."""
    created = httpx.post(
        server.url + "/v1/audio/voices",
        headers={"Authorization": f"Bearer {KEY}"},
        data={
            "name": "dialogue-narrator",
            "consent": "cons_local",
            "transcript": "A steady tone for two seconds.",
        },
        files={"audio_sample": ("ref.wav", tone_wav(2.0), "audio/wav")},
        timeout=300,
    )
    assert created.status_code == 201, created.text
    script = "[alloy] Good morning.\n[dialogue-narrator] They met.\n[onyx] Hello."
    alloy, narrator, onyx = items_sent(server, input=script, dialogue=True, pause_ms=400, seed=None)
    assert [alloy["text"], narrator["text"], onyx["text"]] == [
        "Good morning.",
        "They met.",
        "Hello.",
    ]
    assert (alloy["instruct"], alloy["seed"]) == (OPENAI_VOICES["alloy"], default_seed("alloy"))
    assert (onyx["instruct"], onyx["seed"]) == (
        OPENAI_VOICES["onyx"],
        (default_seed("onyx") + 2 * CHUNK_SEED_STRIDE) % (MAX_SEED + 1),
    )
    assert (
        narrator["prompt_text"] == "A steady tone for two seconds." and "instruct" not in narrator
    )
    assert "prompt_text" not in alloy and "prompt_text" not in onyx
