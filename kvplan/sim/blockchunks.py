"""vLLM's block pool in order mode, kept per trace block instead of per page (the same pool, block for block).

When the trace's blocks are ``k`` engine pages each (``Paging`` "expand": 512-token Mooncake blocks, 64-token
pages), ``BlockPool`` does its work per page: a hash-map insert when a page is committed, a delete when it is
evicted, a queue entry and a mark when it is freed — about 160 of each per request on the Mooncake traces, and
the ``k``-fold page keys built before. This pool names pages by their trace block and keeps them in *chunks*: a
chunk is pages ``[lo, hi)`` of one trace block that sit side by side in the free queue (a release puts a
request's pages there tail first, so a chunk's pages are ``hi − 1`` down to ``lo``) or that one request holds. A
request then costs its trace blocks, not its pages. The semantics are ``BlockPool``'s (vLLM 0.33.0), unchanged:

- the free queue is ``[unhashed][hashed, least recently freed first]``; unhashed free blocks are only counted
  (their identity never decides a hit), hashed ones are the queue's chunks in order;
- eviction takes pages from the queue's head one by one: a chunk at the head loses its top pages (``hi``
  falls) or, when it has no more than are wanted, leaves whole;
- a page key may have several holders (a request recomputed a cached page: the ``length − 1`` cap, the EAGLE
  drop); vLLM keeps the first holder in its map and the later ones as duplicates, promoted in the order they
  were committed. Here each trace block has a *chain*: its chunks in commit order, so a page's first holder is
  the first chunk of the chain that covers it, and evicting a holder promotes the next one by itself;
- a hit takes each page's first holder out of the queue. Usually that is the chain's first chunk, covering
  ``[0, t)`` and more: it is cut in two (the held ``[0, t)`` takes its place in the chain, the rest stays in the
  queue where it was). Any other layout (pages held by several chunks, a hit taking the middle of a chunk) goes
  through the general path, which cuts chunks page range by page range;
- at release the request's whole pages go to the queue's tail as one run, its partial last page to the
  unhashed part; a trace block's hit pages and the pages computed after them become one chunk when no other
  holder covers the computed pages (else those are a duplicate chunk at the chain's end).

Order mode only: a request starts and releases before the next one, so nothing is held between requests and a
request fits iff its pages fit the pool. ``tests/sim/test_sim_blockchunks.py`` replays random traces (prefix-
chained and not, lengths on page boundaries, the EAGLE drop, small pools) through both pools and compares every
result and the whole queue, page key by page key with each key's holders in order.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq
from kvplan.sim.trace import Request
from kvplan.units import cdiv

Chunk = list[Any]
"""``[trace block, lo, hi, next chunk of the block's chain or None]``; ``lo == hi``: dead (left the queue)."""

_TRIM = 4096


def _covered(c: Chunk) -> int:
    """Leading pages ``[0, x)`` of a trace block that the chain from ``c`` holds."""
    spans = []
    while c is not None:
        spans.append((c[1], c[2]))
        c = c[3]
    x = 0
    for lo, hi in sorted(spans):
        if lo > x:
            break
        x = max(x, hi)
    return x


class ChunkPool:
    semantics = "vllm"
    policy = "lru"

    def __init__(
        self, pages: int, page_tokens: int, block_pages: int, *, eagle_drop: bool = False, check: bool = False
    ) -> None:
        self.pages = pages
        self.page_tokens = page_tokens
        self.k = block_pages
        self.eagle_drop = eagle_drop
        self.check = check
        self.free = pages
        """Unhashed free pages (never used, or a request's partial last page)."""
        self.nhashed = 0
        """Pages in the queue's chunks (hashed, free, reusable)."""
        self.queue: list[Chunk] = []
        self.qhead = 0
        """Index of the queue's first entry not yet consumed."""
        self.chains: dict[int, Chunk] = {}
        """Trace block -> its first chunk (commit order); every chunk of a chain is in the queue or held."""
        self.evictions = 0

    # ------------------------------------------------------------------ Pool

    def free_pages(self) -> int:
        return self.free

    def cached_pages(self) -> int:
        return self.nhashed

    def held_pages(self) -> int:
        return self.pages - self.free - self.nhashed

    def can_ever_fit(self, tokens: int) -> bool:
        return cdiv(tokens, self.page_tokens) <= self.pages

    def describe(self) -> str:
        return (
            f"vLLM block pool: {self.page_tokens}-token blocks + the null block, hash-chain lookup capped at "
            "length − 1, freed hashed blocks to the free queue's tail (LRU), unhashed to its head"
            + (", EAGLE drop of one block" if self.eagle_drop else "")
        )

    def keys_of(self, paging: Paging, r: Request, pages: int) -> list[int]:
        """The trace blocks of the request's first ``pages`` whole pages (a fresh id for a block not listed)."""
        ids = r.blocks
        n = cdiv(pages, self.k)
        keys = ids[:n] if ids is not None else []
        while len(keys) < n:
            keys.append(paging.unique())
        return keys

    # ------------------------------------------------------------------ requests

    def start(self, seq: Seq) -> bool:
        ps, k = self.page_tokens, self.k
        tokens = seq.tokens
        total = cdiv(tokens, ps)
        if total > self.pages:
            return False
        full = tokens // ps
        ids: list[int] = seq.keys
        nb = len(ids)
        # the chains of the leading trace blocks, looked up in growing steps (most requests miss early)
        get = self.chains.get
        heads: list[Any] = []
        i = 0
        step = 8
        while i < nb:
            got = list(map(get, ids[i : i + step]))
            try:
                j = got.index(None)
            except ValueError:
                heads += got
                i += len(got)
                step *= 4
                continue
            heads += got[:j]
            break
        # pages hit: whole blocks while their chain holds all the pages the request has in them
        h = 0
        for bi, c in enumerate(heads):
            need = min(k, full - bi * k)
            cov = c[2] if c[1] == 0 and c[3] is None else _covered(c)
            if cov < need:
                h += cov
                break
            h += need
        h = min(h, max(tokens - 1, 0) // ps)
        if self.eagle_drop and h:
            h -= 1
        # take the hit pages out of the queue (their first holders)
        held: list[list[Chunk]] = []
        chains = self.chains
        nh = cdiv(h, k)
        for bi in range(nh):
            t = min(k, h - bi * k)
            c = heads[bi]
            b = c[0]
            if c[1] == 0 and c[2] >= t:
                if t == c[2]:
                    hc = [b, 0, t, c[3]]
                    c[2] = 0
                else:
                    hc = [b, 0, t, c]
                    c[1] = t
                chains[b] = hc
                held.append([hc])
            else:
                held.append(self._take(b, t))
        self.nhashed -= h
        # new pages: unhashed free ones first, then evictions from the queue's head
        new = total - h
        take = min(new, self.free)
        self.free -= take
        rest = new - take
        if rest:
            self._evict(rest)
        seq.handle = held
        seq.hit_pages = h
        seq.committed = h
        if self.check:
            self.verify(held)
        return True

    def _take(self, b: int, t: int) -> list[Chunk]:
        """Pages ``[0, t)`` of block ``b`` from their first holders (the general path): the held pieces."""
        want = set(range(t))
        held: list[Chunk] = []
        prev: Chunk | None = None
        c = self.chains[b]
        while c is not None and want:
            nxt = c[3]
            mine = want.intersection(range(c[1], c[2]))
            if not mine:
                prev, c = c, nxt
                continue
            want -= mine
            taken = _runs(sorted(mine))
            kept = _runs(sorted(set(range(c[1], c[2])) - mine))
            pieces = [[b, lo, hi, None] for lo, hi in taken]
            held += pieces
            # the kept pages stay in the queue where the chunk was, highest first: c keeps the highest run
            if kept:
                c[1], c[2] = kept[-1]
                extra = [[b, lo, hi, None] for lo, hi in reversed(kept[:-1])]
                if extra:
                    at = self._queue_index(c) + 1
                    self.queue[at:at] = extra
                chain_part = [*pieces, c, *extra]
            else:
                c[2] = c[1]
                chain_part = pieces
            # the pieces take the chunk's place in the chain (same commit order)
            for x, y in pairwise(chain_part):
                x[3] = y
            chain_part[-1][3] = nxt
            if prev is None:
                self.chains[b] = chain_part[0]
            else:
                prev[3] = chain_part[0]
            prev, c = chain_part[-1], nxt
        assert not want, "a hit page without a holder"
        return sorted(held, key=lambda x: x[1])

    def _queue_index(self, c: Chunk) -> int:
        q = self.queue
        for i in range(self.qhead, len(q)):
            if q[i] is c:
                return i
        raise AssertionError("a free chunk is not in the queue")

    def _unlink(self, c: Chunk) -> None:
        chains = self.chains
        b = c[0]
        x = chains[b]
        if x is c:
            if c[3] is None:
                del chains[b]
            else:
                chains[b] = c[3]
            return
        while x[3] is not c:
            x = x[3]
        x[3] = c[3]

    def _evict(self, rest: int) -> None:
        """Evict ``rest`` pages from the queue's head (the caller checked there are that many)."""
        self.evictions += rest
        self.nhashed -= rest
        q = self.queue
        chains = self.chains
        i = self.qhead
        while rest:
            c = q[i]
            n = c[2] - c[1]
            if n > rest:
                c[2] -= rest
                break
            if n:
                rest -= n
                c[2] = c[1]
                if c[3] is None and chains[c[0]] is c:
                    del chains[c[0]]
                else:
                    self._unlink(c)
            i += 1
        if i > _TRIM and 2 * i > len(q):
            del q[:i]
            i = 0
        self.qhead = i

    def commit(self, seq: Seq) -> None:
        raise AssertionError("the chunked vLLM pool replays in order mode only (release commits)")

    def grow(self, seq: Seq, pages: int) -> bool:
        raise AssertionError("the chunked vLLM pool replays in order mode only (no decode)")

    def release(self, seq: Seq) -> None:
        ps, k = self.page_tokens, self.k
        tokens = seq.tokens
        full = tokens // ps
        ids: list[int] = seq.keys
        held: list[list[Chunk]] = seq.handle
        chains = self.chains
        nh = len(held)
        h = seq.hit_pages
        run: list[Chunk] = []
        """The run's chunks, blocks in order, each block's pages ascending (the queue takes it reversed)."""
        for bi in range(nh):
            pieces = held[bi]
            m = min(k, full - bi * k)
            t = min(k, h - bi * k)
            if t < m:
                # pages computed after the hit in this block: one chunk with the hit when nothing else holds them
                b = ids[bi]
                c: Any = chains[b]
                overlap = False
                last = c
                while c is not None:
                    if c[1] < m and c[2] > t:
                        overlap = True
                    last = c
                    c = c[3]
                if not overlap and len(pieces) == 1 and pieces[0][2] == t:
                    pieces[0][2] = m
                else:
                    nc = [b, t, m, None]
                    last[3] = nc
                    pieces = [*pieces, nc]
            run += pieces
        if nh < len(ids):
            rest = ids[nh:]
            m_last = full - (len(ids) - 1) * k
            if chains.keys().isdisjoint(rest):
                new = [[b, 0, k, None] for b in rest]
                new[-1][2] = m_last
                chains.update(zip(rest, new, strict=True))
                run += new
            else:
                for i, b in enumerate(rest, 1):
                    nc = [b, 0, k if i < len(rest) else m_last, None]
                    c = chains.get(b)
                    if c is None:
                        chains[b] = nc
                    else:
                        while c[3] is not None:
                            c = c[3]
                        c[3] = nc
                    run.append(nc)
        self.queue += reversed(run)
        self.nhashed += full
        self.free += cdiv(tokens, ps) - full
        seq.handle = None
        seq.committed = full
        if self.check:
            self.verify()

    # ------------------------------------------------------------------ invariants and views

    def holders(self) -> dict[int, list[int]]:
        """Page key (``block × k + page``) -> the queue positions of its holders, first holder first (tests;
        between requests, when every chunk of a chain is in the queue)."""
        where: dict[tuple[int, int], int] = {}
        pos = 0
        for c in self.queue[self.qhead :]:
            for j in range(c[2] - 1, c[1] - 1, -1):
                where[id(c), j] = pos
                pos += 1
        out: dict[int, list[int]] = {}
        for b, c in self.chains.items():
            while c is not None:
                for j in range(c[1], c[2]):
                    out.setdefault(b * self.k + j, []).append(where[id(c), j])
                c = c[3]
        return out

    def queue_keys(self) -> list[int]:
        """The hashed part of the free queue, head first, as page keys (tests)."""
        return [c[0] * self.k + j for c in self.queue[self.qhead :] for j in range(c[2] - 1, c[1] - 1, -1)]

    def verify(self, held: list[list[Chunk]] | None = None) -> None:
        """Debug mode: the invariants (``held``: the chunks the running request holds, between start and release)."""
        held = held or []
        live = [c for c in self.queue[self.qhead :] if c[2] > c[1]]
        assert all(c[2] >= c[1] >= 0 and c[2] <= self.k for c in self.queue[self.qhead :]), "a chunk out of range"
        assert len({id(c) for c in live}) == len(live), "a chunk twice in the queue"
        assert sum(c[2] - c[1] for c in live) == self.nhashed, "queued pages != nhashed"
        mine = {id(c) for pieces in held for c in pieces}
        in_chains: set[int] = set()
        for b, c in self.chains.items():
            assert c is not None, "an empty chain"
            pages: dict[int, int] = {}
            while c is not None:
                assert c[0] == b and c[2] > c[1], f"chain of {b} holds a dead or foreign chunk"
                assert id(c) not in in_chains, "a chunk in two chains"
                in_chains.add(id(c))
                for j in range(c[1], c[2]):
                    pages[j] = pages.get(j, 0) + 1
                c = c[3]
        assert {id(c) for c in live} | mine == in_chains, "chains and queue + held chunks differ"
        held_pages = sum(c[2] - c[1] for pieces in held for c in pieces)
        assert self.free >= 0 and self.nhashed >= 0, "negative counts"
        assert self.free + self.nhashed + held_pages <= self.pages, "free + cached + held > pool"


def _runs(xs: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct ints as maximal ``[lo, hi)`` runs."""
    out: list[tuple[int, int]] = []
    for x in xs:
        if out and out[-1][1] == x:
            out[-1] = (out[-1][0], x + 1)
        else:
            out.append((x, x + 1))
    return out
