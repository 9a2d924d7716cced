"""A smoke test of scripts/mutate.py (the sampled mutation check of issue 26): the mutants it makes and applies,
the equivalents file it reads. The check itself runs by hand (README: Developing), not in CI."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.scripts._load import load

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutate() -> ModuleType:
    return load("kvplan_mutate", "scripts/mutate.py")


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
        assert mutant in keys or (mutant.endswith("*") and any(k.startswith(mutant[:-1]) for k in keys)), key


def test_a_constant_listed_whole_covers_its_mutants_only(mutate: ModuleType) -> None:
    listed = {"m.py|A: *": "read only through max()"}
    assert mutate.is_equivalent("m.py|A: 2 + 4 -> 3 + 4", listed)
    assert not mutate.is_equivalent("m.py|AB: 2 + 4 -> 3 + 4", listed)  # another name
    assert not mutate.is_equivalent("m.py|B: 2 + 4 -> 3 + 4", listed)


# --------------------------------------------------------------------------- choosing the tests a mutant runs

TRACED = """\
LIMIT = 4


def f(x: int) -> int:
    if x > LIMIT:
        return x - 1
    return x + 1
"""

TRACED_TESTS = """\
from pkg.m import f


def test_small() -> None:
    assert f(1) == 2


def test_large() -> None:
    assert f(9) == 8
"""


def _mutant(mutate: ModuleType, source: str, key: str) -> object:
    return next(m for m in mutate.enumerate_mutants(source) if m.key == key)


def test_a_mutant_runs_the_tests_that_run_its_statement(mutate: ModuleType) -> None:
    spans = mutate.statement_lines(TRACED)
    cover = {5: ["t::small", "t::large"], 6: ["t::large"], 7: ["t::small"]}
    # `x - 1` is on line 6 (the return inside the if): only the test that takes that branch runs it
    assert mutate.selected_tests(_mutant(mutate, TRACED, "f: x - 1 -> x + 1"), spans, cover) == ["t::large"]
    # the `if` statement spans lines 5-6: its comparison is run by every test that reaches either line
    assert mutate.selected_tests(_mutant(mutate, TRACED, "f: x > LIMIT -> x >= LIMIT"), spans, cover) == [
        "t::large",
        "t::small",
    ]
    # LIMIT = 4 runs at import, before any test: every test runs (a module constant's key names it)
    assert mutate.selected_tests(_mutant(mutate, TRACED, "LIMIT: 4 -> 5"), spans, cover) == [""]


def test_the_tracer_records_which_test_runs_which_line(mutate: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text(TRACED)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(TRACED_TESTS)
    cover = mutate.line_coverage(tmp_path, "pkg/m.py", ["tests/test_m.py"], 120)
    small, large = "tests/test_m.py::test_small", "tests/test_m.py::test_large"
    assert cover[6] == [large] and cover[7] == [small] and sorted(cover[5]) == sorted([small, large])
    assert cover[1] == [""]  # LIMIT = 4, run when the test file imports the module
    (tmp_path / "tests" / "test_m.py").write_text(TRACED_TESTS.replace("== 8", "== 7"))
    with pytest.raises(SystemExit, match="fail on the unmutated code"):
        mutate.line_coverage(tmp_path, "pkg/m.py", ["tests/test_m.py"], 120)


def test_a_survivor_of_its_tests_runs_every_test(mutate: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # the subset only saves time: a mutant it does not kill is judged by the whole set, as without the tracer
    runs: list[list[str]] = []
    verdicts = {("a",): "survived", ("a", "b"): "killed", ("b",): "killed"}
    monkeypatch.setattr(mutate, "run_tests", lambda _s, tests, _t: runs.append(tests) or verdicts[tuple(tests)])
    args = SimpleNamespace(timeout=1.0)
    assert mutate._verdict(Path("."), ["a", "b"], ["a"], args) == "killed" and runs == [["a"], ["a", "b"]]
    runs.clear()
    assert mutate._verdict(Path("."), ["a", "b"], ["b"], args) == "killed" and runs == [["b"]]
    runs.clear()
    assert mutate._verdict(Path("."), ["a", "b"], [], args) == "killed" and runs == [["a", "b"]]  # no test runs it
    runs.clear()
    assert mutate._verdict(Path("."), ["a", "b"], [""], args) == "killed" and runs == [["a", "b"]]  # at import


def _traced_project(tmp_path: Path) -> tuple[Path, list[str]]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text(TRACED)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(TRACED_TESTS)
    return tmp_path, ["tests/test_m.py"]


def test_forked_mutants_get_the_verdict_of_a_fresh_process(mutate: ModuleType, tmp_path: Path) -> None:
    root, tests = _traced_project(tmp_path)
    cover = mutate.line_coverage(root, "pkg/m.py", tests, 120)
    spans = mutate.statement_lines(TRACED)
    wanted = ("f: x - 1 -> x + 1", "f: x > LIMIT -> x >= LIMIT", "LIMIT: 4 -> 5")
    mutants = [_mutant(mutate, TRACED, k) for k in wanted]
    got = mutate.fork_verdicts(root, "pkg/m.py", TRACED, tests, mutants, spans, cover, 60.0)
    keys = [mutate._job_key(m) for m in mutants]
    # f(9) == 8 fails when 9 − 1 becomes 9 + 1; `>` → `>=` differs only at x = 4, which no test reads; LIMIT
    # runs at import, so it is not forked (a fresh process decides it) and has no verdict here
    assert got == {keys[0]: "killed", keys[1]: "survived"}
    for m in mutants:  # and a fresh process agrees on each
        (root / "pkg" / "m.py").write_text(mutate.apply(TRACED, m))
        fresh = mutate.run_tests(root, tests, 120)
        assert fresh == ("killed" if m.key == "f: x - 1 -> x + 1" else "survived")  # LIMIT 5: f(1), f(9) as before


def test_a_change_at_import_is_not_swapped_into_a_live_module(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        fork = importlib.import_module("mutate_fork")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    source = (
        "import functools\nLIMIT = 4\n\n\nclass K:\n    def g(self, x):\n        return x + LIMIT\n\n\n"
        "@functools.cache\ndef h(x):\n    return x * 2\n"
    )
    path = tmp_path / "live_m.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("live_m", path)
    assert spec is not None and spec.loader is not None
    live = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live)
    assert live.h(3) == 6  # cached: the swap must clear it
    assert fork.swap_in(live, source, source.replace("LIMIT = 4", "LIMIT = 5")) == "the change runs at import"
    assert fork.swap_in(live, source, source) == "no function changed"
    assert fork.swap_in(live, source, source.replace("x + LIMIT", "x - LIMIT").replace("x * 2", "x * 3")) is None
    assert live.K().g(10) == 6 and live.h(3) == 9  # 10 − 4: the method swapped; 3 × 3: the cache cleared


def test_a_timeout_is_told_apart_from_a_failing_test(mutate: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # a loaded machine can stop a passing run at --timeout: the verdict keeps the word, so main prints TIMEOUT and
    # counts it apart ("killed N (T by timeout)") instead of folding it into the kills unseen
    runs: list[list[str]] = []

    def run_tests(scratch: Path, tests: list[str], timeout_s: float) -> str:
        runs.append(tests)
        return "killed (timeout)" if tests == ["t::sel"] else "survived"

    monkeypatch.setattr(mutate, "run_tests", run_tests)
    args = SimpleNamespace(timeout=1.0)
    assert mutate._verdict(Path("."), ["t::all"], ["t::sel"], args) == "killed (timeout)"
    assert runs == [["t::sel"]]  # the selected tests' verdict stands; the whole list is not run after it
    assert mutate._verdict(Path("."), ["t::all"], ["t::other"], args) == "survived"
