"""POST /v1/audiobooks on a live server with the tiny checkpoint: an EPUB built with ebooklib
(three chapters, a nested table of contents, a cover, a footnote, an image) becomes a job of
chapters and one chaptered file, read back with PyAV and mutagen; bad books get their 400s."""

from __future__ import annotations

import io
import signal
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import pytest
import srt
from mutagen import File as MutagenFile

from supervisor.books import chaptered
from tests.helpers.books import build_epub, png
from tests.helpers.job_helpers import decoded_seconds, ended, wait_gone, wait_job
from tests.helpers.live_server import LiveServer, live
from tests.helpers.waits import wait_until

TITLES = ["1 Part One — 1.1 The Harbour", "1.2 The Market", "2 The Storm"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The module's server, once per job store: the chapters' results come from either."""
    store = (
        "sqlite"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_cluster").new_database()
    )
    # --max-input-chars 300: a chapter of a few paragraphs is made as parts
    flags = (
        "--max-batch-size",
        "4",
        "--chunk-s",
        "2",
        "--max-input-chars",
        "300",
        "--store",
        store,
    )
    with live(tmp_path_factory.mktemp("books"), *flags, checkpoint=checkpoint_dir) as running:
        yield running


def post_book(server: LiveServer, data: bytes, name: str, **fields: str) -> Any:
    return server.request(
        "POST", "/v1/audiobooks", files={"file": (name, data)}, data={"voice": "alloy", **fields}
    )


def refused(server: LiveServer, data: bytes, name: str, **fields: str) -> dict[str, Any]:
    reply = post_book(server, data, name, **fields)
    assert reply.status_code == 400, reply.text
    error: dict[str, Any] = reply.json()["error"]
    return error


def test_an_epub_becomes_a_job_of_chapters_and_one_chaptered_book(
    server: LiveServer, tmp_path: Path
) -> None:
    book = build_epub(tmp_path / "harbour.epub").read_bytes()
    reply = post_book(server, book, "harbour.epub", response_format="m4b", captions="true")
    assert reply.status_code == 202, reply.text
    created = reply.json()
    assert created["object"] == "job" and created["id"].startswith("job_")
    assert [item["title"] for item in created["items"]] == TITLES
    assert [item["id"] for item in created["items"]] == ["ch001", "ch002", "ch003"]
    assert created["book"]["language"] == "en" and created["book"]["format"] == "m4b"
    early = server.request("GET", f"/v1/audiobooks/{created['id']}/content")
    assert early.status_code == 409 and early.json()["error"]["code"] == "not_ready"

    done = wait_job(server, created["id"], ended, 300, "the book's chapters")
    assert done["state"] == "completed", done
    # made as the chapters came (books/maker.py): there before anyone asks for it
    data_dir = Path(server.health()["settings"]["data_dir"])
    made = data_dir / "books" / created["id"] / "book.m4b"
    wait_until(made.exists, 60, "the book made as its chapters came")
    made_at = made.stat().st_mtime_ns
    content = server.request("GET", f"/v1/audiobooks/{created['id']}/content")
    assert content.status_code == 200, content.text
    assert content.headers["content-type"] == "audio/mp4"
    assert 'filename="Harbour-Days.m4b"' in content.headers["content-disposition"]
    path = tmp_path / "book.m4b"
    path.write_bytes(content.content)
    assert made.stat().st_mtime_ns == made_at and made.read_bytes() == content.content

    lengths = [item["audio_seconds"] for item in done["items"]]
    with av.open(str(path)) as read_back:
        marks = [
            (float(c["start"] * c["time_base"]), c["metadata"]["title"])
            for c in read_back.chapters()
        ]
        assert read_back.metadata["title"] == "Harbour Days"
        assert read_back.metadata["artist"] == "A. Writer"
        duration = float(read_back.duration or 0) / av.time_base
    assert [title for _, title in marks] == TITLES
    assert marks[0][0] == 0.0
    for (found, _), (following, _), length in zip(marks, marks[1:], lengths, strict=False):
        # a chapter's audio, the gap, and the silence where two segments meet
        assert 0 < following - found - length - chaptered.GAP_S < chaptered.SEAM_MAX_S
    assert duration == pytest.approx(marks[-1][0] + lengths[-1], abs=0.03)
    assert [bytes(c) for c in MutagenFile(path).tags["covr"]] == [png(4, 4)]

    # each chapter alone, with its captions, through the job routes
    alone = server.request("GET", f"/v1/jobs/{created['id']}/items/1/audio")
    assert alone.status_code == 200 and alone.headers["content-type"] == "audio/flac"
    captions = server.request("GET", f"/v1/jobs/{created['id']}/items/1/captions.srt")
    assert captions.status_code == 200 and "Fish were sold by the pound." in captions.text
    assert "A note not to be read" not in captions.text
    again = server.request("GET", f"/v1/audiobooks/{created['id']}")
    assert [item["title"] for item in again.json()["items"]] == TITLES
    as_job = server.request("GET", f"/v1/jobs/{created['id']}").json()  # the items' own title
    assert [item["title"] for item in as_job["items"]] == TITLES


def test_a_markdown_book_in_opus_has_its_chapter_comments(
    server: LiveServer, tmp_path: Path
) -> None:
    text = "## Morning\n\nThe boats came in.\n\n## Evening\n\nThe wind turned.\n"
    reply = post_book(server, text.encode(), "day.md", response_format="opus", author="Me")
    assert reply.status_code == 202, reply.text
    done = wait_job(server, reply.json()["id"], ended, 300, "the book's chapters")
    assert done["state"] == "completed", done
    content = server.request("GET", f"/v1/audiobooks/{done['id']}/content")
    assert content.status_code == 200 and content.headers["content-type"] == "audio/ogg"
    path = tmp_path / "day.opus"
    path.write_bytes(content.content)
    tags = MutagenFile(path).tags
    assert tags["chapter001name"] == ["Morning"] and tags["chapter002name"] == ["Evening"]
    assert tags["chapter001"] == ["00:00:00.000"] and tags["artist"] == ["Me"]


def test_a_chapter_made_in_parts_is_downloaded_as_one_with_its_captions(server: LiveServer) -> None:
    paragraphs = [
        "The boats came in at dawn, low in the water with the night's catch.",
        "Gulls followed them past the breakwater and into the harbour mouth.",
        "On the quay the buyers waited with their ledgers and their coffee.",
        "By seven the first crates were on the scales and the bidding began.",
        "Nobody spoke of the weather, though everyone had watched the sky.",
    ]
    text = "## Morning\n\n" + "\n\n".join(paragraphs) + "\n"
    reply = post_book(server, text.encode(), "morning.md", captions="true")
    assert reply.status_code == 202, reply.text
    created = reply.json()
    assert len(created["items"]) > 1 and {i["title"] for i in created["items"]} == {"Morning"}
    assert [i["id"] for i in created["items"]][:2] == ["ch001-p1", "ch001-p2"]
    base = f"/v1/audiobooks/{created['id']}/chapters/0"
    early = server.request("GET", f"{base}/audio")
    assert early.status_code == 409 and early.json()["error"]["code"] == "item_not_done"
    done = wait_job(server, created["id"], ended, 300, "the chapter's parts")
    assert done["state"] == "completed", done
    chapter = server.request("GET", f"{base}/audio")
    assert chapter.status_code == 200 and chapter.headers["content-type"] == "audio/flac"
    total = sum(item["audio_seconds"] for item in done["items"])
    assert decoded_seconds(chapter.content, "flac") == pytest.approx(total, abs=0.01)
    cues = list(srt.parse(server.request("GET", f"{base}/captions.srt").text))
    assert " ".join(c.content for c in cues) == " ".join(["Morning.", *paragraphs])
    starts = [c.start.total_seconds() for c in cues]
    assert starts == sorted(starts) and cues[-1].end.total_seconds() <= total + 0.01
    assert (
        server.request("GET", f"/v1/audiobooks/{created['id']}/chapters/1/audio").status_code == 404
    )


def test_any_job_item_may_have_a_title(server: LiveServer) -> None:
    items = [{"input": "Chapter one.", "title": "One"}, {"input": "No title."}]
    created = server.request("POST", "/v1/jobs", json={"items": items})
    assert created.status_code == 202, created.text
    assert [item["title"] for item in created.json()["items"]] == ["One", None]
    bad = server.request("POST", "/v1/jobs", json={"items": [{"input": "x", "title": 5}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "items[0].title"


def test_the_same_idempotency_key_sends_back_the_same_book(server: LiveServer) -> None:
    text = b"## Only\n\nOne short chapter."
    key = {"Idempotency-Key": "book-2026-12-04"}

    def send(**fields: str) -> Any:
        return server.request(
            "POST",
            "/v1/audiobooks",
            files={"file": ("one.md", text)},
            data={"voice": "alloy", **fields},
            headers=key,
        )

    first, again = send(), send()
    assert first.status_code == again.status_code == 202, again.text
    assert again.json()["id"] == first.json()["id"]
    assert (
        again.headers["idempotent-replayed"] == "true"
        and "idempotent-replayed" not in first.headers
    )
    other = send(response_format="opus")  # the same chapters as another file: another book
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"


def test_bad_books_and_fields_get_400s_that_say_what_is_wrong(
    server: LiveServer, tmp_path: Path
) -> None:
    jobs_before = len(server.request("GET", "/v1/jobs").json()["data"])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", b"application/epub+zip", zipfile.ZIP_STORED)
        z.writestr("OEBPS/zeros.xhtml", b"\x00" * (16 * 2**20))
    bomb = refused(server, out.getvalue(), "bomb.epub")
    assert bomb["param"] == "file" and "zip bomb" in bomb["message"]
    assert "not a readable zip" in refused(server, b"PK\x03\x04" + bytes(64), "x.epub")["message"]
    assert "neither a book nor text" in refused(server, b"%PDF\x00\x01", "x.pdf")["message"]
    assert "no text to read" in refused(server, b"# Only\n\n# Headings\n", "x.md")["message"]
    book = build_epub(tmp_path / "b.epub").read_bytes()
    assert refused(server, book, "b.epub", title="x" * 501)["param"] == "title"
    as_json = server.request("POST", "/v1/audiobooks", json={"file": "words"})
    assert (
        as_json.status_code == 415 and as_json.json()["error"]["code"] == "unsupported_media_type"
    )
    fmt = refused(server, book, "b.epub", response_format="wav")
    assert fmt["param"] == "response_format"
    voice = refused(server, book, "b.epub", voice="nobody-here")
    assert voice["param"] == "voice" and voice["message"].startswith('chapter 1 ("1 Part One')
    assert len(server.request("GET", "/v1/jobs").json()["data"]) == jobs_before  # none stored


def test_a_sigkill_mid_book_loses_nothing_and_the_book_is_made_after_the_restart(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    sentences = " ".join(f"The boats came in at dawn on day {i}." for i in range(6))
    text = "".join(f"## Day {d}\n\n{sentences} Day {d} ends.\n\n" for d in range(1, 9))
    flags = ("--max-batch-size", "1")
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        reply = post_book(server, text.encode(), "week.md", response_format="mp3")
        assert reply.status_code == 202, reply.text
        book_id = reply.json()["id"]
        halfway = wait_job(server, book_id, lambda j: j["progress"]["done"] >= 3, 120, "3 chapters")
        sidecars = [s["pid"] for s in server.health()["sidecars"] if s["pid"]]
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        wait_gone(sidecars)
    done_before = {item["index"] for item in halfway["items"] if item["state"] == "done"}
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        done = wait_job(server, book_id, ended, 300, "the rest of the book")
        assert done["state"] == "completed", done
        for item in done["items"]:
            if item["index"] in done_before:
                assert item["attempts"] == 1, item  # nothing done was made again
        content = server.request("GET", f"/v1/audiobooks/{book_id}/content")  # made now
        assert content.status_code == 200, content.text
    path = tmp_path / "week.mp3"
    path.write_bytes(content.content)
    with av.open(str(path)) as read_back:
        titles = [
            c["metadata"]["title"] for c in sorted(read_back.chapters(), key=lambda c: c["start"])
        ]
    assert titles == [f"Day {d}" for d in range(1, 9)]
