"""The FIFO curve (one read, a set and an insertion deque per capacity, whole-request updates) against the
one-capacity FIFO replay (an OrderedDict, block by block), at every capacity.

The curve takes a request's new blocks and the entries they displace all at once, and goes block by block only
when a displaced entry is a cached block of the request that comes after one of its insertions, when the request
alone overflows the cache, or when a block id repeats within the request. The request's trailing run of blocks no
earlier request listed is found once per request (a byte per id below ``_DENSE_IDS``, a set above) and not looked
up per capacity. The strategies below reach every one of these paths: small capacities against long requests, ids
drawn from a small range (so a request often lists blocks that sit at the cache's old end, sometimes the same id
twice, and new ids before listed ones), and the byte map cut to 0..6 ids (so some or all ids go to the set, and a
request can fail part way through the map).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.ideal import Window
from kvplan.sim.idset import IdSet
from kvplan.sim.trace import Request
from tests.sim.test_sim_properties import ALL, BS, chained_traces


@st.composite
def loose_traces(draw: st.DrawFn) -> list[Request]:
    """Requests whose ids come from 0..11 in any order, repeats within a request allowed (not prefix-chained)."""
    out = []
    for i in range(draw(st.integers(1, 30))):
        ids = draw(st.lists(st.integers(0, 11), min_size=1, max_size=9))
        tokens = len(ids) * BS - draw(st.integers(0, BS - 1))
        out.append(Request(i, i, tokens, 0, ids, i + 1))
    return out


def _check(reqs: list[Request], caps: list[int], window: Window) -> None:
    curve = ideal.fifo_curve(reqs, block_tokens=BS, capacities=caps, window=window)
    assert [p.capacity_units for p in curve.points] == sorted(set(caps))
    for p in curve.points:
        r = ideal.replay(reqs, block_tokens=BS, capacity=p.capacity_units, policy="fifo", window=window)
        assert (p.hit_tokens, p.hit_units) == (r.stats.hit_tokens, r.stats.hit_units), p.capacity_units
        assert p.filled == (r.filled_at is not None), p.capacity_units
        assert p.filled_before_window == r.filled_before_window, p.capacity_units
    assert curve.measured_tokens == r.stats.measured_tokens


@given(
    st.one_of(chained_traces(), loose_traces()),
    st.lists(st.integers(0, 25), min_size=1, max_size=6),
    st.integers(0, 20),
    st.sampled_from([0, 3, 6, 1 << 25]),
)
def test_fifo_curve_equals_fifo_replays(reqs: list[Request], caps: list[int], start: int, dense: int) -> None:
    # the window starts anywhere (a later start measures fewer requests; filled_before_window then means something)
    window = Window("last50", min(start, len(reqs)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ideal, "_DENSE_IDS", dense)
        _check(reqs, caps, window)


def test_each_update_path_agrees_on_a_worked_example() -> None:
    # capacity 3, block FIFO, 4-token blocks.
    # r0 [1, 2]: nothing cached (h = 0); 1, 2 go in -> order 1, 2.
    # r1 [1, 3, 4]: 1 is cached (h = 1: 4 tokens); 3, 4 are new, 2 + 2 - 3 = 1 entry displaced, the oldest (1),
    #   which r1 lists: block by block. 1 hits, 3 goes in (3 blocks), 4 evicts 1 -> {2, 3, 4}.
    # r2 [3, 5]: 3 cached (h = 1: 4 tokens); 5 new, 3 + 1 - 3 = 1 displaced (2, not r2's): at once -> {3, 4, 5}.
    # r3 [1, 3]: 1 not cached (h = 0); 1 new, one displaced (3, the oldest), which r3 lists: block by block. 1
    #   evicts 3, and then 3 is no longer cached: it goes in again and evicts 4 -> {5, 1, 3}. All at once would
    #   have kept {4, 5, 1}: this is why the curve goes block by block there.
    # Hits: 4 + 4 + 0 = 8 tokens, 2 blocks.
    reqs = [
        Request(0, 0, 8, 0, [1, 2], 1),
        Request(1, 0, 12, 0, [1, 3, 4], 2),
        Request(2, 0, 8, 0, [3, 5], 3),
        Request(3, 0, 8, 0, [1, 3], 4),
    ]
    curve = ideal.fifo_curve(reqs, block_tokens=BS, capacities=[3], window=ALL)
    assert (curve.points[0].hit_tokens, curve.points[0].hit_units) == (8, 2)
    _check(reqs, [3], ALL)
    # one more request [4, 5]: 4 was evicted block by block in r3 (h = 0), 5 is cached -> no hit; had r3 gone at
    # once, 4 would still be cached and hit (4 tokens)
    more = [*reqs, Request(4, 0, 8, 0, [4, 5], 5)]
    assert ideal.fifo_curve(more, block_tokens=BS, capacities=[3], window=ALL).points[0].hit_tokens == 8
    _check(more, [3], ALL)


def test_a_displaced_block_passed_before_the_first_insertion_goes_at_once() -> None:
    # capacity 3, block FIFO, 4-token blocks.
    # r0 [1, 2, 3]: nothing cached; all go in -> order 1, 2, 3 (full).
    # r1 [1, 4]: 1 cached (h = 1: 4 tokens); 4 is new and displaces the oldest entry, 1, the request's own block.
    #   Block by block, 1 was already passed (a hit) before 4 went in: 4 evicts 1 -> {2, 3, 4}. The curve takes
    #   this at once (only a cached block *after* an insertion needs block by block), with the same cache.
    # r2 [1, 5]: 1 was evicted (h = 0); 1 and 5 go in, evicting 2 and 3 -> {4, 1, 5}.
    # r3 [4, 1]: both cached (h = 2: 8 tokens).
    # Hits: 4 + 0 + 8 = 12 tokens, 3 blocks. Had r1 kept 1 (say, evicting 2 instead), r2 would hit 4 more tokens.
    reqs = [
        Request(0, 0, 12, 0, [1, 2, 3], 1),
        Request(1, 0, 8, 0, [1, 4], 2),
        Request(2, 0, 8, 0, [1, 5], 3),
        Request(3, 0, 8, 0, [4, 1], 4),
    ]
    curve = ideal.fifo_curve(reqs, block_tokens=BS, capacities=[3], window=ALL)
    assert (curve.points[0].hit_tokens, curve.points[0].hit_units) == (12, 3)
    _check(reqs, [3], ALL)


def test_listed_run_finds_the_trailing_never_listed_blocks() -> None:
    # the byte map covers ids 0..7 (_DENSE_IDS lowered to 8); 8 and up go to the IdSet
    dense = bytearray()
    sparse = IdSet()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ideal, "_DENSE_IDS", 8)
        run = ideal._listed_run
        assert run([1, 2, 3], dense, sparse) == 0  # nothing listed before: the whole request
        assert run([1, 2, 4], dense, sparse) == 2  # 1, 2 listed by the first request; 4 is new
        # 5 is new but comes before 1 (listed): only the trailing 6 counts; 5 is marked all the same
        assert run([5, 1, 6], dense, sparse) == 2
        assert run([5], dense, sparse) == 1
        # a repeat ends the run at its later copy: 7 (last) joins and is marked, then 3 (listed) stops the scan,
        # so the run [7] has no repeat even though the request lists 7 twice
        assert run([7, 3, 7], dense, sparse) == 2
        # ids past the byte map: 9 and 10 go to the set, 2 is in the map
        assert run([2, 9, 10], dense, sparse) == 1
        assert run([9, 10, 11], dense, sparse) == 2
        assert len(sparse) == 3 and all(b in sparse for b in (9, 10, 11))
        assert [i for i in range(len(dense)) if dense[i]] == [1, 2, 3, 4, 5, 6, 7]


def test_belady_anomaly() -> None:
    # Belady, Nelson, Shedler (CACM 1969): FIFO on 1 2 3 4 1 2 5 1 2 3 4 5 faults 9 times with 3 frames and 10
    # with 4, so 12 - 9 = 3 and 12 - 10 = 2 hits; one block (4 tokens) a request, every request measured. The
    # larger pool hits less: no stack shortcut, one cache per capacity.
    reqs = [Request(i, i, BS, 0, [b], i + 1) for i, b in enumerate([1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5])]
    curve = ideal.fifo_curve(reqs, block_tokens=BS, capacities=[3, 4], window=ALL)
    assert [(p.hit_tokens, p.hit_units) for p in curve.points] == [(3 * BS, 3), (2 * BS, 2)]
    _check(reqs, [3, 4], ALL)


def test_a_request_expires_its_own_later_block() -> None:
    # block FIFO, 4-token blocks; a request hits the blocks it finds before it runs.
    # C = 1: r0 [1, 2, 3] leaves {3}; r1 [3, 3] finds 3 twice (2 blocks; no insertion); r2 [1, 2, 3] misses 1.
    # C = 2: r0 leaves {2, 3}; r1 hits 2 blocks; r2 misses 1, which evicts 2 -> {3, 1}; 2 then evicts 3, which
    #   was cached when r2 started but is gone at its turn (r2's own misses expired it) -> {1, 2}; 3 goes in
    #   again. Hits at both: 2 blocks, 8 tokens. Requests longer than the pool, and a repeat within one.
    reqs = [Request(0, 0, 12, 0, [1, 2, 3], 1), Request(1, 1, 8, 0, [3, 3], 2), Request(2, 2, 12, 0, [1, 2, 3], 3)]
    curve = ideal.fifo_curve(reqs, block_tokens=BS, capacities=[1, 2], window=ALL)
    assert [(p.hit_tokens, p.hit_units) for p in curve.points] == [(2 * BS, 2), (2 * BS, 2)]
    _check(reqs, [1, 2], ALL)
