"""The web console, driven in a real headless browser against a real server on the tiny checkpoint.

Debian's chromium through Playwright (no browser download). Every test fails on a JavaScript
error or a console error, and on any request to a host but the server's own. With
OMNIVOICE_CONSOLE_SCREENSHOTS=DIR each view is also saved as DIR/<view>.png (the screenshots in
docs/console/ were made that way).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.helpers.live_server import KEY, LiveServer, live, tone_wav

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in the test extra"
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # a fake microphone (a beeping tone) that needs no permission prompt: the recorder
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]
WAIT_MS = 120_000  # generous: a CPU sidecar on a busy 2-core machine
SCREENSHOTS = os.environ.get("OMNIVOICE_CONSOLE_SCREENSHOTS")
AUDIO_HAS_DURATION = (  # an audio element that has loaded enough to know its length
    "id => { const a = document.getElementById(id);"
    " return a.duration > 0 && isFinite(a.duration); }"
)


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # --chunk-s 2: the page's longer text becomes several chunks, so playback is streamed
    with live(
        tmp_path_factory.mktemp("console"),
        "--chunk-s",
        "2",
        checkpoint=checkpoint_dir,
        faults=True,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)"
        )
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Watched:
    """A page whose console errors, page errors and requests are recorded for the checks."""

    def __init__(self, page: Any, server: LiveServer) -> None:
        self.page, self.server = page, server
        self.errors: list[str] = []
        self.allowed_errors: list[str] = []  # substrings of console errors a test expects
        self.requests: list[str] = []
        page.on(
            "console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None
        )
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("request", lambda request: self.requests.append(request.url))
        page.set_default_timeout(WAIT_MS)

    def open(self, key: str | None = KEY) -> None:
        self.page.goto(self.server.url + "/")
        if key is not None:
            self.page.fill("#auth-key", key)
            self.page.click("#auth-form button")
            self.page.wait_for_selector("#views:not([hidden])")

    def view(self, name: str) -> None:
        self.page.click(f"nav button[data-view={name}]")
        self.page.wait_for_selector(f"#view-{name}:not([hidden])")

    def screenshot(self, name: str) -> None:
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)

    def check(self) -> None:
        unexpected = [
            e for e in self.errors if not any(allowed in e for allowed in self.allowed_errors)
        ]
        assert not unexpected, f"console errors: {unexpected}"
        own = urlsplit(self.server.url).netloc
        elsewhere = [
            u
            for u in self.requests
            if urlsplit(u).scheme not in ("blob", "data") and urlsplit(u).netloc != own
        ]
        assert not elsewhere, f"requests to other hosts: {elsewhere}"
        assert self.requests, "the page made no request at all"


@pytest.fixture
def console(browser: Any, server: LiveServer) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    watched = Watched(context.new_page(), server)
    try:
        yield watched
        watched.check()
    finally:
        context.close()


def test_the_page_needs_no_key_and_every_data_call_does(server: LiveServer) -> None:
    for path in ("/", "/console"):
        page = server.request("GET", path, auth=False)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'src="/console/console.js"' in page.text
    script = server.request("GET", "/console/console.js", auth=False)
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    assert "default-src 'self'" in script.headers["content-security-policy"]
    assert (
        server.request("GET", "/console/console.css", auth=False)
        .headers["content-type"]
        .startswith("text/css")
    )
    missing = server.request("GET", "/console/secrets.txt", auth=False)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    for path in ("/v1/audio/voices", "/v1/jobs", "/metrics"):
        assert server.request("GET", path, auth=False).status_code == 401


def test_without_a_key_the_page_asks_and_a_wrong_key_is_refused(console: Watched) -> None:
    console.allowed_errors.append("status of 401")  # the browser logs the refused call itself
    console.open(key=None)
    page = console.page
    page.wait_for_selector("#auth:not([hidden])")
    assert page.is_hidden("#views")
    page.fill("#auth-key", "sk-wrong")
    page.click("#auth-form button")
    # Issue 37.5: said plainly, not the API's generic "a valid API key is required"
    page.wait_for_function(
        "() => document.getElementById('auth-error').textContent"
        ".startsWith('This key is not accepted by this server.')"
    )
    assert page.is_hidden("#views")
    assert page.evaluate("sessionStorage.length") == 0, "a refused key is not kept"
    assert page.locator("#voices-table tbody tr").count() == 0
    console.screenshot("key")
    page.fill("#auth-key", KEY)
    page.click("#auth-form button")
    page.wait_for_selector("#views:not([hidden])")
    assert page.evaluate(f"sessionStorage.getItem('omnivoice-api-key') === {KEY!r}")


def test_synthesise_stream_and_play(console: Watched) -> None:
    console.open()
    page = console.page
    page.wait_for_selector(
        "#try-voice option[value=alloy], #try-voice option:text('alloy')", state="attached"
    )
    page.fill(
        "#try-input",
        "The ferry to the islands leaves from pier four at noon. "
        "Passengers with bicycles board first, then everyone else, in a calm line.",
    )
    page.select_option("#try-voice", "alloy")
    page.select_option("#try-format", "mp3")
    page.click("#try-speak")
    page.wait_for_function(
        "() => document.getElementById('try-state').textContent.startsWith('done')"
    )
    page.wait_for_function(AUDIO_HAS_DURATION, arg="try-audio")
    chunks = int(page.text_content("#try-state").split("(")[1].split(" ")[0])
    assert chunks >= 2, "the long text was streamed in several chunks"
    seed = page.text_content("#try-seed-used")
    assert seed.isdigit()
    assert page.get_attribute("#try-download", "href").startswith("blob:")
    console.screenshot("try")

    # a designed voice with a seed, as WAV (played whole): the seed used is the one given
    page.fill("#try-input", "Mind the gap.")
    page.select_option("[data-design=gender]", "female")
    page.select_option("[data-design=accent]", "british accent")
    page.select_option("#try-format", "wav")
    page.click("#try-reuse-seed")
    assert page.input_value("#try-seed") == seed
    page.fill("#try-seed", "9007199254740993")  # 2^53 + 1: a JavaScript Number would round it
    page.evaluate("document.getElementById('try-audio').removeAttribute('src')")
    page.click("#try-speak")
    page.wait_for_function(
        "() => document.getElementById('try-seed-used').textContent === '9007199254740993'"
    )
    page.wait_for_function(AUDIO_HAS_DURATION, arg="try-audio")
    assert page.get_attribute("#try-download", "download") == "omnivoice-9007199254740993.wav"

    # save the voice just tried under a name: a designed one keeps its design
    page.fill("#try-save-name", "platform-voice")
    page.click("#try-save")
    page.wait_for_function(
        "() => document.getElementById('try-state').textContent === 'saved as platform-voice'"
    )
    saved = console.server.request("GET", "/v1/audio/voices/platform-voice").json()
    assert saved["type"] == "prompt" and saved["prompt"] == "female, british accent"
    assert page.locator("#try-voice option", has_text="platform-voice").count() == 1
    assert console.server.request("DELETE", "/v1/audio/voices/platform-voice").status_code == 200


def test_the_live_view_speaks_each_sentence_as_it_is_typed(console: Watched) -> None:
    console.open()
    console.view("live")
    page = console.page
    page.type("#live-input", "Good morning. How are you?")  # a key at a time, as a person types
    page.wait_for_function("() => document.querySelectorAll('#live-log li').length >= 2")
    page.type("#live-input", " Fine")
    page.click("#live-done")  # the rest, without a sentence end
    page.wait_for_function("() => document.querySelectorAll('#live-log li').length >= 3")
    page.wait_for_function("() => document.getElementById('live-state').textContent === 'done'")
    log = page.locator("#live-log li").all_text_contents()
    assert [entry.split(":")[0] for entry in log] == ["sentence 1", "sentence 2", "sentence 3"]
    assert all(entry.endswith(" s") and not entry.endswith(" 0.00 s") for entry in log), log
    console.screenshot("live")


def test_the_live_view_lists_a_refused_config_once_as_it_is_typed(console: Watched) -> None:
    # A refused session.config answers each keystroke's text with the same error: the log
    # shows the refusal and the repeat once, counted, not a line per key.
    console.open()
    console.view("live")
    page = console.page
    page.fill("#live-language", "xx")
    page.type("#live-input", "Good morning.")  # a key at a time: 13 refused input.text
    page.wait_for_function(
        "(arg) => document.querySelector('#live-log li:last-child')?.textContent.endsWith(arg)",
        arg=" (13 times)",
    )
    log = page.locator("#live-log li").all_text_contents()
    assert len(log) == 2, log
    assert log[0].startswith("Unknown language 'xx'")
    assert log[1].startswith("nothing is spoken until a valid session.config comes")


def test_the_live_view_plays_the_format_the_session_says(console: Watched) -> None:
    # The page asks for pcm; the session.config is rewritten on its way to ask for wav, as a
    # session another client configured would answer: the page must play what audio.start says.
    def rewrite(route: Any) -> None:
        upstream = route.connect_to_server()

        def from_page(message: str | bytes) -> None:
            if isinstance(message, str) and json.loads(message).get("type") == "session.config":
                message = json.dumps({**json.loads(message), "response_format": "wav"})
            upstream.send(message)

        route.on_message(from_page)

    console.page.route_web_socket(re.compile(r".*/v1/audio/speech/stream$"), rewrite)
    console.open()
    console.view("try")
    tried = console.page.locator("#try-voice option").all_text_contents()
    console.view("live")
    page = console.page
    page.wait_for_function("() => document.querySelectorAll('#live-voice option').length > 1")
    assert page.locator("#live-voice option").all_text_contents() == tried  # one list
    page.select_option("#live-voice", "nova")
    page.type("#live-input", "Good morning.")
    page.click("#live-done")
    page.wait_for_function("() => document.getElementById('live-state').textContent === 'done'")
    [entry] = page.locator("#live-log li").all_text_contents()
    assert entry.startswith("sentence 1: ") and entry.endswith(" KiB of wav"), entry
    # The whole file was decoded and scheduled: its length in seconds, not its bytes as pcm.
    page.wait_for_function("() => live.playAt > 0")
    played = page.evaluate("() => live.playAt")
    assert 0.2 < played < 30


def test_clone_a_reference_and_save_it_as_a_voice(console: Watched, tmp_path: Path) -> None:
    clip = tmp_path / "reference.wav"
    clip.write_bytes(tone_wav(2.0, hz=180.0))
    console.open()
    page = console.page
    page.fill("#try-input", "Welcome aboard.")
    page.select_option("#try-format", "flac")
    page.set_input_files("#try-ref", str(clip))
    page.fill("#try-transcript", "This is my voice.")
    page.click("#try-speak")
    page.wait_for_function(AUDIO_HAS_DURATION, arg="try-audio")
    page.fill("#try-save-name", "cloned-here")
    page.click("#try-save")
    page.wait_for_function(
        "() => document.getElementById('try-state').textContent === 'saved as cloned-here'"
    )
    voice = console.server.request("GET", "/v1/audio/voices/cloned-here").json()
    assert voice["type"] == "audio_sample" and voice["transcript"] == "This is my voice."
    assert console.server.request("DELETE", "/v1/audio/voices/cloned-here").status_code == 200


def test_create_preview_and_delete_a_voice(console: Watched, tmp_path: Path) -> None:
    clip = tmp_path / "reference.wav"
    clip.write_bytes(tone_wav(2.0))
    console.open()
    console.view("voices")
    page = console.page
    page.fill("#voice-name", "harbour-master")
    page.set_input_files("#voice-file", str(clip))
    page.fill("#voice-transcript", "This is my voice, recorded for the harbour.")
    page.click("#voice-form button.primary")
    row = page.locator("tr[data-voice=harbour-master]")
    row.wait_for()
    assert "audio_sample" in row.text_content()
    assert console.server.request("GET", "/v1/audio/voices/harbour-master").status_code == 200
    row.locator("button", has_text="Preview").click()
    page.wait_for_function(AUDIO_HAS_DURATION, arg="voice-preview")
    console.screenshot("voices")
    row.locator("button.delete").click()
    row.wait_for(state="detached")
    assert console.server.request("GET", "/v1/audio/voices/harbour-master").status_code == 404


def test_a_voice_from_a_microphone_recording(console: Watched) -> None:
    console.open()
    console.view("voices")
    page = console.page
    page.click("#voice-form button.record")
    page.wait_for_function(
        "() => document.querySelector('#voice-form button.record').textContent === 'Stop'"
    )
    page.wait_for_timeout(2500)  # the length of the recording, not a bound on anything
    page.click("#voice-form button.record")
    page.wait_for_function("() => document.getElementById('voice-file').files.length === 1")
    assert page.evaluate("document.getElementById('voice-file').files[0].type") == "audio/wav"
    page.fill("#voice-name", "recorded")
    page.fill("#voice-transcript", "A beep from the microphone.")
    page.click("#voice-form button.primary")
    page.locator("tr[data-voice=recorded]").wait_for()
    voice = console.server.request("GET", "/v1/audio/voices/recorded").json()
    assert voice["type"] == "audio_sample" and voice["duration_s"] > 0.5
    assert console.server.request("DELETE", "/v1/audio/voices/recorded").status_code == 200


def test_a_submitted_manifest_is_watched_to_done_and_played(
    console: Watched, tmp_path: Path
) -> None:
    manifest = tmp_path / "night.jsonl"
    manifest.write_text(
        '{"id": "doors", "input": "Please stand clear of the doors.", "response_format": "wav"}\n'
        '{"id": "delay", "input": "The train is delayed.", "voice": "onyx"}\n'
    )
    console.open()
    console.view("jobs")
    page = console.page
    page.set_input_files("#job-file", str(manifest))
    page.click("#job-form button.primary")
    page.wait_for_selector("#job-detail:not([hidden])")
    job_id = page.text_content("#job-id")
    assert page.locator(f"tr[data-job='{job_id}']").count() == 1
    page.wait_for_function("() => document.getElementById('job-state').textContent === 'completed'")
    states = page.locator("#items-table tbody tr td:nth-child(3)").all_text_contents()
    assert states == ["done", "done"]
    page.wait_for_function(
        f"() => document.querySelector(\"tr[data-job='{job_id}'] .state\").textContent"
        " === 'completed'"
    )
    page.locator("#items-table tbody tr").first.locator("button", has_text="Play").click()
    page.wait_for_function(AUDIO_HAS_DURATION, arg="item-audio")
    console.screenshot("jobs")


def test_every_problem_of_a_manifest_is_listed_beside_submit(
    console: Watched, tmp_path: Path
) -> None:
    """Issue 37.5: only the first problem was shown, under the view, far from the button."""
    console.allowed_errors.append("status of 400")  # the browser logs the refused POST itself
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        '{"id": "a", "input": "One line.",\n'  # one object split over two lines: two problems
        '"response_format": "wav"}\n'
        '{"id": "b"}\n'
        '{"id": "b", "input": "Same id."}\n'
    )
    console.open()
    console.view("jobs")
    page = console.page
    jobs_before = console.server.request("GET", "/v1/jobs").json()["data"]
    page.set_input_files("#job-file", str(broken))
    page.click("#job-form button.primary")
    page.wait_for_selector("#job-problems:not([hidden])")
    problems = page.locator("#job-problems li").all_text_contents()
    assert [p.split(":")[0] for p in problems] == ["line 1", "line 2", "line 3", "line 4"], problems
    assert 'no "input" text' in problems[2] and "also the id of line 3" in problems[3]
    # next to the button: inside the form, just under it
    button = page.locator("#job-form button.primary").bounding_box()
    box = page.locator("#job-problems").bounding_box()
    assert 0 <= box["y"] - (button["y"] + button["height"]) < 40, (button, box)
    console.screenshot("manifest-problems")
    # the server's own check, said by the manifest's line number
    refused = tmp_path / "refused.jsonl"
    refused.write_text('{"input": "Fine."}\n\n{"input": "Too fast.", "speed": 9}\n')
    page.set_input_files("#job-file", str(refused))
    page.click("#job-form button.primary")
    page.wait_for_function(
        "() => document.querySelector('#job-problems li')?.textContent.startsWith('line 3: ')"
    )
    assert console.server.request("GET", "/v1/jobs").json()["data"] == jobs_before


def test_the_supervision_view_lists_the_asr_sidecar(
    browser: Any, whisper_dir: Path, tmp_path: Path
) -> None:
    # With --asr-model, /health lists the ASR sidecar under `asr`: the view shows it too.
    with live(tmp_path, "--asr-model", str(whisper_dir)) as server:
        context = browser.new_context(viewport={"width": 1100, "height": 800})
        watched = Watched(context.new_page(), server)
        try:
            watched.open()
            watched.view("supervision")
            row = watched.page.locator("#sidecars-table tr[data-sidecar=asr-cpu0]")
            row.wait_for()
            assert row.locator("td").nth(1).text_content() == "cpu"
            assert watched.page.locator("#sidecars-table tr[data-sidecar=cpu0]").count() == 1
            watched.check()
        finally:
            context.close()


def test_a_sidecar_killed_by_a_fault_comes_back_in_the_supervision_view(console: Watched) -> None:
    console.open()
    console.view("supervision")
    page = console.page
    row = page.locator("#sidecars-table tr[data-sidecar=cpu0]")
    row.wait_for()
    restarts = int(row.locator(".restarts").text_content())
    pid = row.locator(".pid").text_content()
    poison = {"input": "Poison. [[fault:crash]]", "response_format": "wav"}
    crashed = console.server.request("POST", "/v1/audio/speech", json=poison)
    assert (
        crashed.status_code == 500 and crashed.json()["error"]["code"] == "request_crashed_sidecar"
    )
    # the view follows without a reload: the restart, its reason, a new process, ready again
    # (the crash may fire twice: once in a batch, once when the request is retried alone)
    page.wait_for_function(
        "() => Number(document.querySelector('tr[data-sidecar=cpu0] .restarts').textContent)"
        f" > {restarts}"
    )
    page.wait_for_function(
        "() => document.querySelector('tr[data-sidecar=cpu0] .state').textContent === 'ready'"
    )
    assert row.locator(".last-kill").text_content() == "exited"
    assert row.locator(".pid").text_content() not in (pid, "—")
    # the charts follow the server's own counters: speech made now shows as throughput and latency
    for text in ("The tide is turning.", "Boats are coming in.", "The harbour lights are on."):
        assert (
            console.server.request("POST", "/v1/audio/speech", json={"input": text}).status_code
            == 200
        )
    page.wait_for_function(
        "() => state.samples.some((s) => s.throughput > 0)"
        " && state.samples.some((s) => s.latency > 0)"
    )
    # Issue 37.5: a time axis, a label a minute, and samples placed by when they were taken
    for axis in page.locator(".charts .axis").all():
        labels = axis.locator("span").all_text_contents()
        assert labels == ["−5 min", "−4 min", "−3 min", "−2 min", "−1 min", "now"], labels
    assert page.evaluate("state.samples.every((s, i, all) => i === 0 || s.t > all[i - 1].t)")
    if SCREENSHOTS:
        busy_minute(console.server)
    console.screenshot("supervision")


def busy_minute(server: LiveServer) -> None:
    """For the screenshot only: a job in the bulk queue and speech requests for about a minute."""
    items = [
        {"input": f"Announcement number {n}: the harbour closes at dusk.", "response_format": "wav"}
        for n in range(40)
    ]
    job = server.request("POST", "/v1/jobs", json={"items": items}).json()
    for n in range(20):
        server.request(
            "POST", "/v1/audio/speech", json={"input": "Boats are coming in. " * (1 + n % 4)}
        )
        time.sleep(1)  # a request a second: the load the screenshot shows
    server.request("DELETE", f"/v1/jobs/{job['id']}")


def test_a_book_is_made_chapter_by_chapter_and_played_and_downloaded(
    console: Watched, tmp_path: Path
) -> None:
    book = tmp_path / "day.md"
    book.write_text("# Morning\n\nThe boats came in.\n\n# Evening\n\nThe wind turned.\n")
    console.open()
    console.view("books")
    page = console.page
    page.set_input_files("#book-file", str(book))
    page.select_option("#book-format", "mp3")
    page.click("#book-form button.primary")
    page.wait_for_selector("#book-detail:not([hidden])")
    assert page.text_content("#book-title") == "day"
    page.wait_for_function(
        "() => document.getElementById('book-state').textContent === 'completed'"
    )
    titles = page.locator("#chapters-table tbody tr td:nth-child(2)").all_text_contents()
    assert titles == ["Morning", "Evening"]
    page.locator("#chapters-table tbody tr").nth(1).locator("button", has_text="Play").click()
    page.wait_for_function(AUDIO_HAS_DURATION, arg="book-audio")
    with page.expect_download() as downloading:
        page.click("#book-download")
    assert downloading.value.suggested_filename == "day.mp3"
    saved = tmp_path / "saved.mp3"
    downloading.value.save_as(saved)
    assert saved.read_bytes()[:3] == b"ID3"
    console.screenshot("books")


def test_a_shared_voice_offers_delete_only_to_a_key_that_may_delete_it(
    browser: Any, tmp_path: Path
) -> None:
    """Issue 49.5: Delete was shown on a shared voice to a key that may not delete it (a 403).
    The null engine serves: the voices view needs no audio."""
    (tmp_path / "keys").write_text(
        "sk-alice name=alice\nsk-ops name=ops admin\nshared-voices: narrator\n"
    )
    with live(tmp_path, "--api-key-file", str(tmp_path / "keys")) as server:
        for key, name in (("sk-ops", "narrator"), ("sk-alice", "alices")):
            made = server.request(
                "POST",
                "/v1/audio/voices",
                auth=False,
                headers={"Authorization": f"Bearer {key}"},
                data={"name": name, "type": "prompt", "prompt": "male, low pitch"},
            )
            assert made.status_code == 201, made.text
        for key, shared_deletable in (("sk-alice", False), ("sk-ops", True)):
            context = browser.new_context(viewport={"width": 1100, "height": 800})
            watched = Watched(context.new_page(), server)
            try:
                watched.open(key)
                watched.view("voices")
                shared = watched.page.locator("tr[data-voice=narrator]")
                shared.wait_for()
                assert shared.locator("button.delete").count() == int(shared_deletable), key
                own = watched.page.locator("tr[data-voice=alices]")
                assert own.locator("button.delete").count() == 1, key  # hers, or the admin's
                watched.check()
            finally:
                context.close()


def test_a_tenant_key_sees_the_sidecars_without_charts_and_no_error(
    browser: Any, tmp_path: Path
) -> None:
    """The trial of issue 49: /metrics is 403 to a key of the file that is not admin; the page
    polled it every 2 s and showed that refusal as the error under every view, and the
    supervision view drew no sidecar at all. The null engine serves: no audio is needed."""
    (tmp_path / "keys").write_text("sk-alice name=alice\n")
    with live(tmp_path, "--api-key-file", str(tmp_path / "keys")) as server:
        context = browser.new_context(viewport={"width": 1100, "height": 800})
        watched = Watched(context.new_page(), server)
        watched.allowed_errors.append("status of 403")  # the browser logs the refused /metrics
        try:
            watched.open("sk-alice")
            page = watched.page
            page.wait_for_function("() => state.metricsRefused !== null")  # a poll has run
            assert page.text_content("#error") == ""
            watched.view("supervision")
            page.locator("#sidecars-table tr[data-sidecar=cpu0]").wait_for()
            assert page.is_visible("#charts-refused") and not page.is_visible(".charts")
            assert "admin key" in page.text_content("#charts-refused")
            assert page.text_content("#error") == ""
            watched.check()
        finally:
            context.close()
