"""A smoke test of scripts/mutate.py (the sampled mutation check of issue 26): the mutants it makes and applies,
the equivalents file it reads. The check itself runs by hand (README: Developing), not in CI."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvplan_mutate", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


SOURCE = '''
def f(a: int, b: int) -> int:
    """Docstring 7 is not mutated."""
    if a < b and a != 0:
        return min(a + b, a * 4)
    return a // 2
'''


def test_each_operator_kind_is_made(mutate: ModuleType) -> None:
    keys = {m.key for m in mutate.enumerate_mutants(SOURCE)}
    assert {
        "f: a < b -> a <= b",  # comparison moved by one
        "f: a != 0 -> a == 0",
        "f: a < b and a != 0 -> a < b or a != 0",
        "f: min(a + b, a * 4) -> max(a + b, a * 4)",
        "f: a + b -> a - b",  # operator swapped
        "f: a + b -> a",  # term dropped
        "f: a * 4 -> a // 4",
        "f: a * 4 -> a * 5",  # constant +-1, shown in its expression
        "f: a * 4 -> a * 3",
        "f: a // 2 -> a * 2",
    } <= keys
    assert not any("7" in k or "int ->" in k for k in keys)  # no docstring, no annotation


def test_a_mutant_changes_one_thing(mutate: ModuleType) -> None:
    m = next(m for m in mutate.enumerate_mutants(SOURCE) if m.key == "f: a + b -> a - b")
    code = mutate.apply(SOURCE, m)
    assert "min(a - b, a * 4)" in code and "a // 2" in code
    namespace: dict[str, object] = {}
    exec(compile(code, "mutant", "exec"), namespace)
    assert namespace["f"](1, 3) == -2  # type: ignore[operator]  # min(1 − 3, 4); the original gives 4


def test_the_equivalents_file_parses(mutate: ModuleType, tmp_path: Path) -> None:
    listed = mutate.read_equivalent()
    assert listed and all(reason for reason in listed.values())
    bad = tmp_path / "eq.txt"
    bad.write_text("kvplan/x.py | f: 1 -> 2\n")  # no reason
    with pytest.raises(SystemExit, match="bad line"):
        mutate.read_equivalent(bad)


def test_every_listed_equivalent_is_a_mutant_the_script_makes(mutate: ModuleType) -> None:
    # a listed key the code no longer yields (the line changed) would silently stop counting: it must be rewritten
    for key in mutate.read_equivalent():
        module, mutant = key.split("|", 1)
        keys = {m.key for m in mutate.enumerate_mutants((ROOT / module).read_text())}
        assert mutant in keys, key
