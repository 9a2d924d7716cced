"""``IdSet``: the curves' record of every block id listed, compact whatever the ids' magnitude (issue 31).

A fleet trace with hashed block ids (64-bit values, as an engine's block hashes are) lists 11.7 million distinct
ids at 770K requests; in a Python set they cost about 110 B each (1.3 GiB for the curves). ``IdSet`` keeps an id
in 8 bytes (plus the arrays' 1/16 headroom): these tests check it answers exactly as a set does, on the ids that
make it work hardest, and that the curves' memory with hashed ids is bounded by the distinct ids, not their size.
"""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.idset import _MASK, _MULT, IdSet
from kvplan.sim.trace import Request, open_trace
from tests.sim.test_sim_fifo_curve import loose_traces
from tests.sim.test_sim_properties import chained_traces

_INV = pow(_MULT, -1, 1 << 64)


def _with_product(x: int) -> int:
    """The id whose product with ``_MULT`` (mod 2**64) is ``x``: to build ids that share a bucket and top bits."""
    return x * _INV & _MASK


@given(st.lists(st.one_of(st.integers(0, 2**70), st.integers(0, 40)), max_size=60))
def test_answers_as_a_set_does(ids: list[int]) -> None:
    ref: set[int] = set()
    s = IdSet()
    for b in ids:
        assert (b in s) == (b in ref)
        assert s.add(b) == (b not in ref)
        ref.add(b)
        assert b in s
        assert len(s) == len(ref)


@given(
    st.lists(st.one_of(st.integers(0, 2**70), st.integers(0, 40)), max_size=30),
    st.lists(st.one_of(st.integers(0, 2**70), st.integers(0, 40)), max_size=30),
    st.integers(0, 50),
)
def test_add_run_is_add_block_by_block_from_the_end(before: list[int], ids: list[int], below: int) -> None:
    # the reference: a set, ids taken from the end down to one below ``below`` or one already in (returned: the
    # index after it, 0 when the whole list went in); IdSet.add_run is that loop in one call (_cold_run's hashed ids)
    ref = set(before)
    s = IdSet()
    s.add_all(before)
    j = len(ids)
    while j and ids[j - 1] >= below and ids[j - 1] not in ref:
        ref.add(ids[j - 1])
        j -= 1
    assert s.add_run(ids, len(ids), below) == j
    assert len(s) == len(ref)
    assert all((b in s) == (b in ref) for b in [*before, *ids])


def test_ids_that_share_a_bucket_and_neighbour_each_other() -> None:
    # products 0x1234 << 50 | r: one bucket (the top 14 bits), stored values r next to each other and at the
    # bucket's ends, inserted out of order; an id is found only by its own value
    top = 0x1234 << 50
    rs = [5, (1 << 50) - 1, 0, 7777, 6]
    s = IdSet()
    for r in rs:
        assert s.add(_with_product(top | r))
    for r in range(10_000):
        assert (_with_product(top | r) in s) == (r in rs)
    assert _with_product((0x1233 << 50) | 5) not in s  # the same stored value in the bucket before
    assert s.add_all([_with_product(top | 7777), _with_product(top | 8), _with_product(top | 8)]) == 1
    assert len(s) == 6


def test_hashed_ids_in_about_eight_bytes_each() -> None:
    # 200,000 random 64-bit ids: 8 B each (1.6 MB); per bucket (16,384, about 12 ids each here) an array header
    # (64 B), its growth headroom (n/16 + 7 slots at most: 8 x 8 B) and malloc's 16 B; the slot list (128 KiB).
    # A Python set of the same ids is about 20 MB
    rng = random.Random(31)
    ids = [rng.getrandbits(64) for _ in range(200_000)]
    tracemalloc.start()
    s = IdSet()
    for b in ids:
        s.add(b)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(s) == len(set(ids))
    assert size < 200_000 * 8 + 16_384 * (64 + 8 * 8 + 16) + (128 << 10), f"{size:,} B"
    assert all(b in s for b in ids[::97])


def _hashed_fresh(n: int) -> list[Request]:
    """n requests of 4 new blocks each with 64-bit ids (sim_scale.py's hashed renaming), then the first again."""
    ids = [(x * 0x9E3779B97F4A7C15) % (1 << 62) + (1 << 32) for x in range(4 * n)]
    reqs = [Request(i, 0, 16, 0, ids[4 * i : 4 * i + 4], i + 1) for i in range(n)]
    return [*reqs, Request(n, 0, 16, 0, ids[:4], n + 1)]


def test_curves_with_hashed_ids_take_bytes_per_id_not_a_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2,000 requests, 8,000 distinct 64-bit ids. Before IdSet the byte map grew to _DENSE_IDS (32 MiB) on the
    # first id past it and the ids went to a set (about 110 B each); now the map stays empty and the ids take
    # about 8 B each, plus the 16,384 bucket slots (128 KiB) and an array header per bucket used
    monkeypatch.setattr(ideal, "_TREE_BITS", 8)  # the LRU curve's tree: 2**8 slots here, 2**16 (1 MiB) by default
    reqs = _hashed_fresh(2_000)
    for curve_of in (ideal.lru_curve, ideal.fifo_curve):
        tracemalloc.start()
        curve = curve_of(iter(reqs), block_tokens=4, capacities=[10, 100], window=ideal.Window("all", 0))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert [p.hit_tokens for p in curve.points] == [0, 0]  # the last request's blocks are 8,000 deep
        assert peak < 3 << 20, f"{curve_of.__name__}: {peak:,} B"


@given(st.lists(st.integers(2**32, 2**64 - 1), max_size=60))
def test_the_inexact_set_never_misses_an_id_it_was_given(ids: list[int]) -> None:
    s = IdSet(exact=False)
    for k, b in enumerate(ids):
        s.add(b)
        assert all(x in s for x in ids[: k + 1])


def _coarse() -> IdSet:
    """An inexact set that keeps 2 of the 50 bits: most ids never added are taken as listed."""
    s = IdSet(exact=False)
    s._drop = 48
    return s


@given(st.one_of(chained_traces(), loose_traces()), st.lists(st.integers(0, 25), min_size=1, max_size=5))
def test_fifo_curve_is_the_same_when_many_blocks_are_wrongly_taken_as_listed(
    reqs: list[Request], caps: list[int]
) -> None:
    # the FIFO curve's record of listed blocks may say "listed" for a block that is not (IdSet(exact=False));
    # that block then stays in the request's looked-up part and is missed in each cache, so no hit changes. Here
    # almost every id past the byte map is taken as listed, and the curve must still equal the one-capacity FIFO
    # replays (ideal.replay: an OrderedDict, block by block, no shortcut)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ideal, "_DENSE_IDS", 2)
        mp.setattr(ideal, "IdSet", lambda exact=True: IdSet() if exact else _coarse())
        curve = ideal.fifo_curve(reqs, block_tokens=4, capacities=caps, window=ideal.Window("all", 0))
    for p in curve.points:
        r = ideal.replay(reqs, block_tokens=4, capacity=p.capacity_units, policy="fifo", window=ideal.Window("all", 0))
        assert (p.hit_tokens, p.hit_units) == (r.stats.hit_tokens, r.stats.hit_units)
        assert p.filled == (r.filled_at is not None)


def _rename(r: Request) -> Request:
    """sim_scale.py's hashed renaming (one to one, every id at least 2**32), as an engine's block hashes would be."""
    assert r.blocks is not None
    blocks = [(x * 0x9E3779B97F4A7C15) % (1 << 62) + (1 << 32) for x in r.blocks]
    return Request(r.index, r.arrival_us, r.input_tokens, r.output_tokens, blocks, r.line, r.file)


@pytest.mark.parametrize("name", ["conversation_trace.jsonl", "synthetic_trace.jsonl"])
def test_curves_on_the_shared_traces_are_the_same_with_hashed_ids(traces: Path, name: str) -> None:
    # the ids renamed one to one change no hit: every point (hit tokens and blocks, fill verdicts), the unbounded
    # pool's hits and the distinct blocks before the window, under leaf-LRU and FIFO, last 50 % measured
    path = traces / "mooncake" / name
    if not path.is_file():
        pytest.skip(f"no {path}")
    trace = open_trace(path)
    reqs = list(trace.read())
    window = ideal.Window("last50", len(reqs) // 2)
    caps = [round(400 * (100_000 / 400) ** (i / 9)) for i in range(10)]  # sim_scale.py's CURVE_BLOCKS
    for curve_of in (ideal.lru_curve, ideal.fifo_curve):
        dense = curve_of(iter(reqs), block_tokens=trace.block_tokens, capacities=caps, window=window)
        hashed = curve_of(map(_rename, reqs), block_tokens=trace.block_tokens, capacities=caps, window=window)
        assert hashed.points == dense.points, curve_of.__name__
        assert hashed.unbounded_hit_tokens == dense.unbounded_hit_tokens
        assert hashed.distinct_before_window == dense.distinct_before_window
