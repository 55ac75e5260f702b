"""`serve --help`: the flags most runs need, grouped; `serve --help-all`: every flag.

The full list is well over 200 lines; a new user looks for the model, the address, the keys
and where state goes. The short form is drawn from the same parser, so its lines (help text,
variable, default) are the full form's lines.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

ESSENTIAL = (
    ("the model and the devices", ("model", "devices", "asr_model")),
    ("who can reach it", ("host", "port", "allowed_hosts", "api_keys", "api_key_file")),
    ("where its state and logs go", ("data_dir", "store", "log_dir")),
    ("stopping", ("drain_s",)),
)


def short_help(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    formatter.add_text(parser.description)
    flags = {
        a.dest: a
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, (ShortHelp, FullHelp))
    }  # one per setting: its other spellings are suppressed
    essential = [flags[name] for _, names in ESSENTIAL for name in names if name in flags]
    for title, names in ESSENTIAL:
        formatter.start_section(title)
        formatter.add_arguments([flags[name] for name in names if name in flags])
        formatter.end_section()
    hidden = len(flags) - len(essential)
    formatter.add_text(
        f"{hidden} more flags (requests, sidecars and their supervision, batching, quality "
        "checks, jobs, callbacks, the result cache) and the spellings of other servers: "
        f"{parser.prog} --help-all"
    )
    return formatter.format_help()


class ShortHelp(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            argparse.SUPPRESS,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show the flags most runs need, and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser._print_message(short_help(parser), sys.stdout)
        parser.exit()


class FullHelp(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            argparse.SUPPRESS,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show every flag, and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.print_help()
        parser.exit()


def add_help_flags(parser: argparse.ArgumentParser) -> None:
    """For a parser made with add_help=False."""
    parser.add_argument("-h", "--help", action=ShortHelp)
    parser.add_argument("--help-all", action=FullHelp)
