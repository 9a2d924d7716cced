"""The LRU curve's Fenwick tree marks a request's dead times a run at a time (ideal._mark_runs): the tree must be
the one that marking each time alone builds, whatever the runs, the tree's size and what it held before."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal


def _point_marks(tree: list[int], size: int, times: list[int]) -> None:
    """The Fenwick point update, one time after another (what lru_curve did before runs)."""
    for t in times:
        j = t
        while j <= size:
            tree[j] += 1
            j += j & -j


@st.composite
def runs_in_a_tree(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    """A tree of 1..2**bits slots holding some earlier marks, and disjoint runs of distinct times to mark."""
    size = 1 << draw(st.integers(0, 9))
    before = draw(st.lists(st.integers(1, size), max_size=20))
    free = sorted(set(range(1, size + 1)))
    runs: list[int] = []
    at = 0
    while at < len(free) and draw(st.booleans()):
        at += draw(st.integers(0, 7))
        if at >= len(free):
            break
        lo = free[at]
        k = draw(st.integers(1, 40))
        hi = min(lo + k - 1, size)
        runs += (lo, hi)
        at = free.index(hi) + 2  # the next run starts past hi + 1: runs never touch (lru_curve joins them)
    return size, before, runs


@given(runs_in_a_tree())
def test_runs_mark_what_points_mark(case: tuple[int, list[int], list[int]]) -> None:
    size, before, runs = case
    fast = [0] * (size + 1)
    slow = [0] * (size + 1)
    _point_marks(fast, size, before)
    _point_marks(slow, size, before)
    times = [t for i in range(0, len(runs), 2) for t in range(runs[i], runs[i + 1] + 1)]
    assert ideal._mark_runs(fast, size, runs) == len(times)
    _point_marks(slow, size, times)
    assert fast == slow


def test_a_run_worked_by_hand() -> None:
    # 8 slots, times 3..6 marked. Node j covers (j - lowbit(j), j]: 3 covers {3}, 4 covers 1..4 (3, 4 of the run:
    # +2), 5 covers {5}, 6 covers 5..6 (+2), then hi = 6's path above it: 8 covers 1..8 (+4, all of the run)
    tree = [0] * 9
    assert ideal._mark_runs(tree, 8, [3, 6]) == 4
    assert tree == [0, 0, 0, 1, 2, 1, 2, 0, 4]
