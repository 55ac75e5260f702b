"""Every malformed value of every field, on every HTTP route that takes a body, is a 4xx naming
its `param`, never a 500 (issue 48).

test_api_fuzz.py generates requests from the OpenAPI document, whose types it keeps to; here each
request is a valid one with one field (of our names or another system's, or one the route does
not know) set to what a hostile client sends: nested lists and objects, lone surrogates, JSON
nested thousands deep, numbers past any float or past Python's 4,300-digit int parsing,
NaN and Infinity (which Python's JSON reader takes), strings where numbers go and the other way
round. Forms get the same as text, as bytes that are not UTF-8, and as a file where text goes.
One live server on the null engine answers them all; derandomized and bounded, so every run
sends the same few hundred requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.http.routes.one_shot import CLONE_FIELDS, DESIGN_FIELDS
from supervisor.http.routes.voices import VOICE_FIELDS
from supervisor.jobs import body as job_body
from supervisor.speech.checks import word_timestamps
from supervisor.speech.request import aliases, schemas
from supervisor.speech.stores import lexicons
from tests.helpers.live_server import AUTH, LiveServer, live, tone_wav

EXAMPLES = 150  # per route and kind: about 2,500 requests with the catalogue, in seconds
TEXT = "Mind the gap."
SPEECH = sorted(schemas.SPEECH_FIELDS | set(aliases.ALIASES) | {"request_timeout_s", "nope"})
ITEM = sorted({*SPEECH, *word_timestamps.ITEM_FIELDS, "id"})


_CLIENT = httpx.Client(timeout=30)  # one pool of connections: thousands of requests


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    flags = ("--max-upload-mb", "0.25", "--max-input-chars", "300", "--max-request-audio-s", "60")
    with _CLIENT, live(tmp_path_factory.mktemp("fuzz-fields"), *flags) as running:
        yield running


def _text() -> st.SearchStrategy[str]:
    surrogates = st.characters(categories=["Cs"])  # lone halves of a pair: not encodable
    return st.text(st.one_of(st.characters(), surrogates), max_size=12)


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**400, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    _text(),
    st.sampled_from(["", " ", "1e999", "NaN", "-0", "word", "segment", "wav", "sse", "x" * 5000]),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text(), inner, max_size=3),
    max_leaves=6,
)


def raw_json(value: Any) -> str:
    """A value as JSON text, surrogates escaped (so they reach the server as lone halves)."""
    return json.dumps(value, allow_nan=True)


# JSON text no value of Python's json.dumps gives: nesting deeper than its recursion, and a
# number with more digits than int() takes from text.
RAW = st.one_of(
    VALUES.map(raw_json),
    st.integers(100, 20_000).map(lambda n: "[" * n + "]" * n),
    st.integers(100, 20_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from(["9" * 5000, "-" + "1" * 4301, "1e99999", "-1e-99999", "0.0e+999999999"]),
)


# Every field of every route gets each of these too (the random search may miss a field).
CATALOG = [
    '[["word"]]',
    '[{"a": 1}]',
    '{"a": []}',
    "[null]",
    '"\\ud800"',
    '["\\udfff"]',
    '{"\\ud800": 1}',
    "9" * 5000,
    "1e99999",
    "NaN",
    "-Infinity",
    "true",
    "[]",
    "{}",
    '""',
    "[" * 5000 + "]" * 5000,
    str(2**63),
    "-0.0",
]


def with_field(base: dict[str, Any], name: str, raw: str) -> str:
    """The JSON text of `base` with `name` set to the raw JSON text `raw`."""
    rest = json.dumps({k: v for k, v in base.items() if k != name})
    return rest[:-1] + (", " if len(rest) > 2 else "") + f"{json.dumps(name)}: {raw}}}"


def assert_refused_by_name(answer: httpx.Response, sent: str, server: LiveServer) -> None:
    """Not a 5xx; a 400 names the field it refused, unless the body as a whole is refused
    (JSON nested deeper than the parser goes: no field of it can be read)."""
    if answer.status_code >= 500:
        tail = server.log.read_text()[-4000:]
        raise AssertionError(f"{answer.status_code} {answer.text} for {sent[:300]}\n{tail}")
    if answer.status_code == 400:
        error = answer.json()["error"]
        whole = error["message"].endswith("it is nested too deeply.")
        assert error["param"] or whole, (error, sent[:300])


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=True,
)


def post_json(server: LiveServer, path: str, text: str, method: str = "POST") -> httpx.Response:
    headers = {**AUTH, "Content-Type": "application/json"}
    return _CLIENT.request(method, server.url + path, content=text.encode(), headers=headers)


@pytest.mark.parametrize(
    ("path", "fields", "base"),
    [
        ("/v1/audio/speech", SPEECH, {"input": TEXT, "response_format": "wav"}),
        (
            "/v1/audio/speech/captioned",
            [*SPEECH, "timestamp_granularities"],
            {"input": TEXT, "response_format": "wav"},
        ),
        (
            "/v1/audio/design",
            sorted(DESIGN_FIELDS | {"nope"}),
            {"input": TEXT, "instructions": "female"},
        ),
    ],
)
def test_a_malformed_speech_field_is_a_4xx_naming_it(
    server: LiveServer, path: str, fields: list[str], base: dict[str, Any]
) -> None:
    @FUZZ
    @given(name=st.sampled_from(fields), raw=RAW)
    def check(name: str, raw: str) -> None:
        sent = with_field(base, name, raw)
        assert_refused_by_name(post_json(server, path, sent), sent, server)

    check()


@pytest.mark.parametrize(
    ("method", "path", "fields", "base"),
    [
        ("POST", "/v1/audio/speech", SPEECH, {"input": TEXT, "response_format": "wav"}),
        (
            "POST",
            "/v1/audio/speech/captioned",
            [*SPEECH, "timestamp_granularities"],
            {"input": TEXT, "response_format": "wav"},
        ),
        (
            "POST",
            "/v1/audio/design",
            sorted(DESIGN_FIELDS),
            {"input": TEXT, "instructions": "male"},
        ),
        (
            "PUT",
            "/v1/audio/lexicons/fuzzed",
            sorted(lexicons.FIELDS),
            {"language": "en", "entries": {}},
        ),
        ("POST", "/v1/jobs", ITEM, {"id": "a", "input": TEXT, "captions": True}),
    ],
)
def test_every_field_refuses_each_catalogued_value_by_name(
    server: LiveServer, method: str, path: str, fields: list[str], base: dict[str, Any]
) -> None:
    for name in fields:
        for raw in CATALOG:
            sent = with_field(base, name, raw)
            if path == "/v1/jobs":
                sent = '{"items": [' + sent + "]}"
            answer = post_json(server, path, sent, method)
            assert_refused_by_name(answer, sent, server)
            if answer.status_code == 202:
                server.request("DELETE", f"/v1/jobs/{answer.json()['id']}")


def test_a_malformed_job_item_field_or_job_field_is_a_4xx_naming_it(server: LiveServer) -> None:
    item = {"id": "a", "input": TEXT, "response_format": "wav", "captions": True}

    @FUZZ
    @given(
        name=st.sampled_from(ITEM + [f"job:{f}" for f in sorted(job_body.FIELDS)]),
        raw=RAW,
    )
    def check(name: str, raw: str) -> None:
        if name.startswith("job:"):
            sent = with_field({"items": [item]}, name[4:], raw)
        else:
            sent = '{"items": [' + with_field(item, name, raw) + "]}"
        answer = post_json(server, "/v1/jobs", sent)
        assert_refused_by_name(answer, sent, server)
        if answer.status_code == 202:  # taken: nothing of it stays queued for the next example
            server.request("DELETE", f"/v1/jobs/{answer.json()['id']}")

    check()


def test_a_malformed_lexicon_field_is_a_4xx_naming_it(server: LiveServer) -> None:
    base = {"language": "en", "entries": {"SQL": "sequel"}}

    @FUZZ
    @given(name=st.sampled_from(sorted(lexicons.FIELDS | {"nope"})), raw=RAW)
    def check(name: str, raw: str) -> None:
        sent = with_field(base, name, raw)
        assert_refused_by_name(
            post_json(server, "/v1/audio/lexicons/fuzzed", sent, "PUT"), sent, server
        )

    check()


# A form field's value: text (lone surrogates sent as the bytes Python would write for them,
# which are not UTF-8), raw bytes, or a file where text goes.
FORM_VALUES = st.one_of(
    _text().map(lambda s: ("text", s.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=16).map(lambda b: ("text", b)),
    st.sampled_from([b"1e999", b"NaN", b"-1", b"9" * 5000, b"true", b"[]", b"{}"]).map(
        lambda b: ("text", b)
    ),
    st.binary(max_size=64).map(lambda b: ("file", b)),
)


CLIP_FIELD = {"/v1/audio/clone": "file", "/v1/audio/voices": "audio_sample"}


def form_parts(path: str, base: dict[str, bytes], name: str, value: tuple[str, bytes]) -> list[Any]:
    """The route's valid form (`base`, and the reference clip where it takes one) with field
    `name` set to `value`."""
    kind, data = value
    parts: list[Any] = [(k, (None, v)) for k, v in base.items() if k != name]
    clip = CLIP_FIELD.get(path)
    if clip is not None and name != clip:
        parts.append((clip, ("ref.wav", tone_wav(1.0), "audio/wav")))
    parts.append(
        (name, ("x.bin", data, "application/octet-stream") if kind == "file" else (None, data))
    )
    return parts


@pytest.mark.parametrize(
    ("path", "fields", "base"),
    [
        ("/v1/audio/clone", sorted(CLONE_FIELDS | {"nope"}), {"input": b"Hi.", "transcript": b"A"}),
        ("/v1/audio/voices", sorted(VOICE_FIELDS | {"nope"}), {"name": b"v", "transcript": b"A"}),
        ("/v1/audio/design", sorted(DESIGN_FIELDS), {"input": b"Hi.", "instructions": b"male"}),
    ],
)
def test_a_malformed_form_field_is_a_4xx_naming_it(
    server: LiveServer, path: str, fields: list[str], base: dict[str, bytes]
) -> None:
    @FUZZ
    @given(name=st.sampled_from(fields), value=FORM_VALUES)
    def check(name: str, value: tuple[str, bytes]) -> None:
        parts = form_parts(path, base, name, value)
        answer = _CLIENT.post(server.url + path, files=parts, headers=AUTH)
        assert_refused_by_name(answer, f"{name}={value!r}", server)
        if path == "/v1/audio/voices" and answer.status_code == 201:
            server.request("DELETE", f"/v1/audio/voices/{answer.json()['id']}")

    check()


def test_the_fuzzer_reaches_the_checks(server: LiveServer) -> None:
    """The bases are valid, so that each refusal is the fuzzed field's, not the base's."""
    assert post_json(server, "/v1/audio/speech", json.dumps({"input": TEXT})).status_code == 200
    item = {"id": "a", "input": TEXT, "captions": True}
    job = post_json(server, "/v1/jobs", json.dumps({"items": [item]}))
    assert job.status_code == 202, job.text
    server.request("DELETE", f"/v1/jobs/{job.json()['id']}")
    lexicon = json.dumps({"language": "en", "entries": {"SQL": "sequel"}})
    assert post_json(server, "/v1/audio/lexicons/fuzzed", lexicon, "PUT").status_code in (200, 201)
    for path, base in [
        ("/v1/audio/clone", {"input": b"Hi.", "transcript": b"A"}),
        ("/v1/audio/voices", {"name": b"base", "transcript": b"A"}),
        ("/v1/audio/design", {"input": b"Hi.", "instructions": b"male"}),
    ]:
        parts = form_parts(path, base, "input" if "input" in base else "name", ("text", b"ab"))
        answer = _CLIENT.post(server.url + path, files=parts, headers=AUTH)
        assert answer.status_code in (200, 201), (path, answer.text)
