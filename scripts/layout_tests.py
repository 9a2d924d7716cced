"""Lay tests out by package: move each test file under tests/unit/ to tests/<package>/, the kvplan package it
tests, and rewrite the paths and imports that name it (DESIGN §1's floors; issue: "tests laid out by package").

A file ``test_pinned_<module>.py`` goes with ``kvplan/**/<module>.py``; any other goes with the highest floor of
the kvplan packages it imports (a test of ``plan/`` builds models and plans, so it imports floors 1-3), unless
OVERRIDES names it. Top-level modules (errors, units, versions, ...) are ``core``; tests of ``scripts/`` are
``scripts``. Idempotent: run it again after adding a file to tests/unit/.

    python scripts/layout_tests.py [--dry-run]
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
UNIT = TESTS / "unit"
FLOORS = {"core": 0, "models": 1, "engines": 2, "plan": 3, "perf": 3, "runbook": 3, "sim": 3, "probes": 4}
FLOORS |= {"render": 4, "cli": 5}
OVERRIDES = {
    r"test_engine_\w+": "engines",  # the engines' rules and versions (models/engine_flags is a config reader)
    r"test_hybrid_(spec|field_logs)\w*": "engines",  # what each engine builds for a hybrid, and its logs
    r"test_hybrid_commands": "cli",
    r"test_pool_band": "engines",  # engines/band.py
    r"test_weights_cli": "cli",
    r"test_evidence_provenance": "core",  # the provenance headers of tests/data
}
"""File-name pattern -> package, where the name rule below picks a package the test does not check."""
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".yaml", ".yml", ".cfg", ""}


def _package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "scripts":
        return "scripts"
    if parts[0] != "kvplan":
        return ""
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in FLOORS) else "core"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _module_packages() -> dict[str, str]:
    """kvplan's module names (``vllm_hybrid``, ``admit``) -> their package (``core`` for the top level); a name in
    several packages (cli/admit.py, plan/admit.py) is the lowest floor's, where the computation is."""
    found: dict[str, str] = {}
    for f in sorted((ROOT / "kvplan").rglob("*.py")):
        rel = f.relative_to(ROOT / "kvplan").parts
        name = rel[-2] if f.stem == "__init__" and len(rel) > 1 else f.stem
        package = rel[0] if len(rel) > 1 else "core"
        if FLOORS.get(package, 9) < FLOORS.get(found.get(name, ""), 9):
            found[name] = package
    return found


def package_for(path: Path) -> str:
    """The tests/ folder a test file belongs in: the package of the kvplan module its name names (the longest
    prefix of the name after ``test_`` / ``test_pinned_``), else the package it imports most modules of."""
    for pattern, package in OVERRIDES.items():
        if re.fullmatch(pattern, path.stem):
            return package
    imported = _imports(path)
    if any(m.split(".")[0] == "scripts" for m in imported) or '/ "scripts"' in path.read_text(encoding="utf-8"):
        return "scripts"
    words = re.sub(r"^test_(pinned_)?", "", path.stem).split("_")
    modules = _module_packages()
    for n in range(len(words), 0, -1):
        if "_".join(words[:n]) in modules:
            return modules["_".join(words[:n])]
    counts: dict[str, int] = {}
    for m in imported:
        pkg = _package_of(m)
        if pkg:
            counts[pkg] = counts.get(pkg, 0) + 1
    return max(counts, key=lambda p: (counts[p], FLOORS.get(p, -1)), default="core")


def plan_moves() -> dict[Path, Path]:
    """Every file in tests/unit/, and a test_pinned_<module>.py in another package's folder (where a merge's
    directory-rename guess puts a file added to tests/unit/ on an older branch)."""
    moves = {p: TESTS / package_for(p) / p.name for p in sorted(UNIT.glob("test_*.py"))}
    for p in sorted(TESTS.glob("*/test_pinned_*.py")):
        module = p.stem[len("test_pinned_") :]
        homes = {f.relative_to(ROOT / "kvplan").parts[0] if f.parent.name != "kvplan" else "core"
                 for f in (ROOT / "kvplan").rglob(f"{module}.py")}  # fmt: skip
        if p.parent != UNIT and homes and p.parent.name not in homes:
            moves[p] = TESTS / package_for(p) / p.name
    return moves


def _text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in listed.splitlines() if Path(f).suffix in TEXT_SUFFIXES and (ROOT / f).is_file()]


def rewrite_references() -> None:
    """Paths (tests/unit/x.py) and imports (tests.unit.x) follow each file to where it lives now, including files
    moved by an earlier run (a reference added since on another branch)."""
    home = {p.stem: p.parent.name for p in TESTS.glob("*/test_*.py") if p.parent != UNIT}
    pattern = re.compile(r"tests([/.])unit[/.](test_\w+)")

    def swap(m: re.Match[str]) -> str:
        sep, stem = m.group(1), m.group(2)
        return f"tests{sep}{home[stem]}{sep}{stem}" if stem in home else m.group(0)

    for f in _text_files():
        try:
            old = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        new = pattern.sub(swap, old)
        if new != old:
            f.write_text(new, encoding="utf-8")


def main(argv: list[str]) -> int:
    moves = plan_moves()
    for src, dst in moves.items():
        print(f"{src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
    if "--dry-run" in argv:
        return 0
    for src, dst in moves.items():
        dst.parent.mkdir(exist_ok=True)
        if dst.exists():
            print(f"{dst.relative_to(ROOT)} exists: not moved", file=sys.stderr)
            return 1
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    rewrite_references()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
