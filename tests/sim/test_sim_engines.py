"""Engine pools by hand (every number derived in the comments), invariants in debug mode, occupancy mode."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq
from kvplan.sim.radix import POLICIES, RadixPool
from kvplan.sim.replay import Service, replay_occupancy, replay_order
from kvplan.sim.run import SimConfig, make_window, run_one
from kvplan.sim.trace import Request, open_trace

ALL = Window("all", 0)
_ids = itertools.count()


def req(tokens: int, out: int = 0, at: int = 0, blocks: list[int] | None = None) -> Request:
    return Request(next(_ids), at, tokens, out, blocks, 1)


def run(pool: RadixPool | BlockPool, tokens: int, keys: list[int]) -> int:
    """One order-mode request: start, then release; returns the pages hit (-1: did not fit)."""
    seq = Seq(req(tokens), keys, True)
    if not pool.start(seq):
        return -1
    hit = seq.hit_pages
    pool.release(seq)
    pool.verify()
    return hit


# --------------------------------------------------------------------------- SGLang radix cache, page 4


def test_radix_split_share_and_partial_page() -> None:
    pool = RadixPool(6, 4, check=True)
    # A: 10 tokens = 2 whole pages [1, 2] + a 2-token partial page: 3 pages taken, the partial one freed after
    assert run(pool, 10, [1, 2]) == 0
    assert (pool.free, pool.tree_pages, pool.private) == (4, 2, 0)
    # B: 9 tokens, pages [1, 3]: the match ends inside node [1, 2], which splits; 1 page hit = 4 tokens
    assert run(pool, 9, [1, 3]) == 1
    # B took ceil(9/4) - 1 = 2 pages; [3] joined the tree, its partial page went back: tree [1] -> {[2], [3]}
    assert (pool.free, pool.tree_pages) == (3, 3)
    assert sorted(len(c.key) for c in pool.root.children.values()) == [1]


@pytest.mark.parametrize(("policy", "survivor", "hit"), [("lru", 3, 1), ("mru", 2, 2), ("fifo", 3, 1), ("filo", 2, 2)])
def test_radix_policies_pick_different_leaves(policy: str, survivor: int, hit: int) -> None:
    pool = RadixPool(6, 4, policy=policy, check=True)
    run(pool, 10, [1, 2])  # leaf [2]: created and touched before
    run(pool, 9, [1, 3])  # leaf [3]: created and touched after
    # 16 fresh tokens need 4 pages, 3 are free: one page is evicted, the policy says which leaf
    assert run(pool, 16, [7, 8, 9, 10]) == 0
    assert pool.evictions == 1
    # lru/fifo drop [2] (older), mru/filo drop [3] (newer); then [1, 2] hits 1 or 2 pages
    left = {c for n in pool.root.children.values() for c in n.children}
    assert survivor in left
    assert run(pool, 8, [1, 2]) == hit


def test_radix_whole_node_eviction_overshoots() -> None:
    pool = RadixPool(6, 4, check=True)
    run(pool, 20, [1, 2, 3, 4, 5])  # one 5-page node, 1 page free
    # 8 fresh tokens need 2 pages: 1 is missing, but the only leaf is the 5-page node: all 5 go
    assert run(pool, 8, [9, 10]) == 0
    assert pool.evictions == 5
    assert (pool.free, pool.tree_pages) == (4, 2)


def test_radix_running_request_locks_its_path() -> None:
    pool = RadixPool(4, 4, check=True)
    run(pool, 8, [1, 2])  # tree [1, 2], 2 free
    x = Seq(req(12), [1, 2, 5], True)
    assert pool.start(x) and x.hit_pages == 2  # holds [1, 2] locked + 1 new page: 1 free, nothing evictable
    assert (pool.free, pool.cached_pages(), pool.held_pages()) == (1, 0, 3)
    assert not pool.start(Seq(req(8), [6, 7], True))  # needs 2 pages, 1 free, 0 evictable
    pool.release(x)
    assert (pool.free, pool.cached_pages(), pool.held_pages()) == (1, 3, 0)
    assert run(pool, 8, [6, 7]) == 0 and pool.evictions == 1  # leaf [5] goes, [1, 2] stays


def test_radix_eagle_matches_one_token_less() -> None:
    pool = RadixPool(8, 4, eagle=True, check=True)
    # bigram keys: 8 tokens give (8 - 1) // 4 = 1 page, so only [1] is inserted
    run(pool, 8, [1, 2])
    assert pool.tree_pages == 1
    assert run(pool, 9, [1, 2]) == 1  # (9 - 1) // 4 = 2 pages matchable, 1 cached


# --------------------------------------------------------------------------- vLLM block pool, block 4


def test_vllm_free_queue_null_block_and_cap() -> None:
    pool = BlockPool(4, 4, check=True)
    assert list(pool.queue) == [1, 2, 3, 4]  # block 0 is the null block
    # A: 10 tokens -> blocks 1, 2, 3 (3 is partial, unhashed). Freed tail first: 3 prepended, 2 then 1 appended
    assert run(pool, 10, [1, 2]) == 0
    assert list(pool.queue) == [3, 4, 2, 1]
    # B: 8 tokens, the same two whole blocks; the hit is capped at (8 - 1) // 4 = 1 block
    assert run(pool, 8, [1, 2]) == 1
    # B recomputed block 2's content in block 3 (popped from the head, unhashed: no eviction): a second
    # block for hash 2. Freed tail first: 3 then 1 appended after 4, 2
    assert list(pool.queue) == [4, 2, 3, 1] and pool.dups == {2: [3]} and pool.evictions == 0
    # C: 16 fresh tokens take all 4 blocks: 4 is free; 2, 3 (both hash 2) and 1 are evictions
    assert run(pool, 16, [5, 6, 7, 8]) == 0
    assert pool.evictions == 3 and 2 not in pool.cached and 1 not in pool.cached


def test_vllm_eagle_drop() -> None:
    pool = BlockPool(8, 4, eagle_drop=True, check=True)
    run(pool, 12, [1, 2, 3])
    # 13 tokens: 3 whole blocks cached, cap (13 - 1) // 4 = 3, minus the EAGLE block = 2
    assert run(pool, 13, [1, 2, 3]) == 2


def test_vllm_admits_only_if_idle_hit_blocks_fit_too() -> None:
    pool = BlockPool(3, 4, check=True)
    run(pool, 8, [1, 2])  # blocks 1, 2 cached in the queue, 3 free
    x = Seq(req(8), [1, 9], True)  # hit block 1 (idle, in the queue) + 1 new: needs 2 of the queue's 3
    assert pool.start(x)
    y = Seq(req(12), [1, 7, 8], True)  # hit block 1 (held by x, not idle) + 2 new: the queue has 1
    assert not pool.start(y)
    pool.release(x)


# --------------------------------------------------------------------------- paging


def test_paging_modes() -> None:
    r = req(1100, blocks=[5, 6, 7])  # Mooncake listing: 2 whole 512-token blocks + 76 tokens
    p = Paging(512, 64)
    # expand: 1100 // 64 = 17 whole pages: 8 of block 5, 8 of block 6, 1 of the partial block 7
    assert p.page_keys(r, 17) == [5 * 8 + j for j in range(8)] + [6 * 8 + j for j in range(8)] + [56]
    c = Paging(64, 512)
    r2 = req(1100, blocks=list(range(17)))  # kv-cache-tester listing: 17 whole 64-token blocks
    assert c.page_keys(r2, 1100 // 512) == [7, 15]  # pages named by blocks 7 and 15
    u = Paging(0, 64)
    assert u.page_keys(req(200), 3) == [-1, -2, -3]  # no ids: unique keys
    with pytest.raises(InputError, match="do not nest"):
        Paging(512, 192)


# --------------------------------------------------------------------------- invariants on small slices


def _slice(traces: Path, tmp_path: Path, n: int) -> Path:
    src = traces / "mooncake" / "synthetic_trace.jsonl"
    dst = tmp_path / "synthetic_trace_head.jsonl"
    with src.open() as f:
        dst.write_text("".join(itertools.islice(f, n)))
    return dst


@pytest.mark.parametrize("policy", POLICIES)
def test_sglang_invariants_every_step(traces: Path, tmp_path: Path, policy: str) -> None:
    tr = open_trace(_slice(traces, tmp_path, 400))
    for occupancy in (False, True):
        # 3,000 pages of 64 tokens (192K tokens) for requests of about 15K tokens: eviction all the time
        cfg = SimConfig(tr, "sglang", policy, ALL, 64, 3_000, occupancy, Service(20_000, 2_000), check=True)
        r = run_one(cfg)
        assert r.evictions > 0 and r.stats.hit_tokens % 64 == 0
        if occupancy:
            assert r.occupancy is not None and r.occupancy.completed + r.too_long == r.requests


def test_vllm_invariants_every_step(traces: Path, tmp_path: Path) -> None:
    tr = open_trace(_slice(traces, tmp_path, 400))
    for occupancy in (False, True):
        cfg = SimConfig(tr, "vllm", "lru", ALL, 64, 3_000, occupancy, Service(20_000, 2_000), eagle=True, check=True)
        r = run_one(cfg)
        assert r.evictions > 0 and r.stats.hit_tokens % 64 == 0


def test_coarsened_kvtester_invariants(traces: Path) -> None:
    # one conversation, 512-token pages (dcp 8) over 64-token blocks, a pool of 200 pages
    tr = open_trace(traces / "kv-cache-tester-claude-code" / "trace_0002.json")
    for sem in ("sglang", "vllm"):
        r = run_one(SimConfig(tr, sem, "lru", ALL, 512, 200, check=True))
        assert r.stats.hit_tokens % 512 == 0 and r.stats.hit_tokens > 0


def test_ideal_invariants_every_step(traces: Path, tmp_path: Path) -> None:
    tr = open_trace(_slice(traces, tmp_path, 300))
    for policy in ("lru", "fifo"):
        run_one(SimConfig(tr, "ideal", policy, make_window(tr, "last50"), 512, 500, check=True))


# --------------------------------------------------------------------------- occupancy mode by hand


def test_occupancy_wait_preemption_and_eviction_by_hand() -> None:
    """Page 4, a pool of 3 pages, prefill 1 µs a token, decode 1 ms a token.

    t=0     A (4 in, 5 out, page [1]) and B (4 in, 1 out, page [2]) arrive and are admitted: 1 page each, both
            decode from t=4 (4 tokens of prefill). Each needs a second page for its first output token at 1004.
    t=1004  A takes the last free page. B finds none, nothing is evictable (both pages are locked), and B is the
            newest: B is preempted with 1 token generated; its page [2] goes to the cache, B to the queue's head.
            Re-admitting B (5 tokens: hit [2], 1 new page) fails: nothing free, [2] now locked by the match.
    t=5004  A needs a page for its 5th token: [2] is evicted (eviction 1). A is done at 4 + 5 × 1000 = 5004 too:
            its whole pages [1] + its first output page are cached, its partial page freed (1 free).
            B re-admits: 5 tokens, 2 pages, no hit ([2] is gone); 1 free + A's output leaf evicted (eviction 2);
            prefill 5 µs; with its 1 token already generated it is done at 5009.
    Waits: 0 and 0 (both first admitted at once). Prefilled: 4 + 4 + 5 = 13 tokens. Queue: 1 request for 4,000 µs.
    """
    a = Request(0, 0, 4, 5, [1], 1)
    b = Request(1, 0, 4, 1, [2], 2)
    pool = RadixPool(3, 4, check=True)
    r = replay_occupancy([a, b], pool, Paging(4, 4), service=Service(1_000_000, 1_000), window=ALL)
    o = r.occupancy
    assert o is not None
    assert (o.completed, o.preemptions, r.evictions, r.too_long) == (2, 1, 2, 0)
    assert list(o.waits_us) == [0, 0] and o.makespan_us == 5009
    assert o.prefill_tokens == 13 and o.max_queue == 1 and o.queue_area == 4_000
    assert pool.held_pages() == 0 and pool.free + pool.tree_pages == 3


def test_occupancy_needs_sorted_arrivals() -> None:
    rs = [Request(0, 10, 4, 1, [1], 1), Request(1, 5, 4, 1, [2], 2)]
    with pytest.raises(InputError, match="sorted by arrival"):
        replay_occupancy(rs, RadixPool(8, 4), Paging(4, 4), service=Service(), window=ALL)


def test_order_mode_too_long_request_is_a_miss() -> None:
    # 3 pages of 4 tokens cannot hold a 13-token request (4 pages): it runs nowhere and counts as a miss
    rs = [Request(0, 0, 13, 0, [1, 2, 3, 4], 1), Request(1, 0, 8, 0, [1, 2], 2)]
    r = replay_order(rs, RadixPool(3, 4), Paging(4, 4), window=ALL)
    assert (r.too_long, r.stats.hit_tokens, r.stats.measured_tokens) == (1, 0, 21)
