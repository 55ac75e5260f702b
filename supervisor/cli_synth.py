"""`synth`: its flags (a manifest, or `--book`), handed to supervisor/commands/synth.py."""

from __future__ import annotations

import argparse
import sys

BOOK_SPEECH_FLAGS = ("voice", "language", "speed", "instructions", "seed")


def cmd_synth(args: argparse.Namespace) -> int:
    import os

    from supervisor.commands.synth import SynthOptions, synth
    from supervisor.commands.synth_book import BookOptions

    api_key = args.api_key or os.environ.get("OMNIVOICE_API_KEY")
    book = None
    if args.book is not None:
        if args.manifest is not None:
            print("synth: give a MANIFEST.jsonl or --book BOOK, not both", file=sys.stderr)
            return 2
        wanted = {name: getattr(args, name) for name in BOOK_SPEECH_FLAGS}
        speech = {name: value for name, value in wanted.items() if value is not None}
        book = BookOptions(args.book, args.format, speech)
    options = SynthOptions(
        args.manifest,
        args.out,
        args.server,
        args.model,
        api_key,
        args.job_size,
        args.poll_s,
        args.retry_s,
        book,
    )
    return synth(options)


def add_synth(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pathlib import Path

    p = sub.add_parser(
        "synth",
        help="synthesize a manifest (JSON lines of speech requests) into a folder; resumable",
        description="Submits the manifest as jobs, writes each result to DIR/<id>.<format> and skips what "
        "is there already, so running it again resumes. Exit status: 0 all done, 1 some "
        "failed (listed), 2 bad manifest or usage, 3 not finished (run it again).",
    )
    p.add_argument(
        "manifest",
        metavar="MANIFEST.jsonl",
        type=Path,
        nargs="?",
        help='one speech request per line, with an optional "id" (or --book)',
    )
    p.add_argument(
        "--book",
        metavar="BOOK",
        type=Path,
        help="an EPUB, Markdown or text book instead of a manifest: DIR/<book stem>.<format> "
        "(docs/AUDIOBOOKS.md)",
    )
    p.add_argument(
        "--format", choices=("m4b", "mp3", "opus"), default="m4b", help="the book's (default: m4b)"
    )
    p.add_argument("--voice", help="with --book: every chapter's voice")
    p.add_argument("--language", help="with --book: the language (default: the book's)")
    p.add_argument("--speed", type=float, help="with --book: the speed")
    p.add_argument("--instructions", help="with --book: a designed voice's instructions")
    p.add_argument("--seed", type=int, help="with --book: the seed of every chapter")
    p.add_argument(
        "--out", metavar="DIR", type=Path, required=True, help="where results go, as <id>.<format>"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--server",
        metavar="URL",
        help="a running server (default: $OMNIVOICE_SERVER, else http://127.0.0.1:9194)",
    )
    where.add_argument(
        "--model",
        metavar="DIR_OR_HF_ID",
        help="start a server for this run (state in DIR/.synth-server)",
    )
    p.add_argument(
        "--api-key", metavar="KEY", help="the server's API key (default: $OMNIVOICE_API_KEY)"
    )
    p.add_argument(
        "--job-size", type=int, default=1000, help="most items per job (default: %(default)s)"
    )
    p.add_argument(
        "--poll-s",
        type=float,
        default=1.0,
        help="seconds between looks at the jobs (default: %(default)s)",
    )
    p.add_argument(
        "--retry-s",
        type=float,
        default=300.0,
        help="keep retrying an unreachable or busy server this long before giving up (default: %(default)s)",
    )
    p.set_defaults(func=cmd_synth)
