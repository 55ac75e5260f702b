"""supervisor/http/routes/audiobook_chapters.py on the app in this process (null engine): one
chapter's audio and captions as files named after it, a chapter of one item served as that item's
result, a chapter of parts with its captions moved on by each part's audio; 404 naming `n` for a
chapter not there or without captions, 409 `item_not_done` for one not done. Chapters of a whole
book read back: tests/integration/test_audiobooks_api.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.helpers.waits import wait_until

APP_SETTINGS = {"max_input_chars": 120}  # a chapter longer than that is made as parts
LONG = [
    "The boats came in at dawn, low in the water with the night's catch.",
    "Gulls followed them past the breakwater and into the harbour mouth.",
    "On the quay the buyers waited with their ledgers and their coffee.",
]
BOOK = ("## Morning\n\nShort words.\n\n## Evening\n\n" + "\n\n".join(LONG) + "\n").encode()


def finished(client: TestClient, book_id: str, state: str = "completed") -> dict[str, Any]:
    found: dict[str, Any] = wait_until(
        lambda: (got := client.get(f"/v1/audiobooks/{book_id}").json())["state"] == state and got,
        60,
        f"the book {state}",
    )
    return found


def post(client: TestClient, book: bytes, **fields: str) -> dict[str, Any]:
    answer = client.post(
        "/v1/audiobooks", files={"file": ("sea.md", book)}, data={"voice": "alloy", **fields}
    )
    assert answer.status_code == 202, answer.text
    created: dict[str, Any] = answer.json()
    return created


@pytest.fixture(scope="module")
def book(client: TestClient) -> dict[str, Any]:
    """A book with captions, made: chapter 0 of one item, chapter 1 of several."""
    return finished(client, post(client, BOOK, captions="true")["id"])


def test_a_chapter_of_one_item_is_that_items_result(
    client: TestClient, book: dict[str, Any]
) -> None:
    assert book["book"]["chapters"][0]["items"] == [0]
    chapter = client.get(f"/v1/audiobooks/{book['id']}/chapters/0/audio")
    assert chapter.status_code == 200 and chapter.headers["content-type"] == "audio/flac"
    assert chapter.headers["content-disposition"] == 'attachment; filename="chapter-001.flac"'
    assert chapter.content == client.get(f"/v1/jobs/{book['id']}/items/0/audio").content


def test_a_chapter_of_parts_is_one_file_with_its_captions_moved_on(
    client: TestClient, book: dict[str, Any]
) -> None:
    parts = book["book"]["chapters"][1]["items"]
    assert len(parts) > 1
    base = f"/v1/audiobooks/{book['id']}/chapters/1"
    chapter = client.get(f"{base}/audio")
    assert chapter.content[:4] == b"fLaC"
    assert chapter.headers["content-disposition"] == 'attachment; filename="chapter-002.flac"'
    for n in parts:
        assert chapter.content != client.get(f"/v1/jobs/{book['id']}/items/{n}/audio").content
    srt = client.get(f"{base}/captions.srt")
    assert srt.headers["content-type"].startswith("application/x-subrip")
    assert srt.headers["content-disposition"] == 'attachment; filename="chapter-002.srt"'
    numbers = re.findall(r"^(\d+)$", srt.text, re.MULTILINE)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)]  # one count, not one a part
    vtt = client.get(f"{base}/captions.vtt")
    assert vtt.headers["content-type"].startswith("text/vtt") and vtt.text.startswith("WEBVTT")
    first_part_s = book["items"][parts[0]]["audio_seconds"]
    starts = [seconds(t) for t in re.findall(r"^([\d:.]+) -->", vtt.text, re.MULTILINE)]
    assert starts == sorted(starts) and max(starts) >= first_part_s
    for sentence in LONG:
        assert sentence in vtt.text


def seconds(stamp: str) -> float:
    *rest, last = stamp.split(":")
    return sum(int(p) * 60 ** (len(rest) - i) for i, p in enumerate(rest)) + float(last)


@pytest.mark.parametrize("n", ["2", "-1", "²", "one", "1" * 30])
def test_a_chapter_not_there_is_a_404_naming_n(
    client: TestClient, book: dict[str, Any], n: str
) -> None:
    for path in ("audio", "captions.srt"):
        answer = client.get(f"/v1/audiobooks/{book['id']}/chapters/{n}/{path}")
        assert answer.status_code == 404 and answer.json()["error"]["param"] == "n", answer.text


def test_captions_of_a_book_sent_without_them_are_a_404(client: TestClient) -> None:
    plain = finished(client, post(client, b"## Only\n\nOne chapter, no captions.\n")["id"])
    answer = client.get(f"/v1/audiobooks/{plain['id']}/chapters/0/captions.vtt")
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "n"
    assert "captions=true" in answer.json()["error"]["message"]


def test_a_chapter_not_done_is_a_409_item_not_done(client: TestClient) -> None:
    chapters = "".join(f"## Part {n}\n\nWords of part {n}.\n\n" for n in range(60))
    created = post(client, chapters.encode())
    assert client.delete(f"/v1/jobs/{created['id']}").status_code == 200
    stopped = finished(client, created["id"], "cancelled")
    undone = next(i for i in stopped["items"] if i["state"] != "done")
    answer = client.get(f"/v1/audiobooks/{created['id']}/chapters/{undone['chapter']}/audio")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "item_not_done"
    assert answer.json()["error"]["param"] == "n"


def test_a_job_that_is_not_a_book_has_no_chapters(client: TestClient) -> None:
    job = client.post("/v1/jobs", json={"items": [{"input": "Just a job.", "voice": "alloy"}]})
    answer = client.get(f"/v1/audiobooks/{job.json()['id']}/chapters/0/audio")
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "job_id"
