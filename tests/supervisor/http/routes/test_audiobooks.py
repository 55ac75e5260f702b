"""supervisor/http/routes/audiobooks.py on the app in this process (null engine): a book's form
read field by field, the job it becomes with each item's chapter and the book's own view, the
book's file once every chapter is done, and a job that is not a book told apart. Whole books
and their files read back: tests/integration/test_audiobooks_api.py."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from supervisor.http.routes.jobs import MAX_KEY_CHARS
from tests.helpers.waits import wait_until

BOOK = b"# The Sea Book\n\n## Morning\n\nThe boats came in.\n\n## Evening\n\nThe gulls left.\n"


def post(client: TestClient, book: bytes = BOOK, key: str | None = None, **fields: str) -> Any:
    return client.post(
        "/v1/audiobooks",
        files={"file": ("sea.md", book)},
        data={"voice": "alloy", **fields},
        headers={"Idempotency-Key": key} if key else {},
    )


def refused(answer: Any) -> tuple[int, str | None]:
    return answer.status_code, answer.json()["error"]["param"]


def completed(client: TestClient, book_id: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_until(
        lambda: (
            (got := client.get(f"/v1/audiobooks/{book_id}").json())["state"] == "completed" and got
        ),
        60,
        "the book's items",
    )
    return found


def test_a_book_becomes_a_job_with_each_items_chapter_and_the_books_view(
    client: TestClient,
) -> None:
    answer = post(client, author="A. Writer", response_format="mp3")
    assert answer.status_code == 202, answer.text
    book = answer.json()
    assert answer.headers["Location"] == f"/v1/audiobooks/{book['id']}"
    assert [(i["chapter"], i["title"]) for i in book["items"]] == [(0, "Morning"), (1, "Evening")]
    assert book["book"] == {
        "title": "The Sea Book",
        "author": "A. Writer",
        "language": book["book"]["language"],
        "format": "mp3",
        "chapters": [{"title": "Morning", "items": [0]}, {"title": "Evening", "items": [1]}],
        "content_url": f"/v1/audiobooks/{book['id']}/content",
    }
    shown = completed(client, book["id"])
    assert shown["book"] == book["book"] and shown["items"][1]["title"] == "Evening"
    content = client.get(f"/v1/audiobooks/{book['id']}/content")
    assert content.status_code == 200 and content.headers["content-type"] == "audio/mpeg"
    assert 'filename="The-Sea-Book.mp3"' in content.headers["content-disposition"]
    assert len(content.content) > 1000


def test_a_title_sent_names_the_book_and_its_file(client: TestClient) -> None:
    book = post(client, title="Tides: a/b  story!", response_format="opus").json()
    assert book["book"]["title"] == "Tides: a/b  story!"
    completed(client, book["id"])
    content = client.get(f"/v1/audiobooks/{book['id']}/content")
    assert content.headers["content-type"] == "audio/ogg"
    assert 'filename="Tides-a-b-story.opus"' in content.headers["content-disposition"]


def test_a_book_not_yet_made_is_a_409_not_ready(client: TestClient) -> None:
    chapters = "".join(f"## Part {n}\n\nWords of part {n}.\n\n" for n in range(60))
    book = post(client, chapters.encode()).json()
    assert client.delete(f"/v1/jobs/{book['id']}").status_code == 200
    shown = wait_until(
        lambda: (
            (got := client.get(f"/v1/audiobooks/{book['id']}").json())["state"]
            in ("cancelled", "completed")
            and got
        ),
        60,
        "the cancel",
    )
    assert shown["state"] == "cancelled", "the whole book was made before the cancel"
    early = client.get(f"/v1/audiobooks/{book['id']}/content")
    assert early.status_code == 409 and early.json()["error"]["code"] == "not_ready"
    assert early.json()["error"]["param"] == "job_id"


def test_a_job_that_is_not_a_book_and_one_not_there_are_404s(client: TestClient) -> None:
    job = client.post("/v1/jobs", json={"items": [{"input": "Just a job.", "voice": "alloy"}]})
    for path in (
        f"/v1/audiobooks/{job.json()['id']}",
        f"/v1/audiobooks/{job.json()['id']}/content",
    ):
        answer = client.get(path)
        assert answer.status_code == 404 and answer.json()["error"]["param"] == "job_id"
        assert "not an audiobook" in answer.json()["error"]["message"]
    assert client.get("/v1/audiobooks/job_nothere").status_code == 404


def test_the_same_key_with_the_same_book_replays_and_with_another_format_conflicts(
    client: TestClient,
) -> None:
    first = post(client, key="sea-1", response_format="m4b")
    again = post(client, key="sea-1", response_format="m4b")
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    other = post(client, key="sea-1", response_format="opus")  # the same chapters, another book
    assert other.status_code == 409, other.text


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"colour": "red"}, "colour"),
        ({"captions": "maybe"}, "captions"),
        ({"loudness": "{not json"}, "loudness"),
        ({"author": "x" * 501}, "author"),
        ({"response_format": "flac"}, "response_format"),
    ],
)
def test_a_field_it_cannot_take_is_a_400_naming_it(
    client: TestClient, fields: dict[str, str], param: str
) -> None:
    assert refused(post(client, **fields)) == (400, param)


def test_the_book_must_come_as_a_file_in_a_multipart_form(client: TestClient) -> None:
    as_text = client.post("/v1/audiobooks", files={"voice": (None, "alloy"), "file": (None, "x")})
    assert refused(as_text) == (400, "file")
    no_book = client.post("/v1/audiobooks", files={"voice": (None, "alloy")})
    assert refused(no_book) == (400, "file")
    form = client.post("/v1/audiobooks", data={"file": "words"})
    assert form.status_code == 415
    assert "multipart" in form.json()["error"]["message"]


def test_an_idempotency_key_too_long_is_a_400_before_the_form_is_read(client: TestClient) -> None:
    answer = post(client, key="k" * (MAX_KEY_CHARS + 1))
    assert refused(answer) == (400, "Idempotency-Key")
