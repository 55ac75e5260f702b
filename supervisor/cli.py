"""The `omnivoice-supervisor` command: one subcommand per job, each handing off to its module.

Subcommands that need torch (parity, make-checkpoint) import the sidecar inside their function,
so `serve` never loads it into the supervisor process.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

Command = Callable[[argparse.Namespace], int]


def cmd_parity(args: argparse.Namespace) -> int:
    from sidecar.parity import main as parity_main

    return parity_main(args.fixtures, args.device)


def cmd_make_checkpoint(args: argparse.Namespace) -> int:
    from sidecar.checkpoint import make_checkpoint

    make_checkpoint(args.out, size=args.size, seed=args.seed)
    print(f"wrote a {args.size} checkpoint with random weights to {args.out}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from supervisor.logs import setup_logging
    from supervisor.server import serve
    from supervisor.settings import Settings, SettingsError

    try:
        settings = Settings.from_namespace(args)
    except SettingsError as exc:
        print(f"omnivoice-supervisor serve: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings)
    return asyncio.run(serve(settings))


def add_serve(sub: argparse._SubParsersAction) -> None:
    from supervisor.settings import Settings

    p = sub.add_parser(
        "serve",
        help="run the HTTP server and its sidecars",
        description="Every flag can also be set with the OMNIVOICE_* variable shown; a flag wins over the variable.",
    )
    Settings.add_arguments(p)
    p.set_defaults(func=cmd_serve)


def add_parity(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parity", help="check the runtime against fixtures recorded from the reference OmniVoice")
    p.add_argument("fixtures", metavar="FIXTURES_DIR", help="directory with cases.json, expected.npz and checkpoint/")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (float32 either way; TF32 is turned off)")
    p.set_defaults(func=cmd_parity)


def add_make_checkpoint(sub: argparse._SubParsersAction) -> None:
    from pathlib import Path

    p = sub.add_parser("make-checkpoint", help="write a checkpoint with random weights in the published layout")
    p.add_argument("out", metavar="OUT", type=Path, help="directory to write (created if missing)")
    p.add_argument("--size", choices=("tiny", "full"), default="tiny", help="tiny for tests, full for benchmarks (real model dimensions)")
    p.add_argument("--seed", type=int, default=0, help="seed for the random weights")
    p.set_defaults(func=cmd_make_checkpoint)


# Each entry adds one subcommand; `serve` and the others register themselves the same way.
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [add_serve, add_parity, add_make_checkpoint]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omnivoice-supervisor", description="OpenAI-compatible OmniVoice TTS server")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    func: Command = args.func
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from sidecar.errors import OmniVoiceError  # light: no torch behind it

        if isinstance(exc, OmniVoiceError):
            print(f"omnivoice-supervisor {args.command}: {exc}", file=sys.stderr)
            return 2
        raise
