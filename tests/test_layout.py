"""Tests are laid out by package (DESIGN §1): tests/<package>/ holds the tests of kvplan/<package>/, tests/core/
those of the top-level modules; conformance/, fuzz/ and property/ cut across packages by kind; scripts/ tests the
tools under scripts/. scripts/layout_tests.py moves a file put anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
KVPLAN = TESTS.parent / "kvplan"
PACKAGES = {p.name for p in KVPLAN.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
KINDS = {"core", "conformance", "fuzz", "property", "scripts"}


def test_every_test_folder_is_a_package_or_a_kind() -> None:
    folders = {p.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py") if p.parent != TESTS}
    assert folders <= PACKAGES | KINDS, sorted(folders - PACKAGES - KINDS)
    assert not (TESTS / "unit").exists() or not list((TESTS / "unit").glob("test_*.py"))


def test_a_pinned_test_sits_with_its_module() -> None:
    misplaced = []
    for path in TESTS.rglob("test_pinned_*.py"):
        module = re.sub(r"^test_pinned_", "", path.stem)
        homes = {
            (f.relative_to(KVPLAN).parts[0] if f.parent != KVPLAN else "core") for f in KVPLAN.rglob(f"{module}.py")
        }
        if homes and path.relative_to(TESTS).parts[0] not in homes:
            misplaced.append(f"{path.relative_to(TESTS)} (module in {sorted(homes)})")
    assert not misplaced, misplaced
