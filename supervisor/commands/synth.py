"""`omnivoice-supervisor synth MANIFEST.jsonl --out DIR`: a manifest becomes jobs, results land in DIR, a rerun resumes.

A manifest has one speech request per line, as `POST /v1/jobs` takes its items (`{"id":
"intro", "input": "...", "voice": "alloy", "response_format": "wav"}`); a line without an
"id" is named after its line number. Item `id` is written to `DIR/<id>.<format>`, and with
`"captions": true` also to `DIR/<id>.srt` and `DIR/<id>.vtt`.

A run:

1. skips every item whose file is already in DIR;
2. follows the jobs an earlier run submitted (their ids are kept in `DIR/.synth-state.json`)
   for items still running or done on the server, so nothing is generated twice;
3. submits the rest as jobs of at most --job-size items, each with an Idempotency-Key derived
   from its body, so a run interrupted between the submission and the state file still finds
   its job again instead of making a second one;
4. polls, downloading each result as soon as it is done (to a temporary name, then renamed);
5. ends with a summary and the failed items with their reasons.

Exit status: 0 every item is in DIR; 1 some failed (listed); 2 a bad manifest or command line;
3 not finished (the server stayed unreachable for --retry-s, or the run was interrupted): run
the same command again to resume. Items that failed are submitted again by the next run.

Without --server, `--model` starts a server for the run (its state in `DIR/.synth-server`, so
its jobs survive it too), else http://127.0.0.1:9194 is used. Only the standard library is
used for HTTP.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from supervisor.commands.embedded_server import EmbeddedServer, ServerFailed, ServerRefused
from supervisor.commands.synth_client import Client, Incomplete
from supervisor.commands.synth_manifest import ManifestEntry, ManifestError, RunState, read_manifest

if TYPE_CHECKING:
    from supervisor.commands.synth_book import BookOptions

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3
SERVER_DIR = ".synth-server"
DEFAULT_SERVER = "http://127.0.0.1:9194"


# ---------------------------------------------------------------- progress


class Progress:
    """One line: rewritten in place on a terminal, else printed when it changes (at most every 2 s)."""

    def __init__(self, total: int, skipped: int, log: TextIO) -> None:
        self.total, self.skipped, self.done, self.failed = total, skipped, 0, 0
        self.log = log
        self.tty = log.isatty()
        self.started_at = time.monotonic()
        self.last: tuple[int, int] | None = None
        self.printed_at = 0.0

    def show(self, final: bool = False) -> None:
        """Print the line if it changed (off a terminal: at most every 2 s, and once more at the end)."""
        now = time.monotonic()
        if (self.done, self.failed) == self.last or (
            not final and not self.tty and now - self.printed_at < 2.0
        ):
            return
        self.last, self.printed_at = (self.done, self.failed), now
        finished = self.skipped + self.done + self.failed
        width = 30
        bar = "#" * (width * finished // max(1, self.total))
        line = (
            f"[{bar:<{width}}] {finished}/{self.total}: {self.done} done, {self.failed} failed, "
            f"{self.total - finished} to go, {self.skipped} skipped ({now - self.started_at:.0f} s)"
        )
        print(
            ("\r" + line) if self.tty else line,
            end="" if self.tty else "\n",
            file=self.log,
            flush=True,
        )


# ---------------------------------------------------------------- the run


def chunks(entries: list[ManifestEntry], size: int) -> Iterator[list[ManifestEntry]]:
    for start in range(0, len(entries), size):
        yield entries[start : start + size]


def error_message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message")) if isinstance(error, dict) else str(body)


class Synth:
    def __init__(
        self, out: Path, entries: list[ManifestEntry], job_size: int, poll_s: float, log: TextIO
    ) -> None:
        self.out, self.job_size, self.poll_s, self.log = out, job_size, poll_s, log
        self.pending = [e for e in entries if not e.is_in(out)]
        self.progress = Progress(len(entries), len(entries) - len(self.pending), log)
        self.state = RunState(out)
        self.following: dict[str, dict[int, ManifestEntry]] = {}  # job id -> position -> entry
        self.failures: list[tuple[ManifestEntry, str]] = []
        self.client: Client | None = None

    @property
    def api(self) -> Client:
        """The server's client, from run() on."""
        if self.client is None:
            raise RuntimeError("Synth.run() sets the client first")
        return self.client

    def summary(self) -> None:
        print(
            f"synth: {self.progress.total} items, {self.progress.skipped} already in {self.out}, "
            f"{len(self.pending)} to do",
            file=self.log,
            flush=True,
        )

    def run(self, client: Client) -> int:
        """Submit or follow every pending item until each has ended; the exit status."""
        self.client = client
        self.submit(self.resume())
        self.progress.show(final=True)
        while self.following:
            for job_id in list(self.following):
                self.poll(job_id)
            self.progress.show()
            if self.following:
                time.sleep(self.poll_s)
        self.progress.show(final=True)
        if self.progress.tty:
            print(file=self.log)
        return self.report()

    def keep_finished(self) -> int:
        """After an interrupt: write what the server has finished, asking once (no retries); how
        many were written. The rest stays with its job for the next run to follow."""
        before = self.progress.done
        if self.client is not None:
            self.client.retry_s = 0.0
            for job_id in list(self.following):
                self.poll(job_id)
        return self.progress.done - before

    def resume(self) -> list[ManifestEntry]:
        """Follow the jobs an earlier run submitted; the entries no live job holds are returned."""
        by_job: dict[str, dict[int, ManifestEntry]] = {}
        fresh = []
        for entry in self.pending:
            known = self.state.job_of(entry)
            if known is None:
                fresh.append(entry)
            else:
                by_job.setdefault(known[0], {})[known[1]] = entry
        for job_id, positions in by_job.items():
            status, job = self.api.request("GET", f"/v1/jobs/{job_id}")
            if status != 200:  # removed, or another server: submit again
                fresh.extend(positions.values())
                continue
            for n, entry in positions.items():
                items = job["items"]
                if (
                    n < len(items)
                    and items[n]["id"] == entry.id
                    and items[n]["state"] in ("queued", "running", "done")
                ):
                    self.following.setdefault(job_id, {})[n] = entry
                else:  # failed or cancelled last time: try again
                    fresh.append(entry)
        if self.following:
            print(
                f"synth: following {sum(map(len, self.following.values()))} item(s) of {len(self.following)} "
                "job(s) submitted by an earlier run",
                file=self.log,
                flush=True,
            )
        return sorted(fresh, key=lambda e: e.line)

    def submit(self, entries: list[ManifestEntry]) -> None:
        for group in chunks(entries, self.job_size):
            body = {"items": [entry.item for entry in group]}
            key = "synth-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            status, job = self.api.request("POST", "/v1/jobs", body, {"Idempotency-Key": key})
            if status != 202:
                raise ManifestError([self.locate(group, job, status)])
            for n, entry in enumerate(group):
                self.state.record(entry, job["id"], n)
                self.following.setdefault(job["id"], {})[n] = entry
            self.state.save()
            print(
                f"synth: submitted job {job['id']} ({len(group)} items)", file=self.log, flush=True
            )

    def locate(self, group: list[ManifestEntry], body: Any, status: int) -> str:
        """A refused job's error, pointed at the manifest line it is about."""
        message = error_message(body)
        error = body.get("error") if isinstance(body, dict) else None
        found = re.match(
            r"items\[(\d+)\]", str(error.get("param") if isinstance(error, dict) else "")
        )
        if found and int(found.group(1)) < len(group):
            entry = group[int(found.group(1))]
            return f"line {entry.line} (id {entry.id}): {message.split(': ', 1)[-1]}"
        return f"the server refused the job (HTTP {status}): {message}"

    def poll(self, job_id: str) -> None:
        positions = self.following[job_id]
        status, job = self.api.request("GET", f"/v1/jobs/{job_id}")
        if status != 200:
            for entry in positions.values():
                self.fail(
                    entry,
                    f"job {job_id} is gone from the server (HTTP {status}); run again to submit it anew",
                )
            del self.following[job_id]
            return
        for n, entry in list(positions.items()):
            item = job["items"][n]
            if item["state"] == "done":
                got, answer = self.download_captions(entry, item["audio_url"])
                if got == 200:
                    got, answer = self.api.download(
                        item["audio_url"], self.out / f"{entry.id}.{item['format']}"
                    )
                if got == 200:
                    self.progress.done += 1
                else:
                    self.fail(
                        entry, f"downloading its audio failed: HTTP {got}: {error_message(answer)}"
                    )
            elif item["state"] == "failed":
                self.fail(entry, error_message({"error": item["error"]}))
            elif item["state"] == "cancelled":
                self.fail(entry, f"cancelled (job {job_id} was cancelled)")
            else:
                continue
            del positions[n]
        if not positions:
            del self.following[job_id]

    def download_captions(self, entry: ManifestEntry, audio_url: str) -> tuple[int, Any]:
        """An item with "captions": true gets <id>.srt and <id>.vtt, before its audio (whose file
        says the item is in DIR)."""
        if entry.item.get("captions") is not True:
            return 200, None
        base = audio_url.rsplit("/", 1)[0]
        for kind in ("srt", "vtt"):
            got, answer = self.api.download(
                f"{base}/captions.{kind}", self.out / f"{entry.id}.{kind}"
            )
            if got != 200:
                return got, answer
        return 200, None

    def fail(self, entry: ManifestEntry, reason: str) -> None:
        self.failures.append((entry, reason))
        self.progress.failed += 1

    def report(self) -> int:
        p = self.progress
        print(
            f"synth: {p.done} written, {p.skipped} were there already, {p.failed} failed; results in {self.out}",
            file=self.log,
            flush=True,
        )
        if not self.failures:
            return EXIT_OK
        print("failed items (run the same command again to retry them):", file=self.log)
        for entry, reason in sorted(self.failures, key=lambda f: f[0].line):
            print(f"  {entry.where()}: {reason}", file=self.log)
        return EXIT_FAILED


@dataclass(frozen=True)
class SynthOptions:
    """The `synth` command's flags (supervisor/cli.py)."""

    manifest: Path | None  # None with --book
    out: Path
    server: str | None = None  # else --model's embedded server, $OMNIVOICE_SERVER or the default
    model: str | None = None
    api_key: str | None = None
    job_size: int = 1000
    poll_s: float = 1.0
    retry_s: float = 300.0
    book: BookOptions | None = None  # --book: the manifest is the book's chapters


def synth(options: SynthOptions, log: TextIO = sys.stderr) -> int:
    """The whole command; returns its exit status."""
    if options.book is not None:  # synth --book (supervisor/commands/synth_book.py)
        from supervisor.commands.synth_book import run_book

        return run_book(options, options.book, log)
    if options.manifest is None:
        print("synth: give a MANIFEST.jsonl, or --book BOOK", file=log)
        return EXIT_USAGE
    try:
        entries = read_manifest(options.manifest)
    except OSError as exc:
        print(f"synth: cannot read the manifest: {exc}", file=log)
        return EXIT_USAGE
    except ManifestError as exc:
        print(
            "synth: the manifest has problems; nothing was submitted:\n  "
            + "\n  ".join(exc.problems),
            file=log,
        )
        return EXIT_USAGE
    return run_entries(options, entries, options.out, log)


def run_entries(
    options: SynthOptions, entries: list[ManifestEntry], results: Path, log: TextIO
) -> int:
    """The entries made into `results` (a server started for the run keeps its state in
    `options.out`); the exit status."""
    out = options.out
    results.mkdir(parents=True, exist_ok=True)
    run = Synth(results, entries, options.job_size, options.poll_s, log)
    run.summary()
    if not run.pending:
        return EXIT_OK
    embedded = None
    server, api_key = options.server, options.api_key
    try:
        if options.model:
            embedded = EmbeddedServer(options.model, out / SERVER_DIR, log)
            server, api_key = embedded.start()
        return run.run(
            Client(
                server or os.environ.get("OMNIVOICE_SERVER") or DEFAULT_SERVER,
                api_key,
                options.retry_s,
                log,
            )
        )
    except ManifestError as exc:
        print("\nsynth: " + "\n".join(exc.problems), file=log)
        return EXIT_USAGE
    except ServerRefused as exc:
        print(f"\nsynth: {exc}", file=log)
        return EXIT_USAGE
    except (Incomplete, ServerFailed) as exc:
        print(
            f"\nsynth: {exc}\nsynth: not finished; run the same command again to resume", file=log
        )
        return EXIT_INCOMPLETE
    except KeyboardInterrupt:
        print(
            "\nsynth: interrupted; writing the items the server has finished (Ctrl-C again to skip)",
            file=log,
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt, Incomplete):
            run.keep_finished()
        print(
            f"synth: {run.progress.done} written in all; run the same command again to resume",
            file=log,
        )
        if embedded is not None:
            print(
                "synth: stopping the server: the items it has begun are finished and kept for "
                "the next run (its drain, --drain-s)",
                file=log,
                flush=True,
            )
        return EXIT_INCOMPLETE
    finally:
        if embedded is not None:
            embedded.stop()
