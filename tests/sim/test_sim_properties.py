"""Hypothesis: reuse bound, LRU inclusion (one pass = replays), engines at an unbounded pool, determinism."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import ideal
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.radix import RadixPool
from kvplan.sim.replay import Service, replay_occupancy, replay_order
from kvplan.sim.trace import Request

BS = 4
ALL = Window("all", 0)


def chained_ids(draw: st.DrawFn, paths: list[list[int]]) -> list[int]:
    """The next request's prefix-chained ids: a prefix of an earlier request's (``paths``) and new ids after every
    id so far; appended to ``paths``."""
    prefix: list[int] = []
    if paths and draw(st.booleans()):
        base = draw(st.sampled_from(paths))
        prefix = base[: draw(st.integers(0, len(base)))]
    fresh = 1 + max((max(p) for p in paths if p), default=-1)
    ids = prefix + list(range(fresh, fresh + draw(st.integers(0 if prefix else 1, 5))))
    paths.append(ids)
    return ids


@st.composite
def chained_traces(draw: st.DrawFn) -> list[Request]:
    """Requests whose block ids are prefix-chained: each extends a prefix of an earlier one with new ids."""
    paths: list[list[int]] = []
    out: list[Request] = []
    t = 0
    for i in range(draw(st.integers(1, 25))):
        ids = chained_ids(draw, paths)
        tokens = len(ids) * BS - draw(st.integers(0, BS - 1))  # Mooncake listing: the last block may be partial
        t += draw(st.integers(0, 3_000))
        out.append(Request(i, t, tokens, draw(st.integers(0, 9)), ids, i + 1))
    return out


def _expected_hits(reqs: list[Request], whole: Any) -> int:
    """Pages hit with an unbounded pool: leading blocks cached before, at most ``whole(tokens)`` of them.

    Engines cache whole pages only: a block seen only as a request's partial last block is never cached."""
    seen: set[int] = set()
    total = 0
    for r in reqs:
        assert r.blocks is not None
        h = 0
        for b in r.blocks:
            if b not in seen:
                break
            h += 1
        total += min(h, whole(r.input_tokens))
        seen.update(r.blocks[: r.input_tokens // BS])
    return total


@given(chained_traces())
def test_unbounded_pool_hits_the_reuse_bound(reqs: list[Request]) -> None:
    bound = ideal.reuse_bound(reqs, block_tokens=BS, window=ALL)
    r = ideal.replay(reqs, block_tokens=BS, capacity=None, policy="lru", window=ALL)
    distinct = len({b for x in reqs for b in x.blocks or []})
    curve = ideal.lru_curve(reqs, block_tokens=BS, capacities=[distinct], window=ALL)
    assert r.stats.hit_tokens == bound.hit_tokens == curve.unbounded_hit_tokens == curve.points[0].hit_tokens
    # engines, page = block, a pool that never evicts: whole pages only; vLLM also caps at length - 1
    pages = sum(-(-x.input_tokens // BS) for x in reqs)
    sg = replay_order(reqs, RadixPool(pages, BS, check=True), Paging(BS, BS), window=ALL)
    vl = replay_order(reqs, BlockPool(pages, BS, check=True), Paging(BS, BS), window=ALL)
    assert sg.evictions == vl.evictions == 0
    assert sg.stats.hit_units == _expected_hits(reqs, lambda n: n // BS)
    assert vl.stats.hit_units == _expected_hits(reqs, lambda n: max(n - 1, 0) // BS)


@given(chained_traces(), st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_a_larger_pool_never_hits_less(reqs: list[Request], caps: list[int]) -> None:
    """LRU stack semantics: the one-pass curve is monotone and equals a leaf-LRU replay at every capacity."""
    curve = ideal.lru_curve(reqs, block_tokens=BS, capacities=caps, window=ALL)
    hits = [p.hit_tokens for p in curve.points]
    assert hits == sorted(hits)
    for p in curve.points:
        r = ideal.replay(reqs, block_tokens=BS, capacity=p.capacity_units, policy="lru", window=ALL, check=True)
        assert r.stats.hit_tokens == p.hit_tokens
    # FIFO has no such property, but its one-read curve must equal its replays
    fifo = ideal.fifo_curve(reqs, block_tokens=BS, capacities=caps, window=ALL)
    for p in fifo.points:
        r = ideal.replay(reqs, block_tokens=BS, capacity=p.capacity_units, policy="fifo", window=ALL)
        assert (r.stats.hit_tokens, r.filled_at is not None) == (p.hit_tokens, p.filled)
        assert not p.filled_before_window  # nothing runs before the window under --window all


def _result(r: Any) -> dict[str, Any]:
    d = asdict(r)
    d["stats"]["lengths"] = list(r.stats.lengths)
    if r.occupancy is not None:
        d["occupancy"]["waits_us"] = list(r.occupancy.waits_us)
    return d


@given(chained_traces(), st.integers(2, 30))
def test_replaying_twice_gives_identical_results(reqs: list[Request], pages: int) -> None:
    svc = Service(1_000, 500)
    for _ in range(2):
        runs = [
            _result(ideal.replay(reqs, block_tokens=BS, capacity=pages, policy="fifo", window=ALL)),
            _result(replay_order(reqs, RadixPool(pages, BS, policy="lfu"), Paging(BS, BS), window=ALL)),
            _result(replay_occupancy(reqs, RadixPool(pages, BS, check=True), Paging(BS, BS), service=svc, window=ALL)),
            _result(replay_occupancy(reqs, BlockPool(pages, BS, check=True), Paging(BS, BS), service=svc, window=ALL)),
        ]
        if _ == 0:
            first = runs
    assert runs == first
