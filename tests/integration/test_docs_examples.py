"""The examples of README.md and docs/*.md, run against live servers on the tiny checkpoint.

How a doc example is run (write new ones to these rules):

- Every fenced block labelled ```sh, ```console or ```python runs, in the order of its file,
  unless the nearest non-blank line above its fence is `<!-- not run: REASON -->` (a GPU, systemd,
  a hub download, a server of its own, a long benchmark...). A block without a label, or with
  another one (```json, ```yaml, ```text), is shown only; one that starts with `$ ` must say
  ```console, ```bash and ```shell are refused (say ```sh or ```console), and a block must not
  be marked without a reason.
- ```sh: one bash script (`set -e -o pipefail`) that must exit 0; its `#` notes are not checked.
- ```console: a transcript. Each `$ ` line is a command (continued over the next lines until its
  quotes close and it ends without `\\`, `|` or `&&`), and the lines up to the next `$ ` are its
  documented standard output, compared line by line: `…` in a line stands for any text, a line
  of `…` alone for any lines, and `  # note` at the end of a line (or a line of only a note) is
  left out. A command shown with no output is run, not compared. Every command must exit 0.
  The commands of one block share one shell (a variable set by one is there for the next).
- ```python: run by the test's interpreter; it must exit 0. A one-line `print(...)  # note`
  documents what it prints: the notes, in order, are compared with the printed lines as above.
- Where: each file's blocks share a scratch folder as their working directory, with the
  checkout's top-level files and folders linked in (`deploy/`, `pyproject.toml`, ...) and `.venv`
  linked to the test's virtual environment (whose bin/ is first on PATH, as after activating it);
  what the examples write stays in the scratch folder. A file's blocks build on one another
  (files made, voices saved): run them together, `-k API.md`, not one alone.
- Servers: `$OV` is a server started with `--api-key sk-local` (as docs/API.md starts it) and
  `$KEY` is `sk-local`; the literal `localhost:9194` and `127.0.0.1:9194` are replaced by a second
  server without keys (as README.md's quick start runs it). Both serve the tiny checkpoint with
  the default settings, except `--num-step 4 --warmup-steps 1` for speed; a server starts only
  when a block of the run needs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.doc_blocks import (
    RUN_LANGUAGES,
    Block,
    blocks,
    commands,
    expected_lines,
    matches,
    printed_lines,
    python_notes,
)
from tests.helpers.live_server import KEY, REPO_ROOT, LiveServer, live

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
ALL_BLOCKS = [block for path in DOCS for block in blocks(path)]
RUN = [b for b in ALL_BLOCKS if b.lang in RUN_LANGUAGES and b.not_run is None]
DOC_KEY = "sk-local"
DOC_ADDRESS = re.compile(r"\b(localhost|127\.0\.0\.1):9194\b")
BLOCK_TIMEOUT_S = 150


@pytest.fixture(scope="module")
def keyed_server(
    checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    # The harness's own key beside the docs' one: start() reads /health's settings with it.
    keys = ["--api-key", DOC_KEY, "--api-key", KEY]
    with live(tmp_path_factory.mktemp("keyed"), *keys, checkpoint=checkpoint_dir, key=None) as s:
        yield s


@pytest.fixture(scope="module")
def open_server(
    checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with live(tmp_path_factory.mktemp("open"), checkpoint=checkpoint_dir, key=None) as s:
        yield s


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The parent of each doc file's working folder."""
    return tmp_path_factory.mktemp("docs")


def workdir(scratch: Path, block: Block) -> Path:
    """A doc file's working folder: the checkout's top-level files and folders linked in (so that
    `deploy/Dockerfile` is there), `.venv` linked to the test's environment."""
    folder = scratch / block.path.stem
    if not folder.exists():
        folder.mkdir()
        for entry in REPO_ROOT.iterdir():
            if entry.name not in {".git", ".venv"}:
                (folder / entry.name).symlink_to(entry)
        (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def environment(request: pytest.FixtureRequest, block: Block) -> tuple[dict[str, str], str]:
    """The environment a block runs in, and its text with the literal address replaced."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "KEY": DOC_KEY,
    }
    text = block.text
    if "$OV" in text or "${OV}" in text:
        env["OV"] = request.getfixturevalue("keyed_server").url
    if DOC_ADDRESS.search(text):
        address = request.getfixturevalue("open_server").url.removeprefix("http://")
        text = DOC_ADDRESS.sub(address, text)
    return env, text


def run_console(text: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """Every command in one shell, each one's output in files of its own; the mismatches."""
    steps = commands(text)
    out = cwd / ".console"
    out.mkdir(exist_ok=True)
    script = "".join(
        f'{{ {step.text}\n}} >"{out}/{i}.out" 2>"{out}/{i}.err"; echo $? >"{out}/{i}.rc"\n'
        for i, step in enumerate(steps)
    )
    subprocess.run(["bash", "-c", script], cwd=cwd, env=env, timeout=BLOCK_TIMEOUT_S, check=False)
    problems = []
    for i, step in enumerate(steps):
        rc = (out / f"{i}.rc").read_text().strip() if (out / f"{i}.rc").exists() else "none"
        printed = printed_lines((out / f"{i}.out").read_text(errors="replace"))
        expected = expected_lines(step.expected)
        if rc != "0" or (expected and not matches(expected, printed)):
            stderr = (out / f"{i}.err").read_text(errors="replace")[-1500:]
            problems.append(
                f"$ {step.text}\nexit status {rc}; documented:\n"
                + "\n".join(expected)
                + "\nprinted:\n"
                + "\n".join(printed)
                + (f"\nstderr:\n{stderr}" if stderr else "")
            )
    return problems


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_the_doc_example_runs(
    block: Block, request: pytest.FixtureRequest, scratch: Path, checkpoint_dir: Path
) -> None:
    cwd = workdir(scratch, block)
    env, text = environment(request, block)
    if block.lang == "console":
        problems = run_console(text, cwd, env)
        assert not problems, f"{block.name}:\n" + "\n\n".join(problems)
        return
    argv = (
        ["bash", "-e", "-o", "pipefail", "-c", text]
        if block.lang == "sh"
        else [sys.executable, "-c", text]
    )
    ran = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert ran.returncode == 0, f"{block.name}: exit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
    notes = python_notes(text) if block.lang == "python" else []
    assert not notes or matches(notes, printed_lines(ran.stdout)), (notes, ran.stdout)


def test_every_example_is_labelled_and_every_marker_says_why() -> None:
    unlabelled = [b.name for b in ALL_BLOCKS if not b.lang and b.text.lstrip().startswith("$ ")]
    assert not unlabelled, f"label these ```console: {unlabelled}"
    other_shells = [
        b.name for b in ALL_BLOCKS if b.lang in {"bash", "shell", "shell-session", "zsh"}
    ]
    assert not other_shells, f"say ```sh (a script) or ```console (a transcript): {other_shells}"
    commandless = [b.name for b in ALL_BLOCKS if b.lang == "console" and not commands(b.text)]
    assert not commandless, f"a transcript without a `$ ` command: say ```text: {commandless}"
    unexplained = [b.name for b in ALL_BLOCKS if b.not_run is not None and not b.not_run.strip()]
    assert not unexplained, f"say why these are not run: {unexplained}"
    assert len(RUN) >= 20, [b.name for b in RUN]  # the harness still finds the examples


def test_the_transcript_rules() -> None:
    [first, second] = commands(
        "$ curl -s $OV -d '{\n    \"a\": 1}' |\n  jq .\n{\n\n}   # a note\n      # more note\n\n"
        "$ echo done\n"
    )
    assert (
        first.text == "curl -s $OV -d '{\n    \"a\": 1}' |\n  jq ." and second.text == "echo done"
    )
    assert expected_lines(first.expected) == ["{", "", "}"] and second.expected == []
    assert matches(["a…z", "…", "end"], ["abcz", "x", "y", "end"])
    assert matches(["…"], []) and not matches(["a…z"], ["abc"]) and not matches(["x"], [])
    assert not matches(["end"], ["end", "more"])
    source = 'x = 1\nprint(x, "chunks")  # 1 chunks\nprint(x)\n    print([x])  # [1]\n'
    assert python_notes(source) == ["1 chunks", "[1]"]
