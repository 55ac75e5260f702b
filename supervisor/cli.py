"""The `omnivoice-supervisor` command: one subcommand per job, each handing off to its module.

Subcommands that need torch (parity, make-checkpoint) import the sidecar inside their function,
so `serve` never loads it into the supervisor process.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import NoReturn, cast

from supervisor.cli_service import add_service
from supervisor.cli_synth import add_synth

Command = Callable[[argparse.Namespace], int]


def cmd_parity(args: argparse.Namespace) -> int:
    from sidecar.devtools.parity import main as parity_main

    return parity_main(args.fixtures, args.device)


def cmd_make_checkpoint(args: argparse.Namespace) -> int:
    if args.kind == "whisper":
        if args.size != "tiny":
            print(
                "make-checkpoint: --kind whisper is tiny only; for real transcription give "
                "--asr-model a published Whisper checkpoint",
                file=sys.stderr,
            )
            return 2
        if args.confident:
            print(
                "make-checkpoint: --confident shapes the OmniVoice audio head; not with --kind "
                "whisper",
                file=sys.stderr,
            )
            return 2
        from sidecar.devtools.whisper_checkpoint import make_whisper_checkpoint

        make_whisper_checkpoint(args.out, seed=args.seed)
    else:
        from sidecar.devtools.checkpoint import make_checkpoint

        make_checkpoint(args.out, size=args.size, seed=args.seed, confident=args.confident)
    confident = "confident " if args.confident else ""
    print(
        f"wrote a {args.size} {confident}{args.kind} checkpoint with random weights to {args.out}"
    )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from supervisor.commands import logs
    from supervisor.commands.port_check import port_problem
    from supervisor.commands.serve import serve
    from supervisor.settings import Settings, SettingsError
    from supervisor.supervision.gpu import devices_problem
    from supervisor.supervision.model_check import model_problem

    notes: list[str] = []
    try:
        settings = logs.prepare(Settings.from_namespace(args, notes=notes))
    except (SettingsError, OSError) as exc:
        print(f"omnivoice-supervisor {args.command}: {exc}", file=sys.stderr)
        return 2
    problem = (
        model_problem(settings.sidecar)
        or devices_problem(settings.devices)
        or port_problem(settings.host, settings.port)
    )
    if problem:  # said once, before the port opens, instead of by every sidecar that tries
        print(f"omnivoice-supervisor {args.command}: {problem}", file=sys.stderr)
        return 2
    logs.setup_logging(settings.server)
    for (
        note
    ) in notes:  # which name won, values converted, flags of other systems that mean nothing here
        logging.getLogger("omnivoice.settings").warning("%s", note)
    return asyncio.run(serve(settings))


def cmd_stop(args: argparse.Namespace) -> int:
    import os

    from supervisor.commands.stop import DEFAULT_PORT, stop, stop_systemd

    if args.systemd:
        return stop_systemd(args.service_name)
    pid_file = args.pid_file
    if pid_file is None and args.log_dir:
        from supervisor.commands.logs import latest_pid_file

        pid_file = latest_pid_file(args.log_dir)
    port = None if args.no_port else args.port
    if pid_file is None and port is None:
        pid_file = os.environ.get("OMNIVOICE_PID_FILE") or None
        if pid_file is None and not args.no_port:
            port = int(os.environ.get("OMNIVOICE_PORT") or 0) or DEFAULT_PORT
    return stop(pid_file, port, args.timeout_s)


class FlagFormatter(argparse.HelpFormatter):
    """argparse's help, never wrapping a line inside a --flag-name at its hyphens."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )


def add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from supervisor.commands.serve_help import add_help_flags
    from supervisor.settings import Settings

    p = sub.add_parser(
        "serve",
        aliases=["start"],
        help="run the HTTP server and its sidecars (`start` is the same command)",
        formatter_class=FlagFormatter,
        usage="%(prog)s --model DIR_OR_HF_ID [--host HOST] [--port PORT] [--devices auto|cpu|0,1] "
        "[--api-key KEY ...] [--data-dir DIR] [more flags: --help, --help-all]",
        description="Every flag can also be set with the OMNIVOICE_* variable shown; a flag wins over the variable. "
        "Flags and variables of omnivoice-triton-server and OmniVoice-Studio are accepted too (docs/MIGRATING.md).",
        add_help=False,
    )
    add_help_flags(p)  # --help: the flags most runs need; --help-all: every one
    Settings.add_arguments(p)
    p.set_defaults(func=cmd_serve)


def add_parity(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "parity", help="check the runtime against fixtures recorded from the reference OmniVoice"
    )
    p.add_argument(
        "fixtures",
        metavar="FIXTURES_DIR",
        help="directory with cases.json, expected.npz and checkpoint/",
    )
    p.add_argument(
        "--device", default="cpu", help="cpu or cuda:N (float32 either way; TF32 is turned off)"
    )
    p.set_defaults(func=cmd_parity)


def add_make_checkpoint(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pathlib import Path

    p = sub.add_parser(
        "make-checkpoint", help="write a checkpoint with random weights in the published layout"
    )
    p.add_argument("out", metavar="OUT", type=Path, help="directory to write (created if missing)")
    p.add_argument(
        "--size",
        choices=("tiny", "full"),
        default="tiny",
        help="tiny for tests, full for benchmarks (real model dimensions)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for the random weights")
    p.add_argument(
        "--kind",
        choices=("omnivoice", "whisper"),
        default="omnivoice",
        help="the OmniVoice model, or a Whisper for the ASR sidecar (--asr-model; tiny only)",
    )
    p.add_argument(
        "--confident",
        action="store_true",
        help="scale the audio head so each position puts about half its probability on one code "
        "(as peaked as a trained model's; bench/fidelity.py)",
    )
    p.set_defaults(func=cmd_make_checkpoint)


def add_stop(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from supervisor.commands.stop import DEFAULT_TIMEOUT_S

    p = sub.add_parser(
        "stop",
        help="stop a server: SIGTERM (it drains), wait, report",
        description="Finds the server by --pid-file (or --log-dir's latest run), by --port, or both "
        "(defaults: $OMNIVOICE_PID_FILE, else $OMNIVOICE_PORT or 9194); with --systemd, "
        "systemctl stop does it. Exit status: 0 stopped, 1 no server found, 3 still running.",
    )
    p.add_argument("--pid-file", metavar="F", help="the file `serve --pid-file F` wrote")
    p.add_argument(
        "--log-dir",
        metavar="DIR",
        help="the pid file of the latest run under `serve --log-dir DIR`",
    )
    p.add_argument("--port", type=int, metavar="P", help="the port the server listens on")
    p.add_argument(
        "--no-port",
        action="store_true",
        help="never look for the server by its port (with a pid file we never do unless --port is given)",
    )
    p.add_argument(
        "--systemd",
        action="store_true",
        help="stop the systemd unit instead: systemctl stop SERVICE",
    )
    p.add_argument(
        "--service-name",
        default="omnivoice-supervisor",
        metavar="SERVICE",
        help="the unit --systemd stops (default: %(default)s)",
    )
    p.add_argument(
        "--timeout-s",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="wait this long for the drain, then send a second SIGTERM (default: %(default)s)",
    )
    p.add_argument(
        "--no-kill",
        action="store_true",
        help="accepted for omnivoice-triton-server scripts: stop never sends SIGKILL",
    )
    p.set_defaults(func=cmd_stop)


# Each entry adds one subcommand; `serve` and the others register themselves the same way.
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    add_serve,
    add_stop,
    add_service,
    add_synth,
    add_parity,
    add_make_checkpoint,
]


class CommandArgs(argparse.ArgumentParser):
    """A subcommand's parser: where an argument it needs is missing and a flag given is one it
    does not know (`synth m.jsonl --ot DIR`), the unknown flag is the error, with the closest."""

    unknown: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        if self.unknown and message.startswith("the following arguments are required"):
            message = unrecognized(list(self.unknown), self)
        super().error(message)


def unknown_flags(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """The `--flags` in argv that parser knows neither whole nor as the start of one of its own
    (argparse takes `--mod` for `--model`); none after `--`."""
    flags = [s for action in parser._actions for s in action.option_strings]
    given = argv[: argv.index("--")] if "--" in argv else argv
    names = [a.split("=", 1)[0] for a in given if a.startswith("--") and len(a) > 2]
    return [n for n in names if not any(f.startswith(n) for f in flags)]


class CommandParser(argparse.ArgumentParser):
    """The top-level parser: an argument a subcommand does not know is that subcommand's error,
    shown with its usage and the closest of its flags, not the top-level usage; a command it
    does not know is answered with the closest command."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        if argv and not argv[0].startswith("-"):
            named = self.commands.get(argv[0])
            if isinstance(named, CommandArgs):
                named.unknown = unknown_flags(argv[1:], named)
            elif named is None:
                close = difflib.get_close_matches(argv[0], list(self.commands), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.error(
                    f"unknown command {argv[0]!r}{hint}; the commands: {', '.join(self.commands)}"
                )
        parsed, extra = self.parse_known_args(argv, namespace)
        if extra:
            command = self.commands[parsed.command]
            command.error(unrecognized(extra, command))
        return parsed


def unrecognized(extra: list[str], parser: argparse.ArgumentParser) -> str:
    """argparse's message for arguments it does not know, with the closest flag for the first
    flag among them ("did you mean --port?")."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    flags = [s for action in parser._actions for s in action.option_strings]
    given = next((a.split("=", 1)[0] for a in extra if a.startswith("--")), None)
    close = difflib.get_close_matches(given, flags, n=1, cutoff=0.6) if given else []
    return f"{message} (did you mean {close[0]}?)" if close else message


def build_parser() -> argparse.ArgumentParser:
    from supervisor import __version__

    parser = CommandParser(
        prog="omnivoice-supervisor", description="OpenAI-compatible OmniVoice TTS server"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = cast(  # each command's parser is a CommandArgs; the add_* functions need no more
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(
            dest="command", metavar="COMMAND", required=True, parser_class=CommandArgs
        ),
    )
    for add in SUBCOMMANDS:
        add(sub)
    parser.commands = dict(sub.choices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    func: Command = args.func
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from sidecar.shared.errors import OmniVoiceError  # light: no torch behind it

        if isinstance(exc, OmniVoiceError):
            print(f"omnivoice-supervisor {args.command}: {exc}", file=sys.stderr)
            return 2
        raise
