"""Public startup logs reproduced from the config alone (tests/runbook/config_alone: the cases and the rules)."""

from __future__ import annotations

import pytest

from tests.runbook.config_alone import MEASURED_KNOBS, WITHIN, Case, all_cases, error, logged_in_line, plan, table

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.log.rsplit("/", 1)[-1] for c in CASES])
def test_log_reproduced_from_the_config_alone(case: Case) -> None:
    if case.path().parts[-3:-1] == ("shared", "logs") and not case.path().exists():
        pytest.skip("needs ../shared")
    assert logged_in_line(case), f"the logged figure {case.logged:,} is not on the evidence line"
    predicted, err = error(case)
    if not case.gap:
        assert abs(err) <= WITHIN, f"{predicted:,} vs logged {case.logged:,}: {err:+.2%}"
    else:
        low, high = case.gap_band
        assert abs(err) > WITHIN, f"the known gap closed ({err:+.2%}): make it a plain case"
        assert low <= err <= high, f"{err:+.4%} left its pinned band {case.gap_band}"


def test_a_case_may_not_set_a_measured_figure() -> None:
    bad = Case(log="x", line="x", logged=1, label="x", model="glm-5.3", sets=("weights_per_gpu=90GiB",), stated="x")
    with pytest.raises(ValueError, match="measured figures"):
        plan(bad)
    assert "weights_per_gpu" in MEASURED_KNOBS


def test_every_case_is_distinct_and_the_table_lists_it() -> None:
    logs = [(c.log, c.line) for c in CASES]
    assert len(logs) == len(set(logs))
    shown = table()
    assert all(f"{c.logged:,}" in shown for c in CASES)
    # each case is planned once in the run (error is cached): the table and README's copy re-plan nothing
    assert error.cache_info().currsize == len(CASES)


def test_readme_shows_the_current_table() -> None:
    # README's "From the config alone" table is this table, as the code prints it today: a case added, a gap closed
    # or a figure moved makes README stale, and this test says so (regenerate: python -m tests.runbook.config_alone)
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert table() in readme
