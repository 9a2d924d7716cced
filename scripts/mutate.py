"""A small sampled mutation check: do the tests fail when the arithmetic is wrong?

Each mutant changes one thing in one module (an operator swapped, a term dropped, a comparison moved by
one, an integer constant +-1, min<->max, and<->or), is written into a scratch copy of the project, and the
tests that cover the module run against it with `pytest -x`. A mutant is *killed* when they fail (or time
out), *survives* when they pass. Survivors are printed with their line; one that cannot change an answer
is listed, with the reason, in scripts/mutants_equivalent.txt and then counted apart.

    python scripts/mutate.py kvplan/plan/admit.py --sample 40 --seed 7 -- tests/plan/test_admit.py

Without `-- TESTS`, the tests are the files under tests/ that import the module (by dotted name).

Speed without weakening: the tests run once on the unmutated module under a line tracer (scripts/mutate_cover.py),
which records the test ids that run each line; a mutant first runs only the ids that run its statement (every
test, for a statement run at import). Only a mutant those pass is run again on the whole test set, so a mutant
is killed or survives exactly as a run of every test would say. `--no-select` runs every test for every mutant.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "scripts" / "mutants_equivalent.txt"
TESTS_FILE = ROOT / "scripts" / "mutants_tests.txt"

_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.FloorDiv,
    ast.Mod: ast.FloorDiv,
}
_CMP_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


@dataclass(frozen=True)
class Mutant:
    """One change: where (node index in ast.walk order), what, and a key that survives line moves."""

    index: int
    kind: str
    line: int
    before: str
    after: str
    function: str
    shown: tuple[str, str] | None = None
    """A constant's change shown in its enclosing expression (``knobs[0] -> knobs[1]``), so that keys differ."""

    @property
    def key(self) -> str:
        before, after = self.shown or (self.before, self.after)
        return f"{self.function}: {before} -> {after}"


def _functions(tree: ast.AST) -> dict[int, str]:
    """Node id -> qualified name of the innermost enclosing function or class."""
    owner: dict[int, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = name
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{name}.{child.name}" if name else child.name
            elif not name and (target := _assigned_name(child)):  # a module constant: keys name it
                inner = target
            owner[id(child)] = inner
            visit(child, inner)

    visit(tree, "")
    return owner


def _assigned_name(node: ast.AST) -> str | None:
    """The name a module-level `NAME = ...` or `NAME: T = ...` binds, else None."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None


def _in_annotation_or_docstring(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    cur: ast.AST | None = node
    while cur is not None:
        parent = parents.get(id(cur))
        if isinstance(parent, (ast.AnnAssign, ast.arg)) and cur is parent.annotation:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and cur is parent.returns:
            return True
        if isinstance(parent, ast.Expr) and isinstance(cur, ast.Constant):
            return True
        cur = parent
    return False


def _changes(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """The mutated copies of `node` (kind, replacement); the caller splices one in."""
    out: list[tuple[str, ast.AST]] = []
    if isinstance(node, ast.BinOp):
        swap = _BINOP_SWAPS.get(type(node.op))
        if swap is not None:
            out.append(("operator", ast.BinOp(node.left, swap(), node.right)))
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            out.append(("term dropped", node.left))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        cmp_swap = _CMP_SWAPS.get(type(node.ops[0]))
        if cmp_swap is not None:
            out.append(("comparison", ast.Compare(node.left, [cmp_swap()], node.comparators)))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        out.append(("constant", ast.Constant(node.value + 1)))
        if node.value != 0:
            out.append(("constant", ast.Constant(node.value - 1)))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        other = "max" if node.func.id == "min" else "min"
        out.append(("min/max", ast.Call(ast.Name(other, ast.Load()), node.args, node.keywords)))
    elif isinstance(node, ast.BoolOp):
        other_op: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append(("and/or", ast.BoolOp(other_op, node.values)))
    return out


def enumerate_mutants(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    owners = _functions(tree)
    found: list[Mutant] = []
    for index, node in enumerate(ast.walk(tree)):
        if not hasattr(node, "lineno") or _in_annotation_or_docstring(node, parents):
            continue
        for kind, new in _changes(node):
            shown = _in_context(node, new, parents) if kind == "constant" else None
            found.append(
                Mutant(index, kind, node.lineno, ast.unparse(node), ast.unparse(new), owners.get(id(node), ""), shown)
            )
    return found


def _in_context(node: ast.AST, new: ast.AST, parents: dict[int, ast.AST]) -> tuple[str, str] | None:
    """The enclosing expression of a changed constant, before and after."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Dict) and node in parent.values:  # a table row: show its key, not the table
        k = parent.keys[parent.values.index(node)]
        head = f"{ast.unparse(k)}: " if k is not None else ""
        return head + ast.unparse(node), head + ast.unparse(new)
    if not isinstance(parent, ast.expr):
        return None
    before = ast.unparse(parent)
    for field, value in ast.iter_fields(parent):
        if value is node:
            setattr(parent, field, new)
            after = ast.unparse(parent)
            setattr(parent, field, node)
            return before, after
        if isinstance(value, list) and any(v is node for v in value):
            i = next(i for i, v in enumerate(value) if v is node)
            value[i] = new
            after = ast.unparse(parent)
            value[i] = node
            return before, after
    return None


class _Splice(ast.NodeTransformer):
    def __init__(self, target: int, kind: str, after: str) -> None:
        self.target, self.kind, self.after, self.counter = target, kind, after, -1
        self.order: dict[int, int] = {}

    def generic_visit(self, node: ast.AST) -> ast.AST:
        index = self.order.get(id(node))
        if index == self.target:
            for kind, new in _changes(node):
                if kind == self.kind and ast.unparse(new) == self.after:
                    return ast.copy_location(new, node)
        return super().generic_visit(node)


def apply(source: str, mutant: Mutant) -> str:
    tree = ast.parse(source)
    splice = _Splice(mutant.index, mutant.kind, mutant.after)
    splice.order = {id(n): i for i, n in enumerate(ast.walk(tree))}
    new_tree = ast.fix_missing_locations(splice.visit(tree))
    return ast.unparse(new_tree)


def read_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """`module | key | reason` lines; '#' comments; a key `NAME: *` stands for every mutant of NAME. Returns
    {module|key: reason}."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) != 3:
            raise SystemExit(f"{path}: bad line (want 'module | key | reason'): {raw}")
        out[f"{parts[0]}|{parts[1]}"] = parts[2]
    return out


def is_equivalent(mkey: str, equivalent: dict[str, str]) -> bool:
    """Listed as is, or under a `NAME: *` line (every mutant of a constant no answer reads but through max())."""
    return mkey in equivalent or any(k.endswith("*") and mkey.startswith(k[:-1]) for k in equivalent)


def covering_tests(module: str, skip: tuple[str, ...] = ("fuzz", "property")) -> list[str]:
    """The module's line in scripts/mutants_tests.txt, else the test files that import the module, less the
    slow folders (hypothesis runs) named in `skip`."""
    if TESTS_FILE.exists():
        for raw in TESTS_FILE.read_text().splitlines():
            name, sep, files = raw.partition(":")
            if sep and not raw.startswith("#") and name.strip() == module:
                return [f for f in files.split() if (ROOT / f).exists()]  # a baseline (--root) may lack some
    dotted = module.removesuffix(".py").replace("/", ".")
    pattern = re.compile(rf"\b(from {re.escape(dotted)} import|import {re.escape(dotted)}\b)")
    tests = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if pattern.search(p.read_text(errors="replace")) and p.relative_to(ROOT / "tests").parts[0] not in skip
    )
    return tests


def _scratch_copy() -> Path:
    """A copy of the project in a folder of its own, with ``../shared`` beside it as beside the checkout (tests
    read logs and traces there)."""
    base = Path(tempfile.mkdtemp(prefix="kvplan-mutate-"))
    scratch = base / ROOT.name
    scratch.mkdir()
    if (ROOT.parent / "shared").is_dir():
        (base / "shared").symlink_to((ROOT.parent / "shared").resolve())
    ignore = shutil.ignore_patterns("__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.pyc")
    for name in ("kvplan", "tests"):
        shutil.copytree(ROOT / name, scratch / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", scratch / "pyproject.toml")
    for name in (".ci", "examples", "benchmarks", "scripts", "README.md", ".pre-commit-hooks.yaml"):  # tests read them
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, scratch / name, ignore=ignore)
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, scratch / name)
    return scratch


def _pytest(scratch: Path, tests: list[str]) -> list[str]:
    """The pytest command for `tests`, the ids passed in a file (pytest's @file) so that hundreds fit."""
    listing = scratch / ".mutate-tests.txt"
    listing.write_text("\n".join(tests) + "\n")
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"@{listing}"]


def _env(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    path = os.pathsep.join([str(scratch), str(Path(__file__).resolve().parent)])  # for the mutate_cover plugin
    return {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", **(extra or {})}


def run_tests(scratch: Path, tests: list[str], timeout_s: float) -> str:
    try:
        done = subprocess.run(
            _pytest(scratch, tests), cwd=scratch, env=_env(scratch), capture_output=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return "killed (timeout)"
    return "survived" if done.returncode == 0 else "killed"


def line_coverage(scratch: Path, module: str, tests: list[str], timeout_s: float) -> dict[int, list[str]]:
    """{line: test ids that run it} for the unmutated module; raises SystemExit when its tests fail on it."""
    out = scratch / ".mutate-cover.json"
    env = _env(scratch, {"KVPLAN_MUTATE_TARGET": str(scratch / module), "KVPLAN_MUTATE_COVER": str(out)})
    cmd = [*_pytest(scratch, tests), "-p", "mutate_cover"]
    done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, timeout=timeout_s)
    if done.returncode != 0:
        tail = done.stdout.decode(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"{module}: the tests fail on the unmutated code: {' / '.join(tail)}")
    return {int(line): ids for line, ids in json.loads(out.read_text()).items()}


def statement_lines(source: str) -> dict[int, tuple[int, int, bool]]:
    """Node index (ast.walk order) -> the line span of its innermost statement, and whether that statement
    runs at import (module or class level, not inside a function)."""
    tree = ast.parse(source)
    span: dict[int, tuple[int, int, bool]] = {}

    def visit(node: ast.AST, stmt: tuple[int, int, bool], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here = stmt
            if isinstance(child, ast.stmt):
                here = (child.lineno, child.end_lineno or child.lineno, not in_function)
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            span[id(child)] = here
            visit(child, here, inner)

    visit(tree, (0, 0, True), False)
    return {i: span.get(id(n), (0, 0, True)) for i, n in enumerate(ast.walk(tree))}


def selected_tests(mutant: Mutant, spans: dict[int, tuple[int, int, bool]], cover: dict[int, list[str]]) -> list[str]:
    """The test ids that run the mutant's statement; [""] (every test) for one that runs at import."""
    first, last, at_import = spans.get(mutant.index, (0, 0, True))
    if at_import:
        return [""]
    ids = {i for line in range(first, last + 1) for i in cover.get(line, [])}
    return [""] if "" in ids else sorted(ids)


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    tests: list[str] = []
    if "--" in args_in:
        cut = args_in.index("--")
        args_in, tests = args_in[:cut], args_in[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="paths such as kvplan/plan/admit.py")
    parser.add_argument("--sample", type=int, default=40, help="mutants per module (0 = all)")
    parser.add_argument("--seed", type=int, default=None, help="sampling seed (default: fresh, printed)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant's test run")
    parser.add_argument("--list", action="store_true", help="list the sampled mutants, run nothing")
    parser.add_argument("--root", type=Path, default=None, help="another checkout to mutate (e.g. a baseline)")
    parser.add_argument("--match", default=None, help="only mutants whose line or key contains this text")
    parser.add_argument("--no-select", action="store_true", help="run every test for every mutant (no tracer)")
    parser.add_argument("--no-fork", action="store_true", help="every mutant in a fresh process (no fork)")
    parser.add_argument("--verbose", action="store_true", help="print the killed mutants too, as they finish")
    args = parser.parse_args(args_in)
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 16)
    print(f"seed {seed}")
    equivalent = read_equivalent()
    scratch = None if args.list else _scratch_copy()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` removes the scratch copy
    total_bad = 0
    try:
        for module in args.modules:
            total_bad += _one_module(module, args, seed, tests, equivalent, scratch)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch.parent, ignore_errors=True)  # the copy and the link beside it
    return 1 if total_bad else 0


def _one_module(
    module: str,
    args: argparse.Namespace,
    seed: int,
    tests: list[str],
    equivalent: dict[str, str],
    scratch: Path | None,
) -> int:
    source = (ROOT / module).read_text()
    mutants = enumerate_mutants(source)
    if args.match:
        mutants = [m for m in mutants if args.match in m.key or args.match == str(m.line)]
    picked = (
        mutants
        if args.sample <= 0
        else random.Random(f"{seed}:{module}").sample(mutants, min(args.sample, len(mutants)))
    )
    picked.sort(key=lambda m: (m.line, m.index, m.after))
    chosen = tests or covering_tests(module)
    if not chosen:  # pytest with no paths would run the whole suite for every mutant
        print(f"\n{module}: no test file covers it; pass the tests after --")
        return 0
    print(f"\n{module}: {len(picked)} of {len(mutants)} mutants; tests: {' '.join(chosen)}")
    if scratch is None:
        for m in picked:
            print(f"  {module}:{m.line}  {m.key}")
        return 0
    killed = survived = timeouts = 0
    started = time.monotonic()
    target = scratch / module
    cover = {} if args.no_select else line_coverage(scratch, module, chosen, 10 * args.timeout)
    spans = statement_lines(source)
    if not args.no_select:
        print(f"  traced {len(cover)} lines ({time.monotonic() - started:.0f} s)", flush=True)
    scored_mutants = [m for m in picked if not is_equivalent(f"{module}|{m.key}", equivalent)]
    equiv = len(picked) - len(scored_mutants)
    forked: dict[str, str] = {}
    if not (args.no_select or args.no_fork):
        forked = fork_verdicts(scratch, module, source, chosen, scored_mutants, spans, cover, args.timeout)
        print(f"  forked: {_tally(forked)} ({time.monotonic() - started:.0f} s)", flush=True)
    try:
        for m in scored_mutants:
            if forked.get(_job_key(m), "") == "killed":  # a failing test is a kill; a pass or a timeout is run afresh
                verdict = "killed"
            else:
                target.write_text(apply(source, m))
                verdict = _verdict(scratch, chosen, None if args.no_select else selected_tests(m, spans, cover), args)
            if verdict == "survived":
                survived += 1
                print(f"  SURVIVED {module}:{m.line}  {m.key}", flush=True)
            else:
                killed += 1
                if verdict == "killed (timeout)":  # a loop the mutant made, or a loaded machine: said, not hidden
                    timeouts += 1
                    print(f"  TIMEOUT  {module}:{m.line}  {m.key} (counted killed; re-run it with --match)", flush=True)
                elif args.verbose:
                    print(f"  killed   {module}:{m.line}  {m.key}", flush=True)
    finally:
        target.write_text(source)
    scored = killed + survived
    rate = 100.0 * killed / scored if scored else 100.0
    print(
        f"{module}: killed {killed}{f' ({timeouts} by timeout)' if timeouts else ''}, survived {survived}, "
        f"equivalent {equiv}; "
        f"kill rate {rate:.0f}% ({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return survived


def fork_verdicts(
    scratch: Path,
    module: str,
    source: str,
    chosen: list[str],
    mutants: list[Mutant],
    spans: dict[int, tuple[int, int, bool]],
    cover: dict[int, list[str]],
    timeout_s: float,
) -> dict[str, str]:
    """{mutant key: verdict} from one pytest process that forks a child per mutant (scripts/mutate_fork.py), for
    the mutants whose line runs only inside tests; {} when the unmutated run fails there (then every mutant runs
    afresh)."""
    jobs = [
        {"key": _job_key(m), "source": apply(source, m), "tests": tests}
        for m in mutants
        if (tests := selected_tests(m, spans, cover)) != [""]
    ]
    out = scratch / ".mutate-fork.json"
    spec = {
        "target": str(scratch / module),
        "module": module.removesuffix(".py").replace("/", "."),
        "timeout": timeout_s,
        "out": str(out),
        "mutants": jobs,
    }
    (scratch / ".mutate-jobs.json").write_text(json.dumps(spec))
    env = _env(scratch, {"KVPLAN_MUTATE_JOBS": str(scratch / ".mutate-jobs.json")})
    cmd = [*_pytest(scratch, chosen), "-p", "mutate_fork"]
    subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, timeout=timeout_s * (4 + 2 * len(jobs)))
    results: dict[str, str] = json.loads(out.read_text()) if out.exists() else {}
    if results.pop("", None) != "survived":
        print("  the unmutated tests fail in a forked child: every mutant runs afresh", flush=True)
        return {}
    return results


def _job_key(m: Mutant) -> str:
    return f"{m.index}|{m.kind}|{m.after}"  # unique in a module, where two keys may read the same


def _tally(verdicts: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "none"


def _verdict(scratch: Path, chosen: list[str], selected: list[str] | None, args: argparse.Namespace) -> str:
    """Killed or survived as every test in `chosen` says; the tests that run the line go first, and a mutant
    they kill needs no other run."""
    if selected and selected != [""]:
        first = run_tests(scratch, selected, args.timeout)
        if first != "survived":
            return first
    return run_tests(scratch, chosen, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
