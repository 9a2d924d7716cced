"""vLLM's block pool with prefix caching (0.33.0 semantics; see reference/vllm-0.33.0.md §5).

- ``num_blocks = usable + 1``: block 0 is the null block, taken at start and never freed.
- Blocks are named by a hash chain over whole blocks (the trace's prefix-chained page keys stand for it); only
  whole blocks are hashed. A block's hash may map to more than one block (two requests computed it); a lookup
  takes the first.
- Longest hit (``BlockPool.start``): stop at the first miss, cap at ``length - 1`` tokens, ``eagle_drop``.
- Allocation and free (``start``, ``release``): hit blocks are touched, new ones popped from the queue's head; a
  freed block goes to the tail if hashed (evicted last: LRU), to the head if not. How the queue is kept is at
  ``BlockPool``.

Where the trace's blocks are several pages each, ``kvplan.sim.blockchunks.ChunkPool`` replays the same pool per
trace block instead (``kvplan.sim.registry.engine_pool`` picks it); this one serves pages that are whole trace blocks
or coarser, and is the reference the chunked pool is tested against.
"""

from __future__ import annotations

from itertools import compress
from operator import itemgetter, not_

from kvplan.sim.pool import Seq, cached_prefix
from kvplan.units import cdiv


def _gather(values: list[int], at: list[int]) -> tuple[int, ...]:
    """``values[i]`` for each ``i`` in ``at`` (not empty), as a tuple, in one C-level call."""
    got = itemgetter(*at)(values)
    return got if len(at) > 1 else (got,)


def describe_vllm_pool(page_tokens: int, eagle_drop: bool) -> str:
    return (
        f"vLLM block pool: {page_tokens}-token blocks + the null block, hash-chain lookup capped at "
        "length − 1, freed hashed blocks to the free queue's tail (LRU), unhashed to its head"
        + (", EAGLE drop of one block" if eagle_drop else "")
    )


# How it is kept (the same blocks, in the same order, as vLLM's doubly linked free queue over every block):
# unhashed blocks only ever enter the queue at its head and hashed ones at its tail, and a hit takes only hashed
# blocks out of the middle, so the queue is always ``[unhashed ...][hashed, least recently freed first]``. The
# unhashed part is a stack of block ids freed before (its top is the head) followed by the blocks never used yet,
# which are a range and exist only as a counter: a pool of any size costs nothing until its blocks are used. The
# hashed part is two parallel lists (blocks and their hashes) in queue order, made of runs (one per release); a
# block in the queue is marked with its run's end (one shared int, no position per block), and a block taken out
# of the middle by a hit is only unmarked: its entry is dead, cut out when the head reaches it, and the lists drop
# their consumed front from time to time. Evictions take the head's entries a run at a time (one C-level gather of
# the marks, slices cut around the dead entries), and a commit whose hashes are all new is one ``dict.update``:
# what is left per block is the hash map's insert and delete and a store of its mark. Reference counts are implicit
# (1 for a held block) except for blocks several running requests share. Nothing is done per
# block that the request does not touch: a request costs its hits, its new blocks and the queue entries its
# evictions pass over.
class BlockPool:
    semantics = "vllm"
    policy = "lru"

    def __init__(self, pages: int, page_tokens: int, *, eagle_drop: bool = False, check: bool = False) -> None:
        self.pages = pages
        self.page_tokens = page_tokens
        self.eagle_drop = eagle_drop
        self.check = check
        self.minted = 0
        """Blocks 1..minted have been used at least once; minted+1..pages are free, unhashed and in id order."""
        self.stack: list[int] = []
        """Unhashed free blocks used before; the last is the queue's head."""
        self.qb: list[int] = []
        self.qk: list[int] = []
        """The hashed part of the queue (blocks, their hashes), least recently freed first, with dead entries."""
        self.qbase = 0
        """Queue position of ``qb[0]`` (positions only grow)."""
        self.qhead = 0
        """Queue position of the first entry not yet consumed."""
        self.pos: list[int] = [-1]
        """Block -> the end (queue position past its last entry) of the run that put it in the queue, while it is a
        hashed free block; -1 otherwise (held, unhashed, evicted). An entry is live iff its block's mark is its run's
        end."""
        self.ends: list[int] = []
        """The runs' ends, ascending; ``ends[ri]`` is the end of the run holding the head entry ``qhead``."""
        self.ri = 0
        self.nhashed = 0
        """Live entries: hashed free blocks (ref 0, still reusable)."""
        self.shared: dict[int, int] = {}
        """Held blocks with more than one reference: ref − 1 (a held block not here has ref 1)."""
        self.cached: dict[int, int] = {}
        """Hash -> the first block that holds it."""
        self.dups: dict[int, list[int]] = {}
        """Hash -> the other blocks that hold it, in the order they got it."""
        self.evictions = 0

    def _queue_len(self) -> int:
        return len(self.stack) + self.pages - self.minted + self.nhashed

    def free_pages(self) -> int:
        return len(self.stack) + self.pages - self.minted

    def cached_pages(self) -> int:
        return self.nhashed

    def held_pages(self) -> int:
        # pages - _queue_len(), written out: the occupancy replay asks at every event
        return self.minted - len(self.stack) - self.nhashed

    def _hashed_free(self) -> list[tuple[int, int]]:
        """(block, hash) of the hashed free blocks in queue order."""
        pos, base, qb, qk = self.pos, self.qbase, self.qb, self.qk
        out = []
        at = self.qhead
        for e in self.ends[self.ri :]:
            run = zip(qb[at - base : e - base], qk[at - base : e - base], strict=True)
            out += [(b, k) for b, k in run if pos[b] == e]
            at = e
        return out

    @property
    def queue(self) -> list[int]:
        """The free queue, head first (for tests and debugging: it lists every free block)."""
        tail = [b for b, _ in self._hashed_free()]
        return [*reversed(self.stack), *range(self.minted + 1, self.pages + 1), *tail]

    def can_ever_fit(self, tokens: int) -> bool:
        return cdiv(tokens, self.page_tokens) <= self.pages

    def describe(self) -> str:
        return describe_vllm_pool(self.page_tokens, self.eagle_drop)

    # ------------------------------------------------------------------ hash map

    def _drop_hash(self, b: int, key: int) -> None:
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
        """Take ``n`` blocks from the queue's head (the caller checked there are that many)."""
        stack = self.stack
        take = min(n, len(stack))
        out = stack[-take:][::-1] if take else []
        if take:
            del stack[-take:]
        rest = n - take
        fresh = min(rest, self.pages - self.minted)
        if fresh:
            out.extend(range(self.minted + 1, self.minted + 1 + fresh))
            self.minted += fresh
            self.pos.extend([-1] * fresh)
            rest -= fresh
        if rest:
            self.evictions += rest
            self.nhashed -= rest
            pos, qb, qk, cached, dups = self.pos, self.qb, self.qk, self.cached, self.dups
            ends, ri = self.ends, self.ri
            at = self.qhead
            i = at - self.qbase
            while rest:
                e = ends[ri]
                if rest == 1:
                    # one block (a running request's next page): the head entry if it is live, else the next
                    b = qb[i]
                    if pos[b] == e:
                        key = qk[i]
                        pos[b] = -1
                        if dups and key in dups:
                            self._drop_hash(b, key)
                        else:
                            del cached[key]
                        out.append(b)
                        rest = 0
                    i += 1
                    at += 1
                    if at == e:
                        ri += 1
                    continue
                # the next entries from the head, at most ``rest`` and within one run; those whose block is not
                # marked with the run's end are dead (a hit took the block out of the queue)
                j = i + min(rest, e - at)
                bs = qb[i:j]
                ks = qk[i:j]
                n = len(bs)
                got = _gather(pos, bs)
                c = got.count(e)
                if c == n:
                    pass
                elif got[:c].count(e) == c:
                    # the usual dead entries: the batch's last ones (a run is a release's blocks tail first and a
                    # hit takes a request's leading blocks, so its dead entries end the run)
                    del bs[c:], ks[c:]
                else:
                    live = [p == e for p in got]
                    bs = list(compress(bs, live))
                    ks = list(compress(ks, live))
                for b in bs:
                    pos[b] = -1
                if dups and not dups.keys().isdisjoint(ks):
                    for b, key in zip(bs, ks, strict=True):
                        if key in dups:
                            self._drop_hash(b, key)
                        else:
                            del cached[key]
                else:
                    for key in ks:
                        del cached[key]
                out += bs
                rest -= len(bs)
                i += n
                at += n
                if at == e:
                    ri += 1
            self._consumed(at, ri)
        return out

    def _evict_one(self) -> int:
        """The queue's first live hashed block, evicted (``_pop(1)`` when only hashed blocks are free)."""
        pos, qb = self.pos, self.qb
        ends, ri = self.ends, self.ri
        at = self.qhead
        i = at - self.qbase
        e = ends[ri]
        while True:
            b = qb[i]
            live = pos[b] == e
            i += 1
            at += 1
            if at == e:
                ri += 1
                if not live:
                    e = ends[ri]
            if live:
                break
        key = self.qk[i - 1]
        pos[b] = -1
        dups = self.dups
        if dups and key in dups:
            self._drop_hash(b, key)
        else:
            del self.cached[key]
        self.evictions += 1
        self.nhashed -= 1
        self._consumed(at, ri)
        return b

    def _consumed(self, at: int, ri: int) -> None:
        """The head moved to queue position ``at`` (run ``ri``): drop the lists' consumed fronts now and then."""
        ends = self.ends
        if ri > 4096 and 2 * ri > len(ends):
            del ends[:ri]
            ri = 0
        self.ri = ri
        self.qhead = at
        used = at - self.qbase
        if used > 4096 and 2 * used > len(self.qb):
            del self.qb[:used], self.qk[:used]
            self.qbase = at

    # Longest hit: scan the request's block hashes left to right, stop at the first miss, then cap the hit at
    # ``length - 1`` tokens (``(L - 1) // block`` blocks), and with ``eagle_drop`` take one block off a non-empty
    # hit (lookahead hashes off, as with a KV connector or ``disable_lookahead_block_hashes``).
    # Allocation: hit blocks are touched (a block at ref 0 leaves the free queue); new blocks are popped from the
    # queue's head, and a popped block that still had a hash loses it (an eviction). A request is admitted only if
    # the queue can give its new blocks *and* its hit blocks that sit in the queue.
    def start(self, seq: Seq) -> bool:
        ps = self.page_tokens
        tokens = seq.tokens
        full = tokens // ps
        # the longest run of cached leading hashes
        found: list[int] = cached_prefix(self.cached.get, seq.keys, full)
        h = len(found)
        h = min(h, max(tokens - 1, 0) // ps)
        if self.eagle_drop and h:
            h -= 1
        hits: list[int] = found[:h]
        new = cdiv(tokens, ps) - h
        pos = self.pos
        # hit blocks that sit idle in the queue (marked): unmarking them kills their entries
        idle = h - _gather(pos, hits).count(-1) if h else 0
        if new + idle > self._queue_len():
            return False
        self.nhashed -= idle
        if idle == h:
            for b in hits:
                pos[b] = -1
        else:
            shared = self.shared
            for b in hits:
                if pos[b] >= 0:
                    pos[b] = -1
                else:
                    shared[b] = shared.get(b, 0) + 1
        seq.handle = hits + self._pop(new)
        seq.hit_pages = h
        seq.committed = h
        if self.check:
            self.verify()
        return True

    def commit(self, seq: Seq) -> None:
        """Hash the whole blocks computed so far (vLLM caches blocks as it schedules them).

        Only blocks the sequence holds: the occupancy replay may count a token whose page its pending grow event
        has not taken yet (preempted at that microsecond), which with 1-token pages is a whole block it lacks."""
        full = min(seq.tokens // self.page_tokens, len(seq.handle))
        first = seq.committed
        if full <= first:
            return
        blocks = seq.handle[first:full]
        keys = seq.keys[first:full]
        cached = self.cached
        seq.committed = full
        if cached.keys().isdisjoint(keys):
            # the usual case, none of these hashes cached yet: one C-level update
            before = len(cached)
            cached.update(zip(keys, blocks, strict=True))
            if len(cached) - before == len(keys):
                return
            # a hash twice within these blocks: undo, and go block by block as below
            for key in keys:
                cached.pop(key, None)
        for b, key in zip(blocks, keys, strict=True):
            if key in cached:
                self.dups.setdefault(key, []).append(b)
            else:
                cached[key] = b

    def grow(self, seq: Seq, pages: int) -> bool:
        if pages == 1:
            # a running request's next page (the occupancy replay's every grow): the queue's head directly
            stack = self.stack
            if stack:
                seq.handle.append(stack.pop())
                return True
            if self.minted < self.pages:
                self.minted += 1
                self.pos.append(-1)
                seq.handle.append(self.minted)
                return True
            if not self.nhashed:
                return False
            seq.handle.append(self._evict_one())
            return True
        if pages > self._queue_len():
            return False
        seq.handle.extend(self._pop(pages))
        return True

    def _append(self, blocks: list[int], keys: list[int]) -> None:
        """Hashed blocks freed, to the queue's tail in this order."""
        if not blocks:
            return
        self.qb += blocks
        self.qk += keys
        end = self.qbase + len(self.qb)
        self.ends.append(end)
        pos = self.pos
        for b in blocks:
            pos[b] = end
        self.nhashed += len(blocks)

    # Free: the request's blocks in reverse (tail first); a block reaching ref 0 goes to the queue's tail if it has
    # a hash (evicted last: LRU) or to its head if not (reused first).
    def release(self, seq: Seq) -> None:
        self.commit(seq)
        blocks: list[int] = seq.handle
        hashed = seq.committed
        keys = seq.keys
        shared = self.shared
        unhashed = blocks[hashed:]
        # blocks other running requests still hold are hits of theirs, so hashed ones: among the first ``hashed``
        others = shared.keys() & blocks[:hashed] if shared and hashed else None
        if not others:
            tail = blocks[hashed - 1 :: -1] if hashed else []
            tail_keys = keys[hashed - 1 :: -1] if hashed else []
        else:
            # they lose one reference and stay
            for b in others:
                r = shared[b]
                if r == 1:
                    del shared[b]
                else:
                    shared[b] = r - 1
            s = len(others)
            if others.issuperset(blocks[:s]):
                # the usual case: they lead the request's blocks (the other requests' hits are prefixes)
                tail = blocks[s:hashed][::-1]
                tail_keys = keys[s:hashed][::-1]
            else:
                tail = blocks[hashed - 1 :: -1]
                keep = list(map(not_, map(others.__contains__, tail)))
                tail = list(compress(tail, keep))
                tail_keys = list(compress(keys[hashed - 1 :: -1], keep))
        # hashed blocks to the queue's tail, the request's tail first; unhashed ones to its head
        self._append(tail, tail_keys)
        self.stack.extend(unhashed)
        seq.handle = None
        if self.check:
            self.verify()

    # ------------------------------------------------------------------ invariants

    def verify(self) -> None:
        stack = set(self.stack)
        free = self._hashed_free()
        freeq = dict(free)
        assert len(freeq) == len(free) == self.nhashed, "the hashed part of the queue lists a block twice"
        assert len(stack) == len(self.stack), "a block is twice in the free stack"
        assert 0 not in stack and 0 not in freeq, "the null block was freed"
        assert all(0 < b <= self.minted for b in stack), "a free block in the stack was never used"
        assert all(0 < b <= self.minted for b in freeq), "a cached free block was never used"
        assert not stack & freeq.keys(), "a block is both unhashed-free and cached-free"
        assert len(self.pos) == self.minted + 1, "a position slot per used block"
        assert sum(p >= 0 for p in self.pos) == self.nhashed, "marks of blocks that left the queue"
        ends = self.ends[self.ri :]
        assert ends == sorted(set(ends)), "run ends not ascending"
        assert not ends or (ends[0] > self.qhead and ends[-1] == self.qbase + len(self.qb)), "runs do not cover it"
        held = self.minted - len(stack) - len(freeq)
        for b, r in self.shared.items():
            assert r >= 1 and b not in stack and b not in freeq, f"shared block {b} is free (extra ref {r})"
        assert self.free_pages() + self.cached_pages() + held == self.pages, "free + cached + held != pool"
        holders: dict[int, int] = {}
        for key, more in [(k, [b]) for k, b in self.cached.items()] + list(self.dups.items()):
            assert more and key in self.cached, "a duplicate list without a first block"
            for b in more:
                assert b not in stack, f"block {b} holds hash {key} but is in the unhashed part of the queue"
                assert freeq.get(b, key) == key, f"block {b} is cached under {key} and free with another hash"
                assert holders.setdefault(b, key) == key, f"block {b} is cached under two hashes"
        assert freeq.keys() <= holders.keys(), "a block in the hashed part of the queue is not in the hash map"
