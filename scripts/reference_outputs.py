"""README's commands print, byte for byte, what a reference checkout prints (a refactor changes no output).

No golden is kept here: the reference is another checkout, named by KVPLAN_REFERENCE=/path/to/checkout
(for example `git worktree add /tmp/ref HEAD~1`). It lives under scripts/, out of the suite (which has no reference
checkout to compare with, so there it could only be skipped): `python -m pytest scripts/reference_outputs.py`.
Each command runs in both trees as a subprocess, with COLUMNS=200 (scripts/compare_outputs.py, which also runs it
from the shell).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_REF = os.environ.get("KVPLAN_REFERENCE")
if not _REF:
    raise SystemExit("KVPLAN_REFERENCE is not set: the reference checkout to compare README's outputs with")

_spec = importlib.util.spec_from_file_location("kvplan_compare_outputs", ROOT / "scripts" / "compare_outputs.py")
assert _spec and _spec.loader
compare_outputs = importlib.util.module_from_spec(_spec)
sys.modules["kvplan_compare_outputs"] = compare_outputs  # dataclasses look their module up there
_spec.loader.exec_module(compare_outputs)

REFERENCE = Path(_REF).resolve()
COMMANDS = compare_outputs.readme_commands(ROOT / "README.md")


def test_reference_is_a_checkout() -> None:
    assert (REFERENCE / "kvplan" / "__main__.py").is_file(), f"KVPLAN_REFERENCE={REFERENCE} is not a kvplan checkout"
    assert ("admit", "--ctx", "1M") in COMMANDS


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_same_output_as_reference(args: tuple[str, ...]) -> None:
    diffs = compare_outputs.compare(REFERENCE, args)
    assert not diffs, f"kvplan {' '.join(args)} differs from {REFERENCE}:\n" + "\n".join(diffs)
