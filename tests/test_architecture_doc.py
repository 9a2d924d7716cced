"""docs/architecture.md names every module of the tree, one line each, and no module that is gone (DESIGN §1)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_has_its_line_and_every_line_its_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- `(kvplan/[^`]+\.py)`: \S", text, re.MULTILINE)
    tree = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "kvplan").rglob("*.py"))
    assert len(listed) == len(set(listed)), "a module listed twice"
    assert sorted(listed) == tree, {"missing": sorted(set(tree) - set(listed)), "gone": sorted(set(listed) - set(tree))}
