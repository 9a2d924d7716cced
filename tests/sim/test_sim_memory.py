"""Memory bounded by the pool, not by the trace (issue 15): the one-pass LRU curve and occupancy mode.

The curve tracks only the ``max(capacities)`` most recent blocks in a Fenwick tree that is renumbered when it
fills; these tests shrink the tree so that renumbering and forgetting happen on small traces, and check the curve
against leaf-LRU replays at every capacity.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.trace import Request
from tests.sim.test_sim_properties import ALL, BS, chained_traces


@given(reqs=chained_traces(), caps=st.lists(st.integers(1, 12), min_size=1, max_size=4), last50=st.booleans())
def test_curve_with_renumbering_equals_replays(reqs: list[Request], caps: list[int], last50: bool) -> None:
    # a tree of 2 * max(caps) slots at least (rounded up to a power of two): it renumbers every few requests and
    # forgets every block deeper than the largest capacity; the hits must still be leaf-LRU's at every capacity
    win = ideal.Window("last50", len(reqs) // 2) if last50 else ALL
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ideal, "_TREE_BITS", 1)
        curve = ideal.lru_curve(reqs, block_tokens=BS, capacities=caps, window=win)
    bound = ideal.reuse_bound(reqs, block_tokens=BS, window=win)
    assert curve.unbounded_hit_tokens == bound.hit_tokens
    for p in curve.points:
        r = ideal.replay(reqs, block_tokens=BS, capacity=p.capacity_units, policy="lru", window=win, check=True)
        assert (p.hit_tokens, p.hit_units) == (r.stats.hit_tokens, r.stats.hit_units)


def _fresh(n: int) -> Iterator[Request]:
    """n requests of 4 new 4-token blocks each, then the first request again: 4n distinct blocks."""
    for i in range(n):
        yield Request(i, 0, 16, 0, [4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3], i + 1)
    yield Request(n, 0, 16, 0, [0, 1, 2, 3], n + 1)


def test_curve_memory_does_not_grow_with_the_trace() -> None:
    # 2,000 requests, 8,000 distinct blocks, capacities up to 100 blocks. The old curve kept a dict entry per
    # distinct block (about 100 B each with its ints: 800 KB) and a Python list of 8 B per reference; now: a tree
    # of 2**8 = 256 slots here (2 arrays of 8-byte cells: 4 KB; 2**16 slots by default, a fixed 1 MiB), the 100
    # most recent blocks (about 10 KB) and one byte per block id seen (8 KB)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ideal, "_TREE_BITS", 8)
        tracemalloc.start()
        curve = ideal.lru_curve(_fresh(2_000), block_tokens=4, capacities=[10, 100], window=ALL)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    # the last request's blocks were seen (the unbounded pool hits all 16 tokens) but are 8,000 deep: no hit
    assert curve.unbounded_hit_tokens == 16
    assert [p.hit_tokens for p in curve.points] == [0, 0]
    assert peak < 100_000, f"{peak:,} B"
