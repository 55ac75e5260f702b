"""`synth --book` against a live server with the tiny checkpoint: the book written as one
chaptered file, a rerun doing nothing, and a SIGKILL of the server mid-book losing nothing and
remaking nothing done."""

from __future__ import annotations

from pathlib import Path

import av
from mutagen import File as MutagenFile

from supervisor.books import chaptered
from tests.helpers.books import build_epub, png
from tests.helpers.job_helpers import (
    KEY,
    decoded_seconds,
    job,
    run_synth,
    synth_cut_by_a_server_kill,
    wait_gone,
)
from tests.helpers.live_server import live

TITLES = ["1 Part One — 1.1 The Harbour", "1.2 The Market", "2 The Storm"]


def marks(path: Path) -> list[tuple[float, str]]:
    with av.open(str(path)) as book:
        return sorted(
            (float(c["start"] * c["time_base"]), c["metadata"]["title"]) for c in book.chapters()
        )


def test_synth_book_writes_one_chaptered_file_and_a_rerun_does_nothing(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    epub = build_epub(tmp_path / "harbour.epub")
    out = tmp_path / "out"
    with live(tmp_path, "--max-batch-size", "4", checkpoint=checkpoint_dir) as server:
        args = ("--book", str(epub), "--out", str(out), "--format", "mp3", "--voice", "alloy")
        first = run_synth(*args, "--server", server.url, "--api-key", KEY, "--poll-s", "0.2")
        assert first.returncode == 0, first.stderr
        assert "3 chapters in 3 items" in first.stderr and "3 written" in first.stderr
        book = out / "harbour.mp3"
        chapters = sorted((out / ".book-harbour").glob("ch*.flac"))
        lengths = [decoded_seconds(p.read_bytes(), "flac") for p in chapters]
        found = marks(book)
        assert [title for _, title in found] == TITLES
        assert found[0][0] == 0.0
        for (at, _), (following, _), length in zip(found, found[1:], lengths, strict=False):
            # a chapter's audio, the gap, and the silence where two segments meet
            assert 0 < following - at - length - chaptered.GAP_S < chaptered.SEAM_MAX_S
        tags = MutagenFile(book).tags
        assert str(tags["TIT2"]) == "Harbour Days" and str(tags["TPE1"]) == "A. Writer"
        assert [f.data for f in tags.getall("APIC")] == [png(4, 4)]
        written = book.stat().st_mtime_ns
        again = run_synth(*args, "--server", server.url, "--api-key", KEY)
        assert again.returncode == 0 and "is there already" in again.stderr
        assert book.stat().st_mtime_ns == written
        assert len(server.request("GET", "/v1/jobs").json()["data"]) == 1


def test_a_sigkill_mid_book_loses_nothing_and_remakes_nothing_done(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    sentences = " ".join(f"The boats came in at dawn on day {i}." for i in range(6))
    text = "".join(f"## Day {d}\n\n{sentences} Day {d} ends.\n\n" for d in range(1, 9))
    book_path = tmp_path / "week.md"
    book_path.write_text(text)
    out = tmp_path / "out"
    flags = ("--max-batch-size", "1")
    argv = ["--book", str(book_path), "--out", str(out), "--format", "opus", "--poll-s", "0.2"]
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        first_run = [*argv, "--server", server.url, "--api-key", KEY, "--retry-s", "2"]
        code, stderr, sidecars = synth_cut_by_a_server_kill(
            server,
            first_run,
            lambda: len(list((out / ".book-week").glob("ch*.flac"))) >= 3,
            "making three chapters",
        )
        assert code == 3 and "run the same command again" in stderr, stderr
        wait_gone(sidecars)
    kept = {p.name: p.stat().st_mtime_ns for p in (out / ".book-week").glob("ch*.flac")}
    assert 3 <= len(kept) < 8 and not (out / "week.opus").exists()
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        second = run_synth(*argv, "--server", server.url, "--api-key", KEY)
        assert second.returncode == 0, second.stderr
        assert f"{len(kept)} already in" in second.stderr and "following" in second.stderr
        jobs = server.request("GET", "/v1/jobs").json()["data"]
        assert len(jobs) == 1  # the same job, resumed
        final = job(server, jobs[0]["id"])
    assert final["state"] == "completed"
    done_before = {name.removesuffix(".flac") for name in kept}
    for item in final["items"]:
        # made once, or (only those in flight at the kill) started again
        assert item["attempts"] == 1 or item["id"] not in done_before, item
    for name, mtime in kept.items():
        assert (out / ".book-week" / name).stat().st_mtime_ns == mtime  # never written again
    assert [title for _, title in marks(out / "week.opus")] == [f"Day {d}" for d in range(1, 9)]
