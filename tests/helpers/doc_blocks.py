"""The examples of README.md and docs/*.md as runnable pieces: fenced blocks, their commands,
and the output each command is documented to print.

The rules (what a doc writer needs to know) are in tests/integration/test_docs_examples.py's
docstring; this module only reads Markdown and compares text.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

RUN_LANGUAGES = ("sh", "console", "python")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
# A note after an expected output line: two spaces or more, then "# ".
NOTE = re.compile(r"\s{2,}#\s.*$|^\s*#\s.*$")
ELLIPSIS = "…"


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)  # empty: nothing documented, not checked


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None  # the reason, when the block is marked

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, its text dedented to its fence."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    at = 0
    while at < len(lines):
        opening = FENCE.match(lines[at])
        if not opening:
            at += 1
            continue
        end = at + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        indent = len(opening["indent"])
        body = "\n".join(line[indent:] for line in lines[at + 1 : end])
        found.append(Block(path, at + 1, opening["lang"], body, _marker(lines, at)))
        at = end + 1
    return found


def _marker(lines: list[str], fence: int) -> str | None:
    """The reason of a `<!-- not run: ... -->` on the nearest non-blank line above a fence."""
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    marked = NOT_RUN.search(lines[before]) if before >= 0 else None
    return marked["reason"] if marked else None


def _complete(text: str) -> bool:
    """Whether a shell command ends here: no continuation and every quote closed."""
    if text.rstrip().endswith(("\\", "|", "&&", "||")):
        return False
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def commands(console: str) -> list[Command]:
    """The `$ ` commands of a console transcript (continued over lines until complete) and the
    lines each is documented to print (up to the next command, trailing blank lines dropped)."""
    found: list[Command] = []
    lines = textwrap.dedent(console).splitlines()
    at = 0
    while at < len(lines):
        if not lines[at].startswith("$ "):
            if found:
                found[-1].expected.append(lines[at])
            at += 1
            continue
        text = lines[at][2:]
        while not _complete(text) and at + 1 < len(lines):
            at += 1
            text += "\n" + lines[at]
        found.append(Command(text))
        at += 1
    for command in found:
        while command.expected and not command.expected[-1].strip():
            command.expected.pop()
    return found


def expected_lines(documented: list[str]) -> list[str]:
    """The documented output without its notes (`  # ...`) and the lines that are only notes."""
    kept = []
    for line in documented:
        stripped = NOTE.sub("", line).rstrip()
        if stripped or not NOTE.search(line):
            kept.append(stripped)
    return kept


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in expected.split(ELLIPSIS)) + r"\Z")


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; `…` inside a line stands for any text, a line of `…` alone for any lines."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == ELLIPSIS:
        return any(matches(rest, actual[skip:]) for skip in range(len(actual) + 1))
    return bool(actual) and bool(_line_pattern(head).match(actual[0])) and matches(rest, actual[1:])


def python_notes(source: str) -> list[str]:
    """What a Python example documents it prints: the `# note` after each one-line `print(...)`."""
    return [m["note"] for m in re.finditer(r"^\s*print\(.*\)\s+#\s(?P<note>.*)$", source, re.M)]


def printed_lines(output: str) -> list[str]:
    """What a command printed, as lines without trailing spaces or trailing blank lines."""
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
