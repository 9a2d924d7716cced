"""The LRU curve's Fenwick tree marks a request's dead times a run at a time (ideal._mark_runs): the tree must be
the one that marking each time alone builds, whatever the runs, the tree's size and what it held before."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.trace import Request
from tests.sim.test_sim_properties import ALL, BS


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


def test_small_ids_of_a_request_with_an_id_past_the_byte_map_are_still_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    # the byte map covers ids below _DENSE_IDS (4 here); request [9, 2] has an id past it. Before the fix the map
    # was not grown for that request, so id 2 went to the set; [3] then grew the map to 4 bytes and id 2's later
    # reference read the map (0: never seen) and stopped as cold. Only the last request, [2], starts with a block
    # listed before (by request 0): the reuse bound is that one block, 4 tokens, and the unbounded pool hits it
    monkeypatch.setattr(ideal, "_DENSE_IDS", 4)
    monkeypatch.setattr(ideal, "_TREE_BITS", 2)
    reqs = [Request(i, i, len(ids) * BS, 0, ids, i + 1) for i, ids in enumerate([[9, 2], [3], [1], [0], [2]])]
    bound = ideal.reuse_bound(reqs, block_tokens=BS, window=ALL)
    assert bound.hit_tokens == 1 * BS
    curve = ideal.lru_curve(reqs, block_tokens=BS, capacities=[1], window=ALL)
    assert curve.unbounded_hit_tokens == bound.hit_tokens
