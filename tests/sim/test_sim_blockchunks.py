"""The chunked vLLM pool (order mode, pages kept per trace block) against ``BlockPool``, page for page.

Both replay the same random traces whose blocks are ``k`` pages each (``Paging`` "expand"): prefix-chained ids
and loose ones (any id in any position, distinct within a request, as the readers require), lengths on and off
page and block boundaries (the ``length − 1`` cap recomputes a cached page: a duplicate holder), blocks the
request does not list (fresh page keys), the EAGLE drop, pools from one page up. Every result must be equal, and
after the replay the free queue must list the same page keys in the same order, with each key's holders at the
same queue positions in the same order (vLLM's first holder, then its duplicates).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim.blockchunks import ChunkPool
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq
from kvplan.sim.radix import RadixPool
from kvplan.sim.registry import engine_pool
from kvplan.sim.replay import Service, _page_keys, replay_occupancy, replay_order
from kvplan.sim.result import SimResult
from kvplan.sim.run import SimConfig
from kvplan.sim.trace import Request, Trace
from tests.sim.test_sim_properties import ALL, _result, chained_ids


@st.composite
def expand_traces(draw: st.DrawFn) -> tuple[list[Request], int, int]:
    """(requests, page tokens, pages per trace block)."""
    ps = draw(st.sampled_from([1, 2, 4]))
    k = draw(st.integers(2, 4))
    bt = ps * k
    loose = draw(st.booleans())
    paths: list[list[int]] = []
    out: list[Request] = []
    t = 0
    for i in range(draw(st.integers(1, 25))):
        if loose:
            ids = draw(st.lists(st.integers(0, 9), min_size=0, max_size=6, unique=True))
        else:
            ids = chained_ids(draw, paths)
        n = len(ids)
        # a Mooncake listing: n = tokens // bt (partial block unlisted) or n = ceil(tokens / bt)
        lo = max((n - 1) * bt + 1, 1)
        hi = (n + 1) * bt - 1
        tokens = draw(st.one_of(st.integers(lo, hi), st.sampled_from([max(n * bt, 1), max(n * bt - ps, 1)])))
        blocks = None if draw(st.integers(0, 19)) == 0 else ids
        t += draw(st.integers(0, 3_000))
        out.append(Request(i, t, tokens, draw(st.integers(0, 9)), blocks, i + 1))
    return out, ps, k


def _queue_and_holders(pool: BlockPool) -> tuple[list[int], dict[int, list[int]], list[int]]:
    free = pool._hashed_free()
    at = {b: i for i, (b, _) in enumerate(free)}
    holders = {key: [at[b]] + [at[x] for x in pool.dups.get(key, [])] for key, b in pool.cached.items()}
    return _canonical([key for _, key in free], holders)


def _canonical(keys: list[int], holders: dict[int, list[int]]) -> tuple[list[int], dict[int, list[int]], list[int]]:
    """Fresh keys (negative: no trace block) differ between the pools' numberings: compared by position only."""
    return (
        [key if key >= 0 else -1 for key in keys],
        {key: v for key, v in holders.items() if key >= 0},
        sorted(p for key, v in holders.items() if key < 0 for p in v),
    )


def _same_pools(ref: BlockPool, chunked: ChunkPool, a: SimResult, b: SimResult) -> None:
    assert _result(a) == _result(b)
    assert _queue_and_holders(ref) == _canonical(chunked.queue_keys(), chunked.holders())
    counts = (ref.free_pages(), ref.cached_pages(), ref.evictions)
    assert counts == (chunked.free_pages(), chunked.cached_pages(), chunked.evictions)


@given(expand_traces(), st.integers(1, 40), st.booleans())
def test_chunked_pool_is_the_block_pool_page_for_page(
    case: tuple[list[Request], int, int], pages: int, eagle: bool
) -> None:
    reqs, ps, k = case
    paging = Paging(ps * k, ps)
    assert paging.mode == "expand"
    ref = BlockPool(pages, ps, eagle_drop=eagle, check=True)
    chunked = ChunkPool(pages, ps, k, eagle_drop=eagle, check=True)
    a = replay_order(reqs, ref, paging, window=ALL)
    b = replay_order(reqs, chunked, Paging(ps * k, ps), window=ALL)
    _same_pools(ref, chunked, a, b)


@given(expand_traces(), st.integers(1, 40), st.booleans(), st.sampled_from([None, 1, 3]))
def test_chunked_pool_is_the_block_pool_in_occupancy_mode(
    case: tuple[list[Request], int, int], pages: int, eagle: bool, limit: int | None
) -> None:
    # 1,000 prefill tokens/s and 0.5 ms a token against arrivals up to 3 ms apart: requests overlap, share hit
    # pages (held by several), generate pages of their own, and are preempted when the pool runs out
    reqs, ps, k = case
    svc = Service(1_000, 500, limit)
    ref = BlockPool(pages, ps, eagle_drop=eagle, check=True)
    chunked = ChunkPool(pages, ps, k, eagle_drop=eagle, check=True)
    a = replay_occupancy(reqs, ref, Paging(ps * k, ps), service=svc, window=ALL)
    b = replay_occupancy(reqs, chunked, Paging(ps * k, ps), service=svc, window=ALL)
    _same_pools(ref, chunked, a, b)


def test_a_duplicate_holder_is_promoted_when_the_first_one_is_evicted() -> None:
    # 2-token pages, 4 pages a block. A: 8 tokens, block 7 (pages 28..31), all 4 cached. B: 8 tokens, block 7
    # again: the cap (8 - 1) // 2 = 3 leaves page 31 to recompute: a duplicate of A's page 31, queued after it
    ps, k = 2, 4
    reqs = [Request(0, 0, 8, 0, [7], 1), Request(1, 1, 8, 0, [7], 2)]
    pool = ChunkPool(8, ps, k, check=True)
    r = replay_order(reqs, pool, Paging(ps * k, ps), window=ALL)
    assert r.stats.hit_units == 3
    # queue, head first: A's page 31 (not hit, left in place), then B's run tail first: 31 (duplicate), 30..28
    assert pool.queue_keys() == [31, 31, 30, 29, 28]
    assert pool.holders()[31] == [0, 1]
    # C (2 fresh pages of block 9) needs 2 pages: 3 unhashed ones are free (8 - 5), so nothing is evicted;
    # D needs 4 more: 1 unhashed, then 3 evictions from the head: A's 31 (B's copy is promoted), B's 31, B's 30
    more = [Request(2, 2, 4, 0, [9], 3), Request(3, 3, 8, 0, [11], 4)]
    replay_order(more, pool, Paging(ps * k, ps), window=ALL)
    assert pool.evictions == 3
    assert 31 not in pool.holders() and pool.holders()[29] == [0]


def test_vllm_replays_use_the_chunked_pool_where_trace_blocks_are_whole_pages(tmp_path: Path) -> None:
    def pool(block: int, page: int, occupancy: bool) -> object:
        trace = Trace(tmp_path / "t.jsonl", "mooncake", block, ())
        return SimConfig(trace, "vllm", "lru", Window("all", 0), page, 100, occupancy=occupancy).pool()

    assert isinstance(pool(512, 64, False), ChunkPool)
    assert isinstance(pool(512, 64, True), ChunkPool)
    assert isinstance(engine_pool("vllm", 100, 64, Paging(512, 64)), ChunkPool)  # kvplan fit --trace
    assert isinstance(pool(64, 64, False), BlockPool)  # a page is a trace block: nothing to group
    assert isinstance(pool(64, 512, False), BlockPool)
    assert isinstance(engine_pool("sglang", 100, 64, Paging(512, 64)), RadixPool)


def test_a_pool_that_never_evicts_keeps_a_queue_the_size_of_what_it_caches() -> None:
    # 20,000 requests of the same 4 blocks (2 pages each, 8 tokens): every request after the first hits 7 pages
    # (cap (8 - 1) // 1 = 7) and leaves a dead queue entry where each hit chunk was; with a pool that never
    # evicts, the head never passes them: they are dropped once they outnumber the live pages (8) by 4,096
    reqs = [Request(i, i, 8, 0, [1, 2, 3, 4], i + 1) for i in range(20_000)]
    pool = ChunkPool(10**9, 1, 2, check=False)
    r = replay_order(reqs, pool, Paging(2, 1), window=ALL)
    assert r.stats.hit_units == 7 * 19_999
    assert len(pool.queue) - pool.qhead <= 2 * pool.cached_pages() + 4096
    pool.verify()


@given(st.lists(st.integers(1, 9), min_size=1, max_size=12), st.integers(0, 3), st.integers(0, 2))
def test_a_decoding_request_grows_as_in_the_block_pool(grows: list[int], unhashed: int, hit: int) -> None:
    # ChunkPool.grow takes the queue head's top pages inline when the head chunk keeps pages (issue 31's third
    # pass) and leaves the rest to _evict (a dead head, a head used up, more pages than it holds): after each grow
    # (refused when the pool has too few pages) the counts and the free queue, page key by page key, must be
    # BlockPool's (the holders too once the request is released). 1-token pages, 4 a block: three released
    # requests leave 24 cached pages in 4-page chunks, and the growing request hits ``hit`` of the first one's
    # blocks (their chunks, at the queue's head, are then dead entries there)
    ps, k = 1, 4
    pages = 24 + 4 + unhashed
    warm = [Request(i, i, 8, 0, [10 * i, 10 * i + 1], i + 1) for i in range(3)]
    ids = [0, 1][:hit] + [99, 98][: 2 - hit]
    r = Request(3, 3, 8, 50, ids, 4)
    ref = BlockPool(pages, ps, check=True)
    chunked = ChunkPool(pages, ps, k, check=True)
    seqs = []
    for pool in (ref, chunked):
        replay_order(warm, pool, Paging(ps * k, ps), window=ALL)
        keys = _page_keys(pool, Paging(ps * k, ps))(r, 8)
        seq = Seq(r, keys, True)
        assert pool.start(seq)
        pool.commit(seq)
        seqs.append(seq)
    for g in grows:
        got = [ref.grow(seqs[0], g), chunked.grow(seqs[1], g)]
        assert got[0] == got[1]
        if got[0]:
            for seq in seqs:
                seq.tokens += g
        counts = (ref.free_pages(), ref.cached_pages(), ref.evictions)
        assert counts == (chunked.free_pages(), chunked.cached_pages(), chunked.evictions)
        queued = [key for _, key in ref._hashed_free()]
        assert _canonical(queued, {})[0] == _canonical(chunked.queue_keys(), {})[0]
        chunked.verify()
    # the replay's _finish: fresh keys for the generated pages, then the release
    paging = Paging(ps * k, ps)
    while len(seqs[0].keys) < seqs[0].tokens // ps:
        seqs[0].keys.append(paging.unique())
    chunked.extend_keys(seqs[1], paging)
    ref.release(seqs[0])
    chunked.release(seqs[1])
    assert _queue_and_holders(ref) == _canonical(chunked.queue_keys(), chunked.holders())
