"""vLLM's block pool kept per trace block instead of per page (the same pool, page for page).

When the trace's blocks are ``k`` engine pages each (``Paging`` "expand": 512-token Mooncake blocks, 64-token
pages), ``BlockPool`` does its work per page: a hash-map insert when a page is committed, a delete when it is
evicted, a queue entry and a mark when it is freed — about 160 of each per request on the Mooncake traces, and
the ``k``-fold page keys built before. This pool names pages by *segment*: a request's pages are cut into its
trace blocks (``k`` pages each, the last one as many as the input has whole pages) and then, past the input,
runs of ``k`` generated pages, each named by a fresh id (a generated page's key is its own: only the request
itself can hit it, after a preemption). Pages are kept in *chunks*: pages ``[lo, hi)`` of one segment that came
from one commit (a *group*, ``gid``) and share their state — free in the queue, or held by the same requests. A
request then costs its segments, not its pages. The semantics are ``BlockPool``'s (vLLM 0.33.0), unchanged
(how each is kept, and the test that checks it, at ``ChunkPool``).
"""

from __future__ import annotations

from itertools import pairwise, repeat
from typing import Any

from kvplan.sim.blockpool import describe_vllm_pool
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Seq, cached_prefix
from kvplan.sim.trace import Request

Chunk = list[Any]
"""``[segment key, lo, hi, next chunk of the key's chain or None, gid, references]``: references 0 = free, in
the queue (``lo == hi``: dead, it left the queue); above 0 = held by that many requests."""

Piece = tuple[Chunk, int, int, int, int]
"""What a request holds: pages ``[lo, hi)`` of group ``gid`` of segment ``key``, ``(chunk, key, gid, lo, hi)``
with the chunk that held exactly them when they were taken (still so unless another request's hit cut it)."""

_TRIM = 4096


def _covered(c: Chunk | None, need: int) -> int:
    """Leading pages ``[0, x)`` of a segment that the chain from ``c`` holds, found up to ``need`` (a chain of
    many duplicates is not walked past the chunks that cover what is needed)."""
    spans: list[tuple[int, int]] = []
    x = 0
    while c is not None:
        lo: int = c[1]
        hi: int = c[2]
        spans.append((lo, hi))
        if lo <= x < hi:
            x = hi
            if x >= need:
                return x
        c = c[3]
    x = 0
    for a, b in sorted(spans):
        if a > x:
            break
        x = max(x, b)
    return x


def _first_holders(c: Chunk | None, t: int) -> list[tuple[Chunk, int, int]]:
    """Pages ``[0, t)`` of a segment as (chunk, lo, hi) runs of their first holders, ascending."""
    want = set(range(t))
    out: list[tuple[Chunk, int, int]] = []
    while c is not None and want:
        mine = want.intersection(range(c[1], c[2]))
        if mine:
            want -= mine
            out += [(c, lo, hi) for lo, hi in _runs(sorted(mine))]
        c = c[3]
    assert not want, "a hit page without a holder"
    return sorted(out, key=lambda x: x[1])


def _runs(xs: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct ints as maximal ``[lo, hi)`` runs."""
    out: list[tuple[int, int]] = []
    for x in xs:
        if out and out[-1][1] == x:
            out[-1] = (out[-1][0], x + 1)
        else:
            out.append((x, x + 1))
    return out


# BlockPool's semantics, kept per chunk:
# - the free queue is ``[unhashed][hashed, least recently freed first]``; unhashed free pages are only counted
#   (their identity never decides a hit), hashed ones are the queue's chunks in order, a chunk's pages ``hi - 1``
#   down to ``lo`` (a release frees a request's pages tail first);
# - eviction takes pages from the queue's head one by one: a chunk at the head loses its top pages (``hi``
#   falls) or, when it has no more than are wanted, leaves whole;
# - a page key may have several holders (two requests computed it, or the ``length - 1`` cap or the EAGLE drop
#   recomputed a cached page); vLLM keeps the first holder in its map and later ones as duplicates, promoted in
#   commit order. Here each segment key has a *chain*: its chunks, free and held, in commit order, so a page's
#   first holder is the first chunk of the chain that covers it, and evicting a holder promotes the next by itself;
# - a hit takes each page's first holder: a free one leaves the queue (its chunk is cut: the taken pages become a
#   held chunk in its place in the chain, the rest stays in the queue where it was), a held one gains a reference
#   (its chunk is cut where the references differ). A request remembers what it holds as ``(key, gid, lo, hi)``
#   ranges, which stay valid however the chunks are cut later;
# - at release the request's whole pages go to the queue's tail as one run, those other requests still hold
#   excepted, and its unhashed pages to the unhashed part.
# ``tests/sim/test_sim_blockchunks.py`` replays random traces (prefix-chained and not, lengths on page boundaries,
# the EAGLE drop, small pools; order mode, and occupancy mode with shared pages and preemptions) through this pool
# and ``BlockPool`` and compares every result and the final queue, page key by page key with each key's holders
# in order.
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
        """Unhashed free pages (never used, or freed before they were whole or hashed)."""
        self.nhashed = 0
        """Pages in the queue's chunks (hashed, free, reusable)."""
        self.queue: list[Chunk] = []
        self.qhead = 0
        """Index of the queue's first entry not yet consumed."""
        self.chains: dict[int, Chunk] = {}
        """Segment key -> its first chunk (commit order); a chain holds exactly the live free and held chunks."""
        self.tails: dict[int, Chunk] = {}
        """Segment key -> its chain's last chunk (a commit appends there)."""
        self.gids = 0
        self.evictions = 0

    # ------------------------------------------------------------------ Pool

    def free_pages(self) -> int:
        return self.free

    def cached_pages(self) -> int:
        return self.nhashed

    def held_pages(self) -> int:
        return self.pages - self.free - self.nhashed

    def can_ever_fit(self, tokens: int) -> bool:
        return -(-tokens // self.page_tokens) <= self.pages

    def describe(self) -> str:
        return describe_vllm_pool(self.page_tokens, self.eagle_drop)

    # ------------------------------------------------------------------ segments

    def keys_of(self, paging: Paging, r: Request, pages: int) -> list[int]:
        """Segment keys of the request's first ``pages`` whole input pages: its trace blocks (a fresh id for a
        block the trace does not list)."""
        ids = r.blocks
        n = -(-pages // self.k)
        keys = ids[:n] if ids is not None else []
        while len(keys) < n:
            keys.append(paging.unique())
        return keys

    def extend_keys(self, seq: Seq, paging: Paging) -> None:
        """Fresh keys for the segments of generated pages, up to the sequence's whole pages."""
        k = self.k
        f_in = seq.req.input_tokens // self.page_tokens
        full = seq.tokens // self.page_tokens
        need = -(-f_in // k) + (-(-(full - f_in) // k) if full > f_in else 0)
        keys = seq.keys
        while len(keys) < need:
            keys.append(paging.unique())

    # ------------------------------------------------------------------ requests

    def start(self, seq: Seq) -> bool:
        ps, k = self.page_tokens, self.k
        tokens = seq.tokens
        total = -(-tokens // ps)
        full = tokens // ps
        f_in = seq.req.input_tokens // ps
        nb_in = -(-f_in // k)
        nseg = -(-full // k) if full <= f_in else nb_in - (-(full - f_in) // k)
        keys: list[int] = seq.keys
        heads = cached_prefix(self.chains.get, keys, nseg)
        # pages hit: whole segments while their chain holds all the pages the request has in them
        h = 0
        for i, c in enumerate(heads):
            off = i * k if i < nb_in else f_in + (i - nb_in) * k
            need = min(k if i >= nb_in else f_in - off, k, full - off)
            cov = c[2] if c[1] == 0 and c[3] is None else _covered(c, need)
            if cov < need:
                h += cov
                break
            h += need
        h = min(h, max(tokens - 1, 0) // ps)
        if self.eagle_drop and h:
            h -= 1
        # the hit pages' first holders; those free in the queue count against the pool
        plan: list[tuple[Chunk, int, list[tuple[Chunk, int, int]] | None]] = []
        idle = 0
        i = 0
        while True:
            off = i * k if i < nb_in else f_in + (i - nb_in) * k
            if off >= h:
                break
            t = min(k if i >= nb_in else f_in - off, k, h - off)
            c = heads[i]
            if c[1] == 0 and c[2] >= t:
                plan.append((c, t, None))
                if not c[5]:
                    idle += t
            else:
                parts = _first_holders(c, t)
                plan.append((c, t, parts))
                idle += sum(b - a for x, a, b in parts if not x[5])
            i += 1
        new = total - h
        if new + idle > self.free + self.nhashed:
            return False
        # take them: free ones leave the queue, held ones gain a reference
        chains = self.chains
        pieces: list[Piece] = []
        for i, (c, t, runs) in enumerate(plan):
            key = keys[i]
            if runs is None:
                gid = c[4]
                if not c[5]:
                    if t == c[2]:
                        hc = chains[key] = [key, 0, t, c[3], gid, 1]
                        c[2] = 0
                        if hc[3] is None:
                            self.tails[key] = hc
                    else:
                        hc = chains[key] = [key, 0, t, c, gid, 1]
                        c[1] = t
                    pieces.append((hc, key, gid, 0, t))
                    continue
                if t < c[2]:
                    c[3] = nc = [key, t, c[2], c[3], gid, c[5]]
                    if nc[3] is None:
                        self.tails[key] = nc
                    c[2] = t
                c[5] += 1
                pieces.append((c, key, gid, 0, t))
            else:
                for x, a, b in runs:
                    gid = x[4]
                    got = self._share(x, a, b) if x[5] else self._take_free(x, a, b)
                    pieces.append((got, key, gid, a, b))
        self.nhashed -= idle
        # new pages: unhashed free ones first, then evictions from the queue's head
        take = min(new, self.free)
        self.free -= take
        if new > take:
            self._evict(new - take)
        seq.handle = [pieces, total]
        seq.hit_pages = h
        seq.committed = h
        if self.check:
            self.verify()
        return True

    def _take_free(self, c: Chunk, a: int, b: int) -> Chunk:
        """Pages ``[a, b)`` of free chunk ``c`` held now (the chunk that holds them); what is left stays in the
        queue where ``c`` was, and ``c`` keeps the pages above ``b`` (a chunk's runs are taken in ascending
        order)."""
        key, lo, hi, gid = c[0], c[1], c[2], c[4]
        hc = [key, a, b, c[3], gid, 1]
        if a == lo and b == hi:
            c[2] = lo
            self._replace(c, [hc])
            return hc
        if a == lo:
            c[1] = b
        elif b == hi:
            c[2] = a
        else:
            # the middle: c keeps [b, hi) (first in the queue), [lo, a) is queued right after it
            c[1] = b
            rest = [key, lo, a, hc[3], gid, 0]
            hc[3] = rest
            if rest[3] is None:
                self.tails[key] = rest
            q = self.queue
            q.insert(next(i for i in range(self.qhead, len(q)) if q[i] is c) + 1, rest)
        c[3] = hc
        if hc[3] is None:
            self.tails[key] = hc
        return hc

    def _share(self, c: Chunk, a: int, b: int) -> Chunk:
        """Held chunk ``c`` gains a reference on ``[a, b)`` (the chunk that holds them): cut where the references
        differ; ``c`` keeps the pages above ``b`` when there are any."""
        key, lo, hi, gid, refs = c[0], c[1], c[2], c[4], c[5]
        mid = [key, a, b, None, gid, refs + 1]
        parts = [mid]
        if lo < a:
            parts.append([key, lo, a, None, gid, refs])
        if b < hi:
            c[1] = b
            parts.insert(0, c)
        else:
            c[1], c[5] = a, refs + 1
            mid = parts[0] = c
        tail = c[3]
        for x, y in pairwise(parts):
            x[3] = y
        parts[-1][3] = tail
        if tail is None:
            self.tails[key] = parts[-1]
        return mid

    def _replace(self, c: Chunk, by: list[Chunk]) -> None:
        """``by`` (linked, its last one's next already set) takes ``c``'s place in its chain."""
        chains = self.chains
        key = c[0]
        if by[-1][3] is None:
            self.tails[key] = by[-1]
        x = chains[key]
        if x is c:
            chains[key] = by[0]
            return
        while x[3] is not c:
            x = x[3]
        x[3] = by[0]

    def _unlink(self, c: Chunk) -> None:
        chains = self.chains
        key = c[0]
        x = chains[key]
        if x is c:
            if c[3] is None:
                del chains[key], self.tails[key]
            else:
                chains[key] = c[3]
            return
        while x[3] is not c:
            x = x[3]
        x[3] = c[3]
        if c[3] is None:
            self.tails[key] = x

    def _evict(self, rest: int) -> None:
        """Evict ``rest`` pages from the queue's head (the caller checked there are that many)."""
        self.evictions += rest
        self.nhashed -= rest
        q = self.queue
        chains, tails = self.chains, self.tails
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
                    del chains[c[0]], tails[c[0]]
                else:
                    self._unlink(c)
            i += 1
        if i > _TRIM and 2 * i > len(q):
            del q[:i]
            i = 0
        self.qhead = i

    def commit(self, seq: Seq) -> None:
        """Hash the whole pages computed so far: one new chunk per segment they fall in, at its chain's end."""
        ps, k = self.page_tokens, self.k
        handle = seq.handle
        full = min(seq.tokens // ps, handle[1])
        p = seq.committed
        if full <= p:
            return
        seq.committed = full
        f_in = seq.req.input_tokens // ps
        keys: list[int] = seq.keys
        pieces: list[Piece] = handle[0]
        chains = self.chains
        self.gids += 1
        gid = self.gids
        if p % k == 0 and full <= f_in:
            # input pages from a segment's start (the usual commit): whole segments, the last one up to ``full``
            i0, i1 = p // k, -(-full // k)
            seg = keys[i0:i1]
            if chains.keys().isdisjoint(seg):
                n = len(seg)
                new: list[Chunk] = list(
                    map(
                        list,
                        zip(
                            seg, repeat(0, n), repeat(k, n), repeat(None, n), repeat(gid, n), repeat(1, n), strict=True
                        ),
                    )
                )
                last = new[-1]
                last[2] = full - (i1 - 1) * k
                chains.update(zip(seg, new, strict=True))
                self.tails.update(zip(seg, new, strict=True))
                pieces += zip(new, seg, repeat(gid, n), repeat(0, n), repeat(k, n), strict=True)
                pieces[-1] = (last, last[0], gid, 0, last[2])
                return
        nb_in = -(-f_in // k)
        tails = self.tails
        while p < full:
            if p < f_in:
                i = p // k
                off = i * k
                end = min(off + k, f_in, full)
            else:
                i = nb_in + (p - f_in) // k
                off = f_in + (i - nb_in) * k
                end = min(off + k, full)
            key = keys[i]
            nc = [key, p - off, end - off, None, gid, 1]
            c = tails.get(key)
            if c is None:
                chains[key] = nc
            else:
                c[3] = nc
            tails[key] = nc
            pieces.append((nc, key, gid, p - off, end - off))
            p = end

    def grow(self, seq: Seq, pages: int) -> bool:
        free = self.free
        if pages <= free:
            self.free = free - pages
        elif pages > free + self.nhashed:
            return False
        else:
            self.free = 0
            rest = pages - free
            c = self.queue[self.qhead]
            if c[2] - c[1] > rest:
                # ``_evict``'s usual step, inline (a decoding request's next page): the head chunk keeps pages
                c[2] -= rest
                self.evictions += rest
                self.nhashed -= rest
            else:
                self._evict(rest)
        seq.handle[1] += pages
        return True

    def release(self, seq: Seq) -> None:
        self.commit(seq)
        pieces, held = seq.handle
        chains = self.chains
        run: list[Chunk] = []
        freed = 0
        for c, key, gid, a, b in reversed(pieces):
            if c[1] == a and c[2] == b:
                # the chunk that held these pages still holds exactly them
                if c[5] == 1:
                    c[5] = 0
                    run.append(c)
                    freed += b - a
                else:
                    c[5] -= 1
                continue
            # another request's hit cut it: the group's chunks within [a, b)
            mine = []
            x = chains[key]
            while x is not None:
                if x[4] == gid and a <= x[1] and x[2] <= b:
                    mine.append(x)
                x = x[3]
            mine.sort(key=lambda x: -x[1])
            for c in mine:
                if c[5] == 1:
                    c[5] = 0
                    run.append(c)
                    freed += c[2] - c[1]
                else:
                    c[5] -= 1
        q = self.queue
        q += run
        self.nhashed += freed
        if len(q) - self.qhead > 2 * self.nhashed + _TRIM:
            # mostly dead entries (chunks hits took out) in a pool that seldom evicts: drop them
            self.queue = [c for c in q[self.qhead :] if c[2] > c[1]]
            self.qhead = 0
        self.free += held - seq.committed
        seq.handle = None
        if self.check:
            self.verify()

    # ------------------------------------------------------------------ invariants and views

    def holders(self) -> dict[int, list[int]]:
        """Page key (``key × k + page``) -> the queue positions of its holders, first holder first (tests; when
        nothing is held)."""
        where: dict[tuple[int, int], int] = {}
        pos = 0
        for c in self.queue[self.qhead :]:
            for j in range(c[2] - 1, c[1] - 1, -1):
                where[id(c), j] = pos
                pos += 1
        out: dict[int, list[int]] = {}
        for key, c in self.chains.items():
            while c is not None:
                for j in range(c[1], c[2]):
                    out.setdefault(key * self.k + j, []).append(where[id(c), j])
                c = c[3]
        return out

    def queue_keys(self) -> list[int]:
        """The hashed part of the free queue, head first, as page keys (tests)."""
        return [c[0] * self.k + j for c in self.queue[self.qhead :] for j in range(c[2] - 1, c[1] - 1, -1)]

    def verify(self) -> None:
        queued = self.queue[self.qhead :]
        live = [c for c in queued if c[2] > c[1]]
        assert all(0 <= c[1] <= c[2] <= self.k for c in queued), "a chunk out of range"
        assert all(c[5] == 0 for c in live), "a held chunk in the queue"
        assert len({id(c) for c in live}) == len(live), "a chunk twice in the queue"
        assert sum(c[2] - c[1] for c in live) == self.nhashed, "queued pages != nhashed"
        free_in_chains: set[int] = set()
        held = 0
        for key, c in self.chains.items():
            seen: dict[int, set[int]] = {}
            while c is not None:
                assert c[0] == key and c[2] > c[1], f"chain of {key} holds a dead or foreign chunk"
                pages = seen.setdefault(c[4], set())
                assert pages.isdisjoint(range(c[1], c[2])), "a group's page in two chunks"
                pages.update(range(c[1], c[2]))
                if c[5]:
                    held += c[2] - c[1]
                else:
                    assert id(c) not in free_in_chains, "a chunk in two chains"
                    free_in_chains.add(id(c))
                last, c = c, c[3]
            assert self.tails[key] is last, f"the tail of {key}'s chain is not its last chunk"
        assert self.tails.keys() == self.chains.keys(), "tails for chains that are gone"
        assert {id(c) for c in live} == free_in_chains, "the queue's chunks and the chains' free chunks differ"
        assert self.free >= 0 and self.nhashed >= 0, "negative counts"
        assert self.free + self.nhashed + held <= self.pages, "free + cached + held > pool"
