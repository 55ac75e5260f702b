"""No `__init__` of ours sets one attribute twice in its straight-line body: read from the source
with `ast`, a statement `self.x = ...` at the top level of an `__init__` (not inside an `if`, a
loop or a `with`) names an attribute no earlier such statement named.

A second assignment there silently throws the first away. Two features that chose one name for
two things (the interactive lane's stream and the interactive decode's, once) then share one
object and nothing fails: a type checker sees the same type twice. Setting an attribute of an
attribute (`self.stream.layout = ...`) is not counted. Run as a script, this prints the offenders.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

PACKAGES = ("supervisor", "sidecar", "bench")


def self_targets(statement: ast.stmt) -> Iterator[str]:
    """The attributes of `self` a top-level assignment sets directly."""
    if isinstance(statement, ast.Assign):
        targets: list[ast.expr] = list(statement.targets)
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return  # an annotation alone declares; `+=` reads the first value on purpose
    else:
        return
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        for element in elements:
            if (
                isinstance(element, ast.Attribute)
                and isinstance(element.value, ast.Name)
                and element.value.id == "self"
            ):
                yield element.attr


def twice_set(path: Path, root: Path = REPO_ROOT) -> Iterator[str]:
    """`path:line: attribute` (the path from `root`) for each attribute an `__init__` sets a
    second time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name != "__init__":
            continue
        first: dict[str, int] = {}
        for statement in node.body:
            for name in self_targets(statement):
                if name in first:
                    where = path.relative_to(root)
                    yield f"{where}:{statement.lineno}: self.{name} (first set on line {first[name]})"
                else:
                    first[name] = statement.lineno


def offenders() -> list[str]:
    return [
        found
        for package in PACKAGES
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        for found in twice_set(path)
    ]


def test_no_init_sets_an_attribute_twice() -> None:
    assert offenders() == []


def test_the_check_finds_a_second_assignment(tmp_path: Path) -> None:
    source = tmp_path / "runtime.py"
    source.write_text(
        "class Runtime:\n"
        "    def __init__(self, lane, decode):\n"
        "        self.stream = lane\n"
        "        self.stream.priority = 0\n"
        "        if decode:\n"
        "            self.other = decode\n"
        "        self.stream = decode\n",
        encoding="utf-8",
    )
    found = list(twice_set(source, root=tmp_path))
    assert found == ["runtime.py:7: self.stream (first set on line 3)"]


if __name__ == "__main__":
    print("\n".join(offenders()) or "none")
