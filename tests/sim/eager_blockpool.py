"""The eager vLLM block pool kvplan used before issue 15, kept as the oracle for the lazy one (test_sim_blockpool).

It builds a reference count, a hash slot and a free-queue entry per block up front; kvplan.sim.blockpool must
behave exactly like it, block ids and queue order included. Semantics (vLLM 0.33.0, reference/vllm-0.33.0.md §5):

- ``num_blocks = usable + 1``: block 0 is the null block, taken at start and never freed.
- Blocks are named by a hash chain over whole blocks (the trace's prefix-chained page keys stand for it); only
  whole blocks are hashed. A block's hash may map to more than one block (two requests computed it); a lookup
  takes the first.
- Longest hit: scan the request's block hashes left to right, stop at the first miss, then cap the hit at
  ``length − 1`` tokens (``(L − 1) // block`` blocks), and with ``eagle_drop`` take one block off a non-empty
  hit (lookahead hashes off, as with a KV connector or ``disable_lookahead_block_hashes``).
- Allocation: hit blocks are touched (a block at ref 0 leaves the free queue); new blocks are popped from the
  queue's head, and a popped block that still had a hash loses it (an eviction). A request is admitted only if
  the queue can give its new blocks *and* its hit blocks that sit in the queue.
- Free: the request's blocks in reverse (tail first); a block reaching ref 0 goes to the queue's tail if it has
  a hash (evicted last: LRU) or to its head if not (reused first).
"""

from __future__ import annotations

from collections import OrderedDict

from kvplan.sim.pool import Seq
from kvplan.units import cdiv


class BlockPool:
    semantics = "vllm"
    policy = "lru"

    def __init__(self, pages: int, page_tokens: int, *, eagle_drop: bool = False, check: bool = False) -> None:
        self.pages = pages
        self.page_tokens = page_tokens
        self.eagle_drop = eagle_drop
        self.check = check
        n = pages + 1
        self.ref = [0] * n
        self.hash: list[int | None] = [None] * n
        self.ref[0] = 1  # the null block
        self.queue: OrderedDict[int, None] = OrderedDict.fromkeys(range(1, n))
        self.cached: dict[int, int] = {}
        self.dups: dict[int, list[int]] = {}
        self.evictions = 0
        self.hashed_free = 0
        """Blocks in the queue that still hold a hash (reusable until popped)."""

    def free_pages(self) -> int:
        return len(self.queue) - self.hashed_free

    def cached_pages(self) -> int:
        return self.hashed_free

    def held_pages(self) -> int:
        return self.pages - len(self.queue)

    def can_ever_fit(self, tokens: int) -> bool:
        return cdiv(tokens, self.page_tokens) <= self.pages

    def describe(self) -> str:
        return (
            f"vLLM block pool: {self.page_tokens}-token blocks + the null block, hash-chain lookup capped at "
            "length − 1, freed hashed blocks to the free queue's tail (LRU), unhashed to its head"
            + (", EAGLE drop of one block" if self.eagle_drop else "")
        )

    # ------------------------------------------------------------------ hash map

    def _add_hash(self, b: int, key: int) -> None:
        self.hash[b] = key
        first = self.cached.get(key)
        if first is None:
            self.cached[key] = b
        else:
            self.dups.setdefault(key, []).append(b)

    def _drop_hash(self, b: int) -> None:
        key = self.hash[b]
        assert key is not None
        self.hash[b] = None
        if self.cached[key] == b:
            more = self.dups.get(key)
            if more:
                self.cached[key] = more.pop(0)
                if not more:
                    del self.dups[key]
            else:
                del self.cached[key]
        else:
            more = self.dups[key]
            more.remove(b)
            if not more:
                del self.dups[key]

    # ------------------------------------------------------------------ requests

    def _pop(self, n: int) -> list[int]:
        out = []
        pop = self.queue.popitem
        ref = self.ref
        for _ in range(n):
            b = pop(last=False)[0]
            if self.hash[b] is not None:
                self._drop_hash(b)
                self.hashed_free -= 1
                self.evictions += 1
            ref[b] = 1
            out.append(b)
        return out

    def start(self, seq: Seq) -> bool:
        ps = self.page_tokens
        tokens = seq.tokens
        hits: list[int] = []
        cached = self.cached
        for key in seq.keys[: tokens // ps]:
            b = cached.get(key)
            if b is None:
                break
            hits.append(b)
        cap = max(tokens - 1, 0) // ps
        if len(hits) > cap:
            del hits[cap:]
        if self.eagle_drop and hits:
            hits.pop()
        new = cdiv(tokens, ps) - len(hits)
        idle_hits = sum(1 for b in hits if self.ref[b] == 0)
        if new + idle_hits > len(self.queue):
            return False
        ref = self.ref
        for b in hits:
            if ref[b] == 0:
                del self.queue[b]
                self.hashed_free -= 1
            ref[b] += 1
        seq.handle = hits + self._pop(new)
        seq.hit_pages = len(hits)
        if self.check:
            self.verify()
        return True

    def commit(self, seq: Seq) -> None:
        """Hash the whole blocks computed so far (vLLM caches blocks as it schedules them)."""
        blocks = seq.handle
        keys = seq.keys
        # only blocks the sequence holds (as the lazy pool: a replayed token may lack its page, see its commit)
        for pos in range(seq.hit_pages, min(seq.tokens // self.page_tokens, len(blocks))):
            b = blocks[pos]
            if self.hash[b] is None:
                self._add_hash(b, keys[pos])

    def grow(self, seq: Seq, pages: int) -> bool:
        if pages > len(self.queue):
            return False
        seq.handle.extend(self._pop(pages))
        return True

    def release(self, seq: Seq) -> None:
        self.commit(seq)
        first: list[int] = []
        last: list[int] = []
        ref = self.ref
        for b in reversed(seq.handle):
            ref[b] -= 1
            if ref[b] == 0:
                (first if self.hash[b] is None else last).append(b)
        q = self.queue
        for b in reversed(first):
            q[b] = None
            q.move_to_end(b, last=False)
        for b in last:
            q[b] = None
        self.hashed_free += len(last)
        seq.handle = None
        if self.check:
            self.verify()

    # ------------------------------------------------------------------ invariants

    def verify(self) -> None:
        assert 0 not in self.queue and self.ref[0] == 1, "the null block was freed"
        held = 0
        hashed_free = 0
        for b in range(1, self.pages + 1):
            r = self.ref[b]
            assert r >= 0, f"block {b} has ref {r}"
            if r:
                held += 1
                assert b not in self.queue, f"block {b} is referenced and free"
            else:
                assert b in self.queue, f"block {b} is unreferenced but not in the free queue"
                hashed_free += self.hash[b] is not None
        free = len(self.queue) - hashed_free
        assert free + hashed_free + held == self.pages, "free + cached + held != pool"
        assert hashed_free == self.hashed_free, f"{hashed_free} cached free blocks, ledger says {self.hashed_free}"
        for key, b in self.cached.items():
            assert self.hash[b] == key, "hash map points at a block with another hash"
