"""A pytest plugin for scripts/mutate.py: many mutants of one module, one collection, a fork per mutant.

    KVPLAN_MUTATE_JOBS=jobs.json pytest -p mutate_fork TESTS

jobs.json: {"target": path, "module": dotted name, "timeout": s, "out": path,
            "mutants": [{"key": str, "source": str, "tests": [test ids] | null}]}

pytest collects once; then for each mutant the process forks, the child swaps the mutated functions' code into
the live function objects (`f.__code__ = ...`, so every module that imported `f` sees it) and runs the mutant's
tests (`tests`, else every collected test) with -x semantics. Writes {key: verdict} to `out`:
- "killed" / "killed (timeout)" / "survived": as the child's run says;
- "unswappable": the change is not inside a function body this can swap (a table, a class body, a lambda in
  a table, a function whose free variables changed); mutate.py then runs it as a fresh process.
mutate.py sends here only mutants whose line no test runs at import or collection, so nothing computed before the
fork depends on the change; and it re-runs every survivor as a fresh process, so a verdict never rests on the fork.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

_FUNCTION_FLAGS = 0x1 | 0x2  # CO_OPTIMIZED | CO_NEWLOCALS: a function's code, not a class body or module


def _is_function(code: CodeType) -> bool:
    return code.co_flags & _FUNCTION_FLAGS == _FUNCTION_FLAGS


def _same(a: CodeType, b: CodeType) -> bool:
    """The same bytecode, names and constants (nested code compared the same way); line numbers ignored."""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars) != (
        b.co_code,
        b.co_names,
        b.co_varnames,
        b.co_freevars,
        b.co_cellvars,
    ) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts, strict=True):
        if isinstance(x, CodeType) and isinstance(y, CodeType):
            if not _same(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _outer_functions(code: CodeType) -> Iterator[CodeType]:
    """The function code objects a module or class body defines directly (class bodies searched too)."""
    for const in code.co_consts:
        if isinstance(const, CodeType):
            if _is_function(const):
                yield const
            else:
                yield from _outer_functions(const)


def _import_time_differs(a: CodeType, b: CodeType) -> bool:
    """Whether what runs at import (module and class bodies, their comprehensions and lambdas) differs."""
    if (a.co_code, a.co_names) != (b.co_code, b.co_names) or len(a.co_consts) != len(b.co_consts):
        return True
    for x, y in zip(a.co_consts, b.co_consts, strict=True):
        if isinstance(x, CodeType) and isinstance(y, CodeType):
            if x.co_qualname != y.co_qualname:
                return True
            if not _is_function(x) and _import_time_differs(x, y):
                return True
        elif type(x) is not type(y) or x != y:
            return True
    return False


def _live_functions(module: ModuleType) -> tuple[dict[str, list[FunctionType]], list[Any]]:
    """qualname -> the function objects of `module` (module functions, methods, properties, wrapped ones), and
    the caches (functools.cache / lru_cache) wrapped around them."""
    out: dict[str, list[FunctionType]] = {}
    caches: list[Any] = []
    seen: set[int] = set()

    def add(obj: Any) -> None:
        for _ in range(8):  # a decorator chain: lru_cache, functools.wraps
            if hasattr(obj, "cache_clear"):
                caches.append(obj)
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
            elif isinstance(obj, property):
                for f in (obj.fget, obj.fset, obj.fdel):
                    add(f)
                return
            elif isinstance(obj, functools.cached_property):
                obj = obj.func
            mine = isinstance(obj, FunctionType) and obj.__code__.co_filename == module.__file__
            if mine and id(obj) not in seen:
                seen.add(id(obj))
                out.setdefault(obj.__code__.co_qualname, []).append(obj)
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is None:
                return
            obj = wrapped

    def walk(namespace: dict[str, Any], depth: int) -> None:
        for value in list(namespace.values()):
            if isinstance(value, type) and value.__module__ == module.__name__ and depth < 4:
                walk(dict(vars(value)), depth + 1)
            else:
                add(value)

    walk(vars(module), 0)
    return out, caches


def swap_in(module: ModuleType, original: str, mutated: str) -> str | None:
    """Swap the mutant's changed functions into `module`; None when done, else why it cannot be."""
    filename = module.__file__ or ""
    before = compile(ast.unparse(ast.parse(original)), filename, "exec")
    after = compile(mutated, filename, "exec")
    if _import_time_differs(before, after):
        return "the change runs at import"
    old = {c.co_qualname: c for c in _outer_functions(before)}
    live, caches = _live_functions(module)
    changed = [c for c in _outer_functions(after) if c.co_qualname not in old or not _same(old[c.co_qualname], c)]
    if not changed:
        return "no function changed"
    for code in changed:
        targets = live.get(code.co_qualname, [])
        if not targets:
            return f"no live function {code.co_qualname}"
        for f in targets:
            if len(f.__closure__ or ()) != len(code.co_freevars):
                return f"{code.co_qualname}: free variables differ"
            f.__code__ = code
    for cache in caches:  # a result the unmutated code cached would hide the change
        cache.cache_clear()
    return None


def _run_child(items: list[pytest.Item]) -> int:
    for i, item in enumerate(items):
        nxt = items[i + 1] if i + 1 < len(items) else None
        reports = runtestprotocol(item, nextitem=nxt, log=False)
        if any(r.failed for r in reports):
            if os.environ.get("KVPLAN_MUTATE_DEBUG"):
                print(item.nodeid, [str(r.longrepr)[-800:] for r in reports if r.failed], file=sys.stderr)
            return 1
    return 0


def _fork_run(items: list[pytest.Item], timeout_s: float, prepare: Any = None) -> str:
    """Run `items` in a forked child (after `prepare()`); the verdict from its exit status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 2
        try:
            if not os.environ.get("KVPLAN_MUTATE_DEBUG"):  # the child's own output, for debugging the tool
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            why = prepare() if prepare is not None else None
            code = 3 if why else _run_child(items)
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "killed (timeout)"
        time.sleep(0.005)
    code = os.waitstatus_to_exitcode(status)
    return {0: "survived", 3: "unswappable"}.get(code, "killed")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool:
    jobs = json.loads(Path(os.environ["KVPLAN_MUTATE_JOBS"]).read_text())
    module = sys.modules.get(jobs["module"]) or importlib.import_module(jobs["module"])
    original = Path(jobs["target"]).read_text()
    everything = list(session.items)
    by_id = {item.nodeid: item for item in everything}
    results: dict[str, str] = {"": _fork_run(everything, jobs["timeout"] * 4)}  # the unmutated run must pass
    for job in jobs["mutants"] if results[""] == "survived" else []:
        selected = [by_id[t] for t in job["tests"] or [] if t in by_id]

        def prepare(source: str = job["source"]) -> str | None:
            return swap_in(module, original, source)

        verdict = _fork_run(selected, jobs["timeout"], prepare) if selected else "survived"
        if verdict == "survived":  # the tests that run the line pass: every test decides
            verdict = _fork_run(everything, jobs["timeout"], prepare)
        results[job["key"]] = verdict
    Path(jobs["out"]).write_text(json.dumps(results))
    return True
