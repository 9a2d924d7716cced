"""The layering of DESIGN.md §1, read from kvplan's own source (ast): imports run down the floors only, never in a
circle, and never from inside a function except where ALLOWED says why.

Floors: 0 the top-level modules (errors, units, limits, fsio, versions, lengths, search; the package's own
__init__), 1 models, 2 engines, 3 plan / runbook / sim, 4 probes / render, 5 cli, 6 __main__. An import inside
``if TYPE_CHECKING:`` is no import at run time and is not counted."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "kvplan"
FLOORS = {"models": 1, "engines": 2, "plan": 3, "perf": 3, "runbook": 3, "sim": 3, "probes": 4, "render": 4, "cli": 5}
FLOORS["__main__"] = 6
CLI = ("admit", "budget", "doctor", "fit", "gate", "gpus", "perf", "prefix", "presets", "probe", "simulate", "transfer")
ALLOWED = {  # 'module' (any function in it) or 'module:function' -> why its import waits for the call
    **dict.fromkeys((f"kvplan.cli.{c}" for c in (*CLI, "workspace")), "lazy command table: `--help` builds each"),
    "kvplan.cli:_run": "start-up: the app loads inside the error boundary (Ctrl-C there: one line, exit 130)",
    "kvplan.cli:__getattr__": "start-up: kvplan.cli.app on demand, inside the same boundary",
    "kvplan.cli._app:build_command": "lazy command table: a command is built when it runs",
    "kvplan.cli._common:load_plan": "lazy command table: help and --version load no model or deployment reader",
    "kvplan.cli._common:_drop_foreign_mtp": "lazy command table, as load_plan",
    "kvplan.cli._common:emit_sets": "lazy command table, as load_plan",
    "kvplan.cli._common:print_launch": "lazy command table: the launch tables load for --emit-command only",
    "kvplan.cli._common:model_ref_of": "lazy command table, as load_plan",
    "kvplan.engines:_engine_plan": "start-up: a plan loads its own engine's chain only (SGLang: no vLLM module)",
    "kvplan.fsio:exclusive": "fcntl is POSIX only; only the lock writer needs it",
    "kvplan.models.reader:_yaml": "yaml: only a YAML file loads it",
    "kvplan.models.quant:bytes_per_param": "start-up: fractions (with decimal) only where a checkpoint's bytes count",
    "kvplan.models.quant:bytes_for": "start-up: fractions, as bytes_per_param",
    "kvplan.models.snapshot:with_checkpoint": "start-up: the per-tensor readers load when weights are laid out",
    "kvplan.models.vlm:finish": "start-up: the engine's additions load for a VLM config only",
    "kvplan.models.from_hf:local_ref": "start-up: the network code (urllib, ssl) loads for a repo id only",
    "kvplan.models.from_hf:_model_from_hf": "start-up: the hybrid readers (36 ms) load for a hybrid config only",
    "kvplan.models.from_hf:_full_attention_from_hf": "start-up, as _model_from_hf",
    "kvplan.sim.run:_run": "start-up: an ideal replay or curve loads no engine replay (issue 31: simulate's start-up)",
    "kvplan.sim.run:run_sweep": "start-up: the process pool (7 ms) loads for a per-capacity sweep only",
    "kvplan.sim.run:pool": "start-up, as _run: the engine pools load for engine semantics only",
    "kvplan.sim.run:paging": "start-up, as _run",
    "kvplan.cli._simulate:run_simulate": "start-up, as kvplan.sim.run:_run (the paging for engine semantics only)",
    "kvplan.cli._simulate:_unit": "start-up, as kvplan.sim.run:_run (SGLang's policies for engine semantics only)",
    "kvplan.probes.nvml:load_nvml": "pynvml, probes only",
    "kvplan.probes.validate": "torch, torch.distributed and pynvml (probes only); numpy, the probe's extra",
    "kvplan.render.plot:pyplot": "matplotlib, the optional plot extra",
    "kvplan.render": "rich (76 ms for rich.table): JSON and Markdown never load it, a table the parts it draws",
    "kvplan.render.lines": "rich.cells and rich._wrap, as kvplan.render: only a table or a terminal loads them",
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _floor(module: str) -> int:  # a top-level module not named in FLOORS is floor 0
    return FLOORS.get(module.split(".")[1], 0) if "." in module else 0


@functools.cache
def _imports() -> tuple[dict[str, set[str]], list[str]]:
    """Each module's kvplan imports, and every import inside a function outside ALLOWED ('module:function'), plus
    every ALLOWED entry that no longer allows anything."""
    mods = {_module(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in mods}
    inside: list[str] = []
    used: set[str] = set()

    def walk(node: ast.AST, m: str, fn: str | None, pkg: list[str]) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.If) and "TYPE_CHECKING" in ast.unparse(ch.test):
                continue
            if isinstance(ch, (ast.Import, ast.ImportFrom)):
                if fn:
                    key = next((k for k in (f"{m}:{fn}", m) if k in ALLOWED), None)
                    if key is None:
                        inside.append(f"{m}:{fn} line {ch.lineno}")
                    else:
                        used.add(key)
                if isinstance(ch, ast.Import):  # import a.b.c: the longest kvplan module it names
                    edges[m] |= {max((p for p in mods if f"{a.name}.".startswith(f"{p}.")), key=len, default="")
                                 for a in ch.names}  # fmt: skip
                else:  # from P import N: the module P.N if there is one, else P
                    up = pkg[: len(pkg) - ch.level + 1] if ch.level else []
                    base = ".".join([*up, ch.module or ""]).strip(".")
                    edges[m] |= {f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in ch.names}
            walk(ch, m, ch.name if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn, pkg)

    for m, p in mods.items():
        pkg = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        walk(ast.parse(p.read_text(encoding="utf-8")), m, None, pkg)
    stale = [f"ALLOWED[{k!r}] allows nothing" for k in ALLOWED if k not in used]
    return {m: {t for t in ts if t in mods and t != m} for m, ts in edges.items()}, inside + stale


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for t in edges[todo.pop()] - seen:
            seen.add(t)
            todo.append(t)
    return seen


def test_imports_run_down_the_floors() -> None:
    edges, _ = _imports()
    up = [f"{m} -> {t}" for m, ts in edges.items() for t in ts if _floor(t) > _floor(m)]
    assert not up, up


def test_no_import_cycle() -> None:
    edges, _ = _imports()
    cycles = sorted(f"{m} -> {t}" for m, ts in edges.items() for t in ts if m in _reach(edges, t))
    assert not cycles, cycles


def test_no_import_inside_a_function_outside_the_allow_list() -> None:
    _, inside = _imports()
    assert not inside, inside


def test_no_issue_numbers_in_the_source() -> None:
    # a reason is written as the reason: "issue 24 item 9" means nothing to a reader of the code or its output
    import re

    found = [
        f"{p.relative_to(ROOT.parent)}:{n}"
        for p in sorted(ROOT.rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bissues? \d+\b", line, re.IGNORECASE)
    ]
    assert not found, found


MAX_DOCSTRING_LINES = 15


def test_module_docstrings_say_what_the_module_owns_in_15_lines() -> None:
    # a module docstring says what the module owns; the engine citations sit as comments on the rule they justify
    long = {}
    for p in sorted(ROOT.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")), clean=False)
        if doc and len(doc.splitlines()) > MAX_DOCSTRING_LINES:
            long[str(p.relative_to(ROOT.parent))] = len(doc.splitlines())
    assert not long, f"module docstrings over {MAX_DOCSTRING_LINES} lines: {long}"
