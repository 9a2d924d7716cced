"""The occupancy replay's fast paths (issue 15) against the plain step-by-step replay they stand for.

``replay_occupancy`` runs one loop with the common steps written out: a running request's next page, settled when
nothing waits by a short sample that counts one page more held; a sample that loses to its timeline bucket, the
bucket's bounds kept between samples; the pool's free pages no longer asked once it was seen full; the pages held
kept between a step's sample and the next step's clock advance. The reference here drives the same
``_Occupancy`` through its step methods (``arrive``, ``handle_event``, ``settle``), as a multi-rank driver
(``kvplan.sim.ranks``) does, with the clock advance and the sample as they were before (held pages asked of the
pool at every advance; every sample built and given to ``Timeline.add``). Every figure, the timeline included,
must be equal on random prefix-chained traces with overlapping requests, preemptions, running-request limits,
pages of 1, 2 and 4 tokens (a grow every token or two), both engines (vLLM's block pool and its chunked form),
every SGLang eviction policy, and timelines of 2 and 5 points (buckets merging while the replay runs).

The SGLang radix pool's inserts start from the node a request holds (its path refreshed bottom-up) and its walks
read the request's keys up to an end index instead of a copy; they are checked against the pool that walks every
insert down from the root over a copy.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim import replay
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq
from kvplan.sim.radix import POLICIES, RadixPool
from kvplan.sim.registry import engine_pool
from kvplan.sim.replay import TIMELINE_POINTS, Service, replay_occupancy, replay_order
from kvplan.sim.trace import Request
from tests.sim.test_sim_properties import ALL, BS, _result, chained_traces


def _advance_asking_the_pool(self: Any, t: int) -> None:
    dt = t - self.last_t
    if dt > 0:
        self.occ.queue_area += len(self.waiting) * dt
        self.occ.used_area += self.pool.held_pages() * dt
        self.last_t = t
    self.now = t


def _sample_every_time(self: Any) -> None:
    pool = self.pool
    free = pool.free_pages()
    self.peak_used = max(self.peak_used, pool.pages - free)
    if self.filled_at is None and (free == 0 or pool.evictions):
        self.filled_at = self.arrived - 1
    occ = self.occ
    occ.max_queue = max(occ.max_queue, len(self.waiting))
    occ.peak_running = max(occ.peak_running, len(self.running))
    self.timeline.add((self.now, len(self.running), len(self.waiting), pool.held_pages(), pool.cached_pages()))


def _stepped(reqs: list[Request], pool: Any, paging: Paging, svc: Service) -> dict[str, Any]:
    """The replay one step at a time through the step methods (the loop ``run`` had before it was written out)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replay._Occupancy, "_advance", _advance_asking_the_pool)
        m.setattr(replay._Occupancy, "_sample", _sample_every_time)
        sim = replay._Occupancy(pool, paging, svc, ALL, None)
        it = iter(reqs)
        nxt = next(it, None)
        while nxt is not None or sim.events or sim.waiting:
            t_event = sim.next_event_us()
            if nxt is not None and (t_event is None or nxt.arrival_us <= t_event):
                sim.arrive(nxt)
                nxt = next(it, None)
            elif t_event is not None:
                if not sim.handle_event():
                    continue
            else:
                assert not sim.running
            sim.settle()
        return _result(sim.result())


POOLS = [(eng, eagle, "lru") for eng in ("v", "c") for eagle in (False, True)]
POOLS += [("s", eagle, p) for p in POLICIES for eagle in (False, True)]
"""(engine, EAGLE, policy): ``v`` vLLM's BlockPool, ``c`` the pool ``engine_pool`` picks for vLLM (ChunkPool when a
trace block is several pages), ``s`` SGLang's radix pool."""


@given(
    chained_traces(),
    st.integers(2, 40),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([None, 1, 3]),
    st.sampled_from(POOLS),
    st.sampled_from([2, 5, TIMELINE_POINTS]),
    st.sampled_from([(1_000, 500), (200, 3_000), (1_000_000, 1)]),
    st.sampled_from([1, 300]),
)
def test_fast_loop_equals_the_stepped_replay(
    reqs: list[Request],
    pages: int,
    page: int,
    limit: int | None,
    kind: tuple[str, bool, str],
    points: int,
    speeds: tuple[int, int],
    squeeze: int,
) -> None:
    # 1,000 prefill tokens/s and 0.5 ms a token against arrivals up to 3 ms apart overlap requests and preempt
    # them when the pool runs out; 200 tokens/s and 3 ms a token pile them up; 1 µs a token makes the pages of
    # several decodes due at the same microseconds (events tied in time, ordered by when they were scheduled).
    # Arrivals squeezed 300-fold (0-10 µs apart) with 1 µs a token put samples on every microsecond, so on the
    # timeline buckets' bounds (power-of-two widths from the first sample)
    eng, eagle, policy = kind
    svc = Service(speeds[0], speeds[1], limit)
    reqs = [Request(r.index, r.arrival_us // squeeze, r.input_tokens, r.output_tokens, r.blocks, r.line) for r in reqs]

    def pool(check: bool) -> Any:
        if eng == "v":
            return BlockPool(pages, page, eagle_drop=eagle, check=check)
        if eng == "c":
            return engine_pool("vllm", pages, page, Paging(BS, page), eagle=eagle, check=check)
        return RadixPool(pages, page, policy=policy, eagle=eagle, check=check)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(replay, "TIMELINE_POINTS", points)
        # not in debug mode: the loop's shortest path (a page taken, nothing waiting) is skipped in debug mode
        fast = _result(replay_occupancy(reqs, pool(False), Paging(BS, page), service=svc, window=ALL))
        stepped = _stepped(reqs, pool(True), Paging(BS, page), svc)
    assert fast == stepped
    assert 1 <= len(fast["occupancy"]["timeline"]) <= points


def test_the_reference_sees_preemptions_and_merged_buckets() -> None:
    # the comparison above is only as good as its cases. A pool of 10 one-token pages and 3 requests of 4 input
    # + 5 output tokens (9 pages each at the end, so each fits alone) arriving together: A and B take 4 + 4 pages,
    # C waits (2 free < 4); A and B decode a token (a page) at a time, take the last 2 free pages and then one
    # of them needs an 11th: the newest running request is preempted. A 2-point timeline merges its buckets
    # (the run spans milliseconds against a first bucket width of 1 µs).
    reqs = [Request(i, 0, 4, 5, [10 * i + 1], i + 1) for i in range(3)]
    svc = Service(1_000, 500, None)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replay, "TIMELINE_POINTS", 2)
        fast = replay_occupancy(reqs, RadixPool(10, 1), Paging(BS, 1), service=svc, window=ALL)
        stepped = _stepped(reqs, RadixPool(10, 1, check=True), Paging(BS, 1), svc)
    o = fast.occupancy
    assert o is not None
    assert o.preemptions >= 1 and o.completed == 3 and o.max_queue >= 1 and fast.too_long == 0
    assert len(o.timeline) <= 2 and o.makespan_us > 1_000
    assert _result(fast) == stepped


class _RadixWalkingFromTheRoot(RadixPool):
    """The radix pool as it was: every insert and a commit's re-lock walk down from the root, key by key, over a
    copy of the keys they take (no end index into the sequence's own list)."""

    def match(self, keys: list[int], end: int | None = None) -> Any:
        return super().match(keys[:end])

    def insert(self, keys: list[int], start: Any = None, at: int = 0, end: int | None = None) -> Any:
        return super().insert(keys[:end])

    def _touch_path(self, node: Any, now: int, touched: list[Any]) -> None:
        m, end = self._walk(self._path(node), now, touched, False)
        assert end is node and m == len(self._path(node))


@given(chained_traces(), st.integers(2, 40), st.sampled_from([1, 2, 4]), st.sampled_from(POLICIES), st.booleans())
def test_radix_walks_up_from_the_held_node_as_down_from_the_root(
    reqs: list[Request], pages: int, page: int, policy: str, eagle: bool
) -> None:
    # a request's insert (commit, release) refreshes the path to the node it holds bottom-up and matches only
    # what lies past it; the commit re-locks the node its insert ended at. Every result (hits, evictions, the
    # timeline) must be the walk-from-the-root pool's, in both modes, with splits above held nodes (chained
    # traces share prefixes of every length) and every eviction order
    svc = Service(1_000, 500, None)
    for cls in (RadixPool, _RadixWalkingFromTheRoot):
        order = _result(
            replay_order(reqs, cls(pages, page, policy=policy, eagle=eagle, check=True), Paging(BS, page), window=ALL)
        )
        occ = _result(
            replay_occupancy(
                reqs,
                cls(pages, page, policy=policy, eagle=eagle, check=True),
                Paging(BS, page),
                service=svc,
                window=ALL,
            )
        )
        if cls is RadixPool:
            first = (order, occ)
    assert first == (order, occ)


def test_a_walk_stops_at_its_end_index_inside_a_longer_node() -> None:
    # walks read the request's own key list up to an end index (no copy), so a node that runs past the end must
    # not match whole even when the list goes on with the same keys. EAGLE, 4-token pages: A (13 tokens, keys
    # 1, 2, 3) inserts (13 - 1) // 4 = 3 pages as one node [1, 2, 3]; B (12 tokens, the same 3 keys) may match
    # at most (12 - 1) // 4 = 2 pages: the node is split after 2, and B hits 2 pages, not 3
    pool = RadixPool(10, 4, eagle=True, check=True)
    a = Seq(Request(0, 0, 13, 0, None, 1), [1, 2, 3], True)
    assert pool.start(a)
    pool.release(a)
    b = Seq(Request(1, 0, 12, 0, None, 2), [1, 2, 3], True)
    assert pool.start(b)
    assert b.hit_pages == 2
    pool.release(b)
