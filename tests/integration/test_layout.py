"""The tests keep the code's shape (tests/README.md): a test of `supervisor/`, `sidecar/` or
`bench/` sits at the same path as the module it is named for, every folder is a package, shared
code lives in tests/helpers/ and no test module imports another."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
MIRRORED = ("supervisor", "sidecar", "bench")
# A test module importing a test module: what two tests share belongs in tests/helpers/.
TEST_IMPORT = re.compile(r"^\s*(from|import)\s+(tests\.(?!helpers\b)\S+|test_\w+)", re.MULTILINE)


def all_test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def module_named_by(test: Path) -> Path | None:
    """The module (or package) a mirrored test file is named for: test_<module>.py,
    test_<module>_<aspect>.py, or test_<package>.py in the package's own folder; None where
    there is none."""
    folder = REPO_ROOT / test.parent.relative_to(TESTS)
    name = test.stem.removeprefix("test_")
    if name == folder.name and (folder / "__init__.py").is_file():
        return folder
    parts = name.split("_")
    for cut in range(len(parts), 0, -1):
        stem = "_".join(parts[:cut])
        for candidate in (folder / f"{stem}.py", folder / stem / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def test_each_mirrored_test_is_named_for_a_module_at_its_path() -> None:
    mirrored = [t for t in all_test_files() if t.relative_to(TESTS).parts[0] in MIRRORED]
    assert len(mirrored) > 50  # the walk found the tests at all
    strays = [str(t.relative_to(REPO_ROOT)) for t in mirrored if module_named_by(t) is None]
    assert strays == [], "no module at the path these tests are named for"


def test_the_naming_rule_finds_a_module_an_aspect_and_a_package() -> None:
    pool = module_named_by(TESTS / "supervisor" / "supervision" / "test_pool_sidecars.py")
    settings = module_named_by(TESTS / "supervisor" / "settings" / "test_settings.py")
    assert pool == REPO_ROOT / "supervisor" / "supervision" / "pool.py"
    assert settings == REPO_ROOT / "supervisor" / "settings"
    assert module_named_by(TESTS / "supervisor" / "speech" / "test_no_such_module.py") is None


def test_every_test_folder_is_a_package() -> None:
    folders = {p.parent for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts}
    missing = [
        str(f.relative_to(REPO_ROOT)) for f in sorted(folders) if not (f / "__init__.py").is_file()
    ]
    assert missing == [], "two test files of one name in two folders need both to be packages"


def test_helpers_hold_no_tests_and_no_test_imports_another() -> None:
    assert not list((TESTS / "helpers").glob("test_*.py"))
    importing = [
        str(t.relative_to(REPO_ROOT)) for t in all_test_files() if TEST_IMPORT.search(t.read_text())
    ]
    assert importing == [], "move what these import from a test into tests/helpers/"
