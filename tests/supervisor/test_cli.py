"""The `omnivoice-supervisor` command line itself, run as a user runs it (issue 49.5)."""

from __future__ import annotations

import subprocess
import sys

import supervisor


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *argv], capture_output=True, text=True, timeout=60
    )


def test_an_unknown_flag_shows_the_commands_usage_and_the_closest_flag() -> None:
    done = run("serve", "--prot", "9305")
    assert done.returncode == 2 and not done.stdout
    lines = done.stderr.splitlines()
    assert lines[0].startswith("usage: omnivoice-supervisor serve --model DIR_OR_HF_ID")
    assert lines[-1] == (
        "omnivoice-supervisor serve: error: unrecognized arguments: --prot 9305 "
        "(did you mean --port?)"
    )
    stop = run("stop", "--pid-fle=x")
    assert stop.returncode == 2
    assert stop.stderr.splitlines()[0].startswith("usage: omnivoice-supervisor stop")
    assert stop.stderr.rstrip().endswith("(did you mean --pid-file?)")


def test_an_unknown_flag_is_said_before_a_missing_argument() -> None:
    """The trial of issue 49: `synth m.jsonl --ot out` said only that --out is required."""
    done = run("synth", "m.jsonl", "--ot", "out")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith("usage: omnivoice-supervisor synth")
    assert done.stderr.rstrip().endswith("unrecognized arguments: --ot (did you mean --out?)")
    missing = run("synth", "m.jsonl", "--serv", "http://127.0.0.1:1")  # --serv is --server's start
    assert missing.stderr.rstrip().endswith("the following arguments are required: --out")


def test_an_unknown_command_is_answered_with_the_closest() -> None:
    done = run("srve", "--model", "x")
    assert done.returncode == 2
    assert "unknown command 'srve' (did you mean serve?)" in done.stderr.splitlines()[-1]


def test_nothing_close_is_said_plainly() -> None:
    done = run("serve", "--zzzzzz")
    assert done.returncode == 2
    assert done.stderr.rstrip().endswith("unrecognized arguments: --zzzzzz")


def test_version_answers() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"omnivoice-supervisor {supervisor.__version__}"
