"""Properties of the per-DP-rank trace replay behind `kvplan fit --trace` (kvplan.sim.ranks).

- One rank, any router: the stepped multi-rank driver gives exactly the single-pool occupancy replay
  (``replay_occupancy``: the same hits, peak, preemptions, waits, finish time), for both engines' pools.
- Any ranks: every request lands on one rank; a rank never holds more pages than its pool; the hit tokens never
  exceed the reuse bound (``kvplan.plan.fit_trace.reuse_bound``) the fit uses to skip replays; round-robin puts
  request k on rank k mod N.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from kvplan.plan.fit_trace import reuse_bound
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Pool
from kvplan.sim.radix import RadixPool
from kvplan.sim.ranks import ROUTERS, replay_ranks
from kvplan.sim.replay import Service, replay_occupancy
from kvplan.sim.trace import Request

BLOCK = 64


@dataclass(frozen=True)
class Row:
    gap_us: int
    prefix: int
    """Which earlier request's blocks this one starts with (-1: none)."""
    shared: int
    own: int
    partial: int
    output: int


rows = st.lists(
    st.builds(
        Row,
        gap_us=st.integers(0, 40_000),
        prefix=st.integers(-1, 6),
        shared=st.integers(0, 4),
        own=st.integers(0, 4),
        partial=st.integers(0, BLOCK - 1),
        output=st.integers(0, 6),
    ),
    min_size=1,
    max_size=14,
)


def build(rs: list[Row]) -> list[Request]:
    """Requests with prefix-chained block ids: a block id names its whole prefix, as the readers give them."""
    out: list[Request] = []
    chains: list[list[int]] = []
    names: dict[tuple[int, ...], int] = {}
    t = 0
    for i, r in enumerate(rs):
        t += r.gap_us
        base = chains[r.prefix % len(chains)][: r.shared] if r.prefix >= 0 and chains else []
        ids = list(base)
        path = tuple(ids)
        for k in range(r.own):
            path = (*path, 1_000 * i + k)
            ids.append(names.setdefault(path, len(names) + 1))
        tokens = len(ids) * BLOCK + r.partial
        if tokens == 0:
            tokens, ids = 1, []  # one token, no whole block
        blocks = ids + ([len(names) + 10_000 + i] if r.partial else [])  # ceil listing: the partial block last
        chains.append(ids)
        out.append(Request(i, t, tokens, r.output, blocks, i + 1))
    return out


def pools(engine: str, n: int, pages: int, page: int) -> list[Pool]:
    return [RadixPool(pages, page) if engine == "sglang" else BlockPool(pages, page) for _ in range(n)]


@given(rows, st.sampled_from(("sglang", "vllm")), st.integers(4, 40), st.sampled_from((16, 32, 64)),
       st.integers(1, 6), st.sampled_from(ROUTERS))  # fmt: skip
def test_one_rank_is_the_single_pool_replay(rs: list[Row], engine: str, pages: int, page: int, limit: int,
                                            router: str) -> None:  # fmt: skip
    reqs = build(rs)
    svc = Service(10_000, 40_000, limit)
    (one,), stop = replay_ranks(reqs, pools(engine, 1, pages, page), lambda: Paging(BLOCK, page), service=svc,
                                router=router)  # fmt: skip
    ref = replay_occupancy(reqs, pools(engine, 1, pages, page)[0], Paging(BLOCK, page), service=svc,
                           window=Window("all", 0))  # fmt: skip
    got, occ, rocc = one.result, one.result.occupancy, ref.occupancy
    assert stop is None and occ is not None and rocc is not None
    assert (got.stats.hit_tokens, got.peak_used_units, got.too_long, got.input_tokens, got.evictions) == (
        ref.stats.hit_tokens, ref.peak_used_units, ref.too_long, ref.input_tokens, ref.evictions,
    )  # fmt: skip
    assert (occ.preemptions, list(occ.waits_us), occ.makespan_us, occ.completed, occ.peak_running) == (
        rocc.preemptions, list(rocc.waits_us), rocc.makespan_us, rocc.completed, rocc.peak_running,
    )  # fmt: skip


@given(rows, st.sampled_from(("sglang", "vllm")), st.integers(4, 40), st.sampled_from((16, 64, 128)),
       st.integers(1, 4), st.sampled_from(ROUTERS))  # fmt: skip
def test_ranks_partition_the_trace_and_stay_under_the_bound(rs: list[Row], engine: str, pages: int, page: int,
                                                            n: int, router: str) -> None:  # fmt: skip
    reqs = build(rs)
    results, stop = replay_ranks(reqs, pools(engine, n, pages, page), lambda: Paging(BLOCK, page),
                                 service=Service(10_000, 40_000, 8), router=router)  # fmt: skip
    assert stop is None
    assert sum(r.requests for r in results) == len(reqs)
    if router == "round_robin":
        assert [r.requests for r in results] == [len(range(k, len(reqs), n)) for k in range(n)]
    assert all(r.peak_held_pages <= pages for r in results)
    spec = SimpleNamespace(compact=_Compact(reqs), block_tokens=BLOCK, bounds={})
    bound = reuse_bound(spec, n, router)  # type: ignore[arg-type]
    assert sum(r.result.stats.hit_tokens for r in results) <= bound


class _Compact:
    """The arrays of a CompactTrace that the reuse bound reads."""

    def __init__(self, reqs: list[Request]) -> None:
        self.has_blocks = True
        self.ids = [b for r in reqs for b in (r.blocks or [])]
        self.starts = [0, *accumulate(len(r.blocks or []) for r in reqs)]
        self.input = [r.input_tokens for r in reqs]

    def __len__(self) -> int:
        return len(self.input)
