"""The lazy vLLM block pool (issue 15) against the eager one it replaced, block for block, and its cost.

``eager_blockpool.BlockPool`` is the pool as it was before: one reference count and hash slot per block and an
ordered dict over every block, built up front. Both replay the same random prefix-chained traces, in order mode
and in occupancy mode (concurrent requests sharing blocks, preemptions), with and without the EAGLE drop; every
result and the final free queue, block ids and order included, must be the same.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kvplan.sim.blockpool import BlockPool
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq
from kvplan.sim.replay import Service, replay_occupancy, replay_order
from kvplan.sim.trace import Request
from tests.sim.eager_blockpool import BlockPool as EagerBlockPool
from tests.sim.test_sim_cli import invoke
from tests.sim.test_sim_properties import ALL, BS, _result, chained_traces
from tests.work import lines


def _state(pool: BlockPool | EagerBlockPool) -> tuple[list[int], dict[int, int], dict[int, list[int]], int]:
    return list(pool.queue), dict(pool.cached), {k: list(v) for k, v in pool.dups.items()}, pool.evictions


@given(chained_traces(), st.integers(1, 30), st.booleans())
def test_order_mode_block_for_block(reqs: list[Request], pages: int, eagle: bool) -> None:
    lazy = BlockPool(pages, BS, eagle_drop=eagle, check=True)
    eager = EagerBlockPool(pages, BS, eagle_drop=eagle, check=True)
    a = replay_order(reqs, lazy, Paging(BS, BS), window=ALL)
    b = replay_order(reqs, eager, Paging(BS, BS), window=ALL)
    assert _result(a) == _result(b)
    assert _state(lazy) == _state(eager)


@given(chained_traces(), st.integers(2, 30), st.booleans(), st.sampled_from([None, 1, 3]))
def test_occupancy_mode_block_for_block(reqs: list[Request], pages: int, eagle: bool, limit: int | None) -> None:
    # 1,000 prefill tokens/s and 0.5 ms a token against arrivals up to 3 ms apart: requests overlap, share hit
    # blocks (reference counts above 1) and are preempted when the pool runs out
    svc = Service(1_000, 500, limit)
    lazy = BlockPool(pages, BS, eagle_drop=eagle, check=True)
    eager = EagerBlockPool(pages, BS, eagle_drop=eagle, check=True)
    a = replay_occupancy(reqs, lazy, Paging(BS, BS), service=svc, window=ALL)
    b = replay_occupancy(reqs, eager, Paging(BS, BS), service=svc, window=ALL)
    assert _result(a) == _result(b)
    assert _state(lazy) == _state(eager)


def test_shared_blocks_return_to_the_queue_when_their_last_holder_leaves() -> None:
    # block 4 tokens, pool 6: A (8 tokens, keys 1, 2) runs and commits; B (12 tokens, keys 1, 2, 3) hits 2 blocks
    # (cap (12 - 1) // 4 = 2) that A holds: refs 2, 2
    pool = BlockPool(6, 4, check=True)
    a = Seq(Request(0, 0, 8, 0, None, 1), [1, 2], True)
    assert pool.start(a)
    pool.commit(a)
    b = Seq(Request(1, 0, 12, 0, None, 2), [1, 2, 3], True)
    assert pool.start(b) and b.hit_pages == 2 and pool.shared == {1: 1, 2: 1}
    # A leaves: blocks 1, 2 keep B's reference, nothing is freed (A's 2 blocks, B's 1 new: 3 held of 6)
    pool.release(a)
    assert pool.shared == {} and pool.held_pages() == 3 and pool.cached_pages() == 0
    # B leaves: its 3 whole blocks go to the queue's tail, tail first (3's block, then 2's, then 1's), after the
    # never-used blocks 4, 5, 6
    pool.release(b)
    assert pool.queue == [4, 5, 6, pool.cached[3], pool.cached[2], pool.cached[1]] and pool.held_pages() == 0


def test_a_huge_pool_builds_nothing() -> None:
    # --capacity 1e10 with 64-token pages: 156,250,000 blocks. The eager pool built a list and an ordered dict
    # entry per block up front (2.4 GB for fig9's 1e9 tokens; a MemoryError at 1e10); the lazy one keeps a
    # counter until blocks are used. MAX_TOKENS = 2**40 tokens is the largest capacity kvplan accepts.
    # and does bounded work: a loop over its blocks would run 156 million lines (2**40 for `huge`)
    def build() -> None:
        pool = BlockPool(10**10 // 64, 64)
        huge = BlockPool(2**40, 1)
        seq = Seq(Request(0, 0, 640, 0, None, 1), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], True)
        assert pool.start(seq)
        pool.release(seq)
        assert huge.free_pages() == 2**40 and pool.free_pages() == 156_250_000 - 10 and pool.cached_pages() == 10

    tracemalloc.start()
    lines(build, budget=10_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 1024, f"{peak:,} B traced"


def test_cli_vllm_capacity_1e10_runs(tmp_path: Path) -> None:
    # the defect: --semantics vllm --capacity 1e10 was a MemoryError traceback (exit 1), then an exit-2 refusal
    # past 4,194,304 blocks. Two requests of 1,024 tokens (2 blocks of 512, 16 pages of 64), the second the same
    # prefix: its hit is capped at (1024 - 1) // 64 = 15 pages = 960 tokens
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}\n' * 2)
    r = invoke(p, "--semantics", "vllm", "--capacity", "1e10", "--format", "json")
    assert r.exit_code == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    assert doc["capacity_units"] == 10**10 // 64 == 156_250_000
    assert doc["hit"]["tokens"] == 960


@given(chained_traces(), st.integers(1, 60), st.booleans(), st.sampled_from([None, 2]))
def test_expanded_pages_block_for_block(reqs: list[Request], pages: int, eagle: bool, limit: int | None) -> None:
    # each trace block is 4 pages of 1 token (and in occupancy mode also 2 pages of 2 tokens): a request's
    # hits, evictions and frees are runs of several pages, so evictions cut runs around the dead entries that hits
    # left in the queue (order mode: hits of idle blocks; occupancy mode: shared blocks and preemptions too)
    lazy = BlockPool(pages, BS // 4, eagle_drop=eagle, check=True)
    eager = EagerBlockPool(pages, BS // 4, eagle_drop=eagle, check=True)
    a = replay_order(reqs, lazy, Paging(BS, BS // 4), window=ALL)
    b = replay_order(reqs, eager, Paging(BS, BS // 4), window=ALL)
    assert _result(a) == _result(b)
    assert _state(lazy) == _state(eager)
    svc = Service(1_000, 500, limit)
    for page in (BS // 4, BS // 2):
        lazy = BlockPool(pages, page, eagle_drop=eagle, check=True)
        eager = EagerBlockPool(pages, page, eagle_drop=eagle, check=True)
        a = replay_occupancy(reqs, lazy, Paging(BS, page), service=svc, window=ALL)
        b = replay_occupancy(reqs, eager, Paging(BS, page), service=svc, window=ALL)
        assert _result(a) == _result(b)
        assert _state(lazy) == _state(eager)


def test_a_hash_twice_in_one_commit_is_a_duplicate_as_in_the_eager_pool() -> None:
    # the commit's fast path is one dict.update when none of the hashes is cached; a request whose own blocks
    # repeat a hash (keys 7, 7: the trace reader refuses such ids, the pool must not depend on it) takes the
    # block-by-block path: the first block holds hash 7 in the map, the second is its duplicate
    states = []
    for cls in (BlockPool, EagerBlockPool):
        pool = cls(4, 4, check=True)
        s = Seq(Request(0, 0, 8, 0, None, 1), [7, 7], True)
        assert pool.start(s)
        pool.release(s)
        states.append(_state(pool))
    # blocks 1, 2 (both used once) freed tail first: the queue is the never-used 3, 4, then 2, 1
    assert states[0] == states[1] == ([3, 4, 2, 1], {7: 1}, {7: [2]}, 0)


@given(st.lists(st.integers(0, 2**40), max_size=12, unique=True), st.integers(0, 60), st.sampled_from([2, 4, 8]))
def test_expanded_page_keys(ids: list[int], pages: int, k: int) -> None:
    # expand mode: page j of block b is b × k + j (the formula of kvplan.sim.paging, written out again), for the
    # request's first `pages` whole pages; pages past the listed blocks get fresh negative keys of their own
    pages = min(pages, len(ids) * k + 2)
    keys = Paging(BS * k, BS).page_keys(Request(0, 0, pages * BS, 0, ids, 1), pages)
    want = [b * k + j for b in ids for j in range(k)][:pages]
    assert keys[: len(want)] == want
    assert len(keys) == pages and all(x < 0 for x in keys[len(want) :])


def test_cli_vllm_occupancy_with_one_token_pages(tmp_path: Path) -> None:
    # the defect: an internal error (exit 4, ValueError from the commit's zip). Request 1 (4 tokens, 1 output)
    # reaches a page boundary with its first output token while a preemption at the same microsecond counts that
    # token as made, so it was released with 5 tokens and 4 one-token pages: the commit asked for a 5th block.
    # Block ids 0..3 all differ, so no request hits: hit tokens 0; all three complete.
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 8, "output_length": 0, "hash_ids": [0, 1]}\n'
        '{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [2]}\n'
        '{"timestamp": 0, "input_length": 4, "output_length": 0, "hash_ids": [3]}\n'
    )
    r = invoke(p, "--semantics", "vllm", "--block-size", "4", "--page-tokens", "1", "--capacity", "12 pages",
               "--occupancy", "--prefill-tps", "1000", "--tpot-ms", "0.5", "--format", "json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    assert doc["hit"]["tokens"] == 0 and doc["occupancy"]["completed"] == 3


def test_a_release_whose_shared_blocks_do_not_lead() -> None:
    # 4-token blocks, EAGLE drop (one block off every non-empty hit), a pool of 8 (blocks 1..8, never used yet).
    # Y (4 tokens, key 1) takes block 1 and leaves: key 1 on block 1, idle in the queue.
    # X (12 tokens, keys 1, 2, 3) finds key 1 (h = 1, cap (12 - 1) // 4 = 2), the drop leaves 0: it takes blocks
    #   2, 3, 4 and commits keys 1, 2, 3 on them; key 1 is already on block 1, so block 2 is its duplicate.
    # Z (16 tokens, keys 1..4) finds keys 1, 2, 3 on blocks 1, 3, 4 (h = 3, cap (16 - 1) // 4 = 3), the drop
    #   leaves 2: block 1 (idle: out of the queue) and block 3, which X holds: shared. Z takes 5, 6 for the rest.
    # X leaves: block 3 stays with Z; X's others, 4 then 2 (tail first), go to the queue. The shared block is
    # X's second, not a leading one: the release takes the general path (not the leading-slice cut). Held: Z's
    # 4 blocks; cached: 4 and 2. Then Z leaves. Every step as in the eager pool, block ids and queue included.
    for cls in (BlockPool, EagerBlockPool):
        pool = cls(8, 4, eagle_drop=True, check=True)
        y = Seq(Request(0, 0, 4, 0, None, 1), [1], True)
        assert pool.start(y)
        pool.release(y)
        x = Seq(Request(1, 0, 12, 0, None, 2), [1, 2, 3], True)
        assert pool.start(x) and x.hit_pages == 0 and x.handle == [2, 3, 4]
        pool.commit(x)
        assert pool.cached == {1: 1, 2: 3, 3: 4} and pool.dups == {1: [2]}
        z = Seq(Request(2, 0, 16, 0, None, 3), [1, 2, 3, 4], True)
        assert pool.start(z) and z.hit_pages == 2 and z.handle == [1, 3, 5, 6]
        pool.commit(z)
        pool.release(x)
        assert pool.held_pages() == 4 and pool.cached_pages() == 2
        assert list(pool.queue)[-2:] == [4, 2]
        pool.release(z)
        if cls is BlockPool:
            lazy = _state(pool)
        else:
            assert _state(pool) == lazy


def test_an_eviction_past_dead_entries_that_do_not_end_the_batch() -> None:
    # An eviction batch (one run, at most the blocks still wanted) usually has its dead entries last: a run is a
    # release's blocks tail first and a hit takes a request's leading blocks. A duplicate breaks that: the hit
    # takes the first holder of a hash, which may sit elsewhere. 4-token blocks, a pool of 5 (blocks 1..5):
    # A (4 tokens, key 1) takes block 1; B (12 tokens, keys 1, 2, 3) starts before A commits: no hit, blocks
    #   2, 3, 4. A commits key 1 on block 1; B commits key 1 again (block 2: a duplicate), 2 on 3, 3 on 4.
    # B leaves: run [4, 3, 2] (tail first); A leaves: run [1]. The queue: the never-used 5, then 4, 3, 2, 1.
    # C (16 tokens, keys 1, 2, 3, 9) finds 1, 2, 3 on blocks 1, 3, 4 (cap (16 - 1) // 4 = 3): their entries die;
    #   1 new block: 5 (never used). C leaves: key 9 on block 5, run [5, 4, 3, 1].
    # D (12 tokens, keys 20, 21, 22) misses and needs 3 blocks, all evicted from the queue's head: the first
    #   batch is run [4 dead, 3 dead, 2 live] (the live entry after the dead ones: the general path), so block 2
    #   (key 1's duplicate); run [1] is dead; then 5 and 4 from run [5, 4, 3, 1]. D holds [2, 5, 4]; evictions 3;
    #   left in the queue: 3, 1 (keys 2, 1, their first holders).
    states = []
    for cls in (BlockPool, EagerBlockPool):
        pool = cls(5, 4, check=True)
        a = Seq(Request(0, 0, 4, 0, None, 1), [1], True)
        b = Seq(Request(1, 0, 12, 0, None, 2), [1, 2, 3], True)
        assert pool.start(a) and pool.start(b) and a.handle == [1] and b.handle == [2, 3, 4]
        pool.commit(a)
        pool.commit(b)
        assert pool.cached == {1: 1, 2: 3, 3: 4} and pool.dups == {1: [2]}
        pool.release(b)
        pool.release(a)
        assert list(pool.queue) == [5, 4, 3, 2, 1]
        c = Seq(Request(2, 0, 16, 0, None, 3), [1, 2, 3, 9], True)
        assert pool.start(c) and c.hit_pages == 3 and c.handle == [1, 3, 4, 5]
        pool.release(c)
        d = Seq(Request(3, 0, 12, 0, None, 4), [20, 21, 22], True)
        assert pool.start(d) and d.hit_pages == 0 and d.handle == [2, 5, 4]
        states.append(_state(pool))
    assert states[0] == states[1] == ([3, 1], {1: 1, 2: 3}, {}, 3)
