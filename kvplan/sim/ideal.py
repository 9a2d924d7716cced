"""The published hit-rate semantics: the trace's own blocks, requests in order, no engine in the way.

This is the semantics of the Mooncake paper's Figure 9 and of kvcache.ai's simulator (``kvcache-simulator``):

- a request's hit is the longest run of its leading blocks that are cached *before* it runs; a block weighs
  ``min(block, input − i × block)`` tokens (the partial last block weighs its remainder);
- after the request all its blocks are cached (the request's KV is inserted after it);
- ``lru``: leaf-LRU over the prefix trie. Only leaves are evicted, the running request's path is protected, and
  insertion stops when the pool holds nothing but that path (its first ``capacity`` blocks stay);
- ``fifo``: block FIFO. Blocks leave in insertion order, hits do not refresh them, and any block may go, the
  request's own included.

Leaf-LRU is a stack algorithm, so one pass gives the whole hit-rate curve (``lru_curve``, where the argument and
where kvcache-simulator 0.1.3 differs below the longest request are).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable
from itertools import compress, islice
from operator import eq

from kvplan.sim.fifo_caches import _fifo_misses, _FifoCaches
from kvplan.sim.idset import IdSet
from kvplan.sim.result import HitStats, ReplayCounts, SimResult, Sweep, SweepPoint, ideal_result, ideal_sweep
from kvplan.sim.result import Window as Window
from kvplan.sim.trace import Request

Progress = Callable[[int], None]
"""Called with the number of requests replayed so far (every few hundred requests)."""

POLICIES = ("lru", "fifo")


def _hit_tokens(blocks: int, input_tokens: int, block_tokens: int) -> int:
    """Tokens of the first ``blocks`` blocks: full blocks, the last one partial."""
    return min(blocks * block_tokens, input_tokens)


def _tokens(r: Request, block_tokens: int) -> int:
    """Block-weighted tokens of a request (kvcache.ai's denominator): the tokens its listed blocks cover."""
    assert r.blocks is not None
    return min(len(r.blocks) * block_tokens, r.input_tokens)


def replay(
    requests: Iterable[Request],
    *,
    block_tokens: int,
    capacity: int | None,
    policy: str,
    window: Window,
    check: bool = False,
    progress: Progress | None = None,
) -> SimResult:
    """One capacity (``None``: unbounded) under leaf-LRU or block FIFO; every counter is exact."""
    if policy not in POLICIES:
        raise ValueError(f"ideal semantics: unknown policy {policy!r}")
    stats = HitStats()
    cache: OrderedDict[int, None] = OrderedDict()
    cap = capacity
    evictions = 0
    peak = 0
    used_sum = 0
    n = 0
    filled_at: int | None = None
    input_tokens = 0
    lru = policy == "lru"
    start = window.start
    for r in requests:
        ids = r.blocks
        if ids is None:
            raise ValueError("ideal semantics needs block ids")
        input_tokens += r.input_tokens
        h = 0
        for b in ids:
            if b in cache:
                h += 1
            else:
                break
        if r.index >= start:
            stats.add(_tokens(r, block_tokens), _hit_tokens(h, r.input_tokens, block_tokens), len(ids), h)
        if cap is None:
            cache.update(dict.fromkeys(ids))
        elif cap > 0 and lru:
            move = cache.move_to_end
            for b in reversed(ids):
                if b in cache:
                    move(b)
                else:
                    cache[b] = None
            over = len(cache) - cap
            if over > 0:
                if filled_at is None:
                    filled_at = r.index
                popitem = cache.popitem
                for _ in range(over):
                    popitem(last=False)
                # the request's own deepest blocks that do not fit were never inserted, not evicted
                evictions += over - max(0, len(ids) - cap)
            elif over == 0 and filled_at is None:
                filled_at = r.index
        elif cap > 0:
            for b in ids:
                if b in cache:
                    continue
                if len(cache) >= cap:
                    cache.popitem(last=False)
                    evictions += 1
                cache[b] = None
                if filled_at is None and len(cache) >= cap:
                    filled_at = r.index
        if check:
            _check(cache, cap, ids, lru)
        used = len(cache)
        peak = max(peak, used)
        used_sum += used
        n += 1
        if progress is not None and not n % 512:
            progress(n)
    counts = ReplayCounts(n, evictions, peak, used_sum, filled_at, input_tokens)
    return ideal_result(policy, window, block_tokens, cap, stats, counts)


def _check(cache: OrderedDict[int, None], cap: int | None, ids: list[int], lru: bool) -> None:
    if cap is not None:
        assert len(cache) <= cap, f"cache holds {len(cache)} blocks, capacity {cap}"
    if lru and cap is not None and cap > 0:
        # the request's first min(len, cap) blocks are cached and are the most recent, root last
        keep = ids[: min(len(ids), cap)]
        tail = list(cache)[-len(keep) :] if keep else []
        assert tail == keep[::-1], "leaf-LRU: the request's path is not on top of the stack"
        # every cached block's parent (in this request) is cached: only leaves were evicted
        for i in range(1, len(ids)):
            if ids[i] in cache:
                assert ids[i - 1] in cache, "leaf-LRU evicted an inner node"


_TREE_BITS = 16
"""The Fenwick tree starts with 2**_TREE_BITS slots (tests lower it to exercise the renumbering)."""


_DENSE_IDS = 1 << 25
"""Block ids below this are remembered as seen in a bytearray (one byte each: trace ids are mostly dense); the
rest in an ``IdSet`` (about 8 bytes each: hashed ids)."""


def _grow_dense(dense: bytearray, ids: list[int]) -> None:
    """Grow the byte map of seen ids to cover the request's ids below ``_DENSE_IDS`` (doubling, at most
    ``_DENSE_IDS`` bytes): every such id gets its byte before it is marked, since one that went to the set would
    later be read from the map as never seen. Ids past the map do not grow it (hashed ids would fill it at once)."""
    nd = len(dense)
    if nd >= _DENSE_IDS or not ids:
        return
    top = max(ids)
    if top >= _DENSE_IDS:
        if min(ids) >= _DENSE_IDS:  # hashed ids: nothing for the map
            return
        top = max((b for b in ids if b < _DENSE_IDS), default=-1)
    if top >= nd:
        dense.extend(bytes(min(max(top + 1, 2 * nd), _DENSE_IDS) - nd))


def _listed_run(ids: list[int], dense: bytearray, sparse: IdSet) -> int:
    """The start of the request's trailing run of blocks that no earlier request listed (no id repeats within the
    run); then marks all the request's blocks listed. ``dense`` has a byte per id below ``_DENSE_IDS`` (grown here
    as ids come), ``sparse`` holds the larger listed ids (it may take an id as listed that is not: the run then
    ends early, which changes no hit); ids are non-negative (the trace readers check)."""
    j = _cold_run(ids, dense, sparse)
    _mark_listed(ids[:j], dense, sparse)
    return j


def _cold_run(ids: list[int], dense: bytearray, sparse: IdSet) -> int:
    """``_listed_run`` less the marking of the blocks before the run (the FIFO curve skips it when a cache holds
    them all: they were listed).

    The run is scanned from the end, each block marked as it joins, so a repeated id ends the run at its later
    copy. A block marked listed that was not is only looked up when it need not be (it is in no cache): so a
    request that fails part way through the byte map is simply read again the slow way."""
    j = len(ids)
    try:
        while j and not dense[ids[j - 1]]:
            j -= 1
            dense[ids[j]] = 1
        return j
    except IndexError:
        pass
    _grow_dense(dense, ids)
    nd = len(dense)
    j = len(ids)
    while j:
        b = ids[j - 1]
        if b < nd:
            if dense[b]:
                break
            dense[b] = 1
            j -= 1
            continue
        k = sparse.add_run(ids, j, nd)  # the ids past the map, down to one listed before or one in the map
        if not k or ids[k - 1] >= nd:
            return k
        j = k
    return j


def _mark_listed(blocks: list[int], dense: bytearray, sparse: IdSet) -> None:
    """Mark blocks listed: a byte each below ``_DENSE_IDS`` (the map grown to cover them), the rest in the set."""
    try:
        for b in blocks:
            dense[b] = 1
        return
    except IndexError:
        pass
    _grow_dense(dense, blocks)
    nd = len(dense)
    for b in blocks:
        if b < nd:
            dense[b] = 1
    big = [b for b in blocks if b >= nd]
    if big:
        sparse.add_all(big)


# FIFO is not a stack algorithm (a larger pool can hit less), so each capacity needs its own cache; reading the
# trace once still saves a parse per capacity. A cache is a set of blocks and a deque of the same blocks in
# insertion order (at most ``C`` long: an append to a full one drops the oldest), and a request's update is
# whole-request work: its blocks not cached go in together, and the oldest entries they displace leave
# together. That equals inserting block by block (each insertion evicting the oldest when full) unless a
# displaced entry is one of the request's cached blocks that comes after one of its insertions (block by block
# would insert it again; a cached block before the first insertion was passed already, and leaves either way);
# then, when the request alone overflows the cache, and when an id repeats within the request, the request goes
# block by block. A full cache stays full (it holds ``C`` blocks from then on), so there each insertion
# displaces one entry.
#
# Work the capacities share is done once per request: the request's trailing run of blocks that no earlier
# request listed (``cold``; one byte per id, an ``IdSet`` past ``_DENSE_IDS``) is absent at every capacity, so
# only the blocks before it (``warm``) are looked up in each cache. In a prefix-chained trace ``cold`` is every new
# block. Hits are counted the same way: each measured request's ``warm`` blocks, less what a capacity missed.
def fifo_curve(
    requests: Iterable[Request],
    *,
    block_tokens: int,
    capacities: list[int],
    window: Window,
    progress: Progress | None = None,
) -> Sweep:
    """Block FIFO at every capacity in one read of the trace: one cache per capacity, updated side by side
    (how: the comment above)."""
    fc = _FifoCaches(capacities)
    live, caches, orders, full = fc.live, fc.caches, fc.orders, fc.full
    lost_units, lost_tokens = fc.lost_units, fc.lost_tokens
    nl = len(live)
    low = live[0] if live else 0
    all_full = not nl
    # hits: every measured request's ``warm`` run, less what each capacity missed of it
    warm_units = warm_tokens = 0
    dense = bytearray()
    sparse = IdSet(exact=False)  # a block wrongly taken as listed is only looked up, and missed, in each cache
    measured_tokens = measured_blocks = input_tokens = n = 0
    start = window.start
    for r in requests:
        ids = r.blocks
        assert ids is not None
        length = r.input_tokens
        input_tokens += length
        nb = len(ids)
        w = _cold_run(ids, dense, sparse)
        warm = ids[:w]
        cold = ids[w:]
        measured = r.index >= start
        wt = min(w * block_tokens, length)
        if measured:
            measured_tokens += min(nb * block_tokens, length)
            measured_blocks += nb
            warm_units += w
            warm_tokens += wt
        distinct: bool | None = None
        """Whether no id repeats within the request (found when needed: ``cold`` has no repeats)."""
        covered = False  # whether a cache holds all of ``warm`` (then every block of it was listed and marked)
        for k in range(nl):
            cache = caches[k]
            if not w or cache.issuperset(warm):
                covered = True
                new = cold
                behind = False  # whether a cached block of the request comes after one of its insertions
            else:
                h, behind, new = _fifo_misses(cache, ids, warm)
                if measured:
                    lost_units[k] += w - h
                    lost_tokens[k] += wt - min(h * block_tokens, length)
                if distinct is None:
                    distinct = len(set(ids)) == nb
            if all_full and not behind and len(new) <= low and (new is cold or distinct):
                # the common case: every cached block comes before the first insertion, and as many of the oldest
                # entries leave as go in (all at once: the new blocks are distinct and fit)
                if new:
                    order = orders[k]
                    cache.difference_update(islice(order, len(new)))
                    cache.update(new)
                    order.extend(new)
                continue
            if not new:
                continue
            if distinct is None:
                distinct = len(set(ids)) == nb
            if fc.insert(k, ids, warm, new, behind=behind, distinct=distinct, before_window=r.index < start):
                all_full = all(full)
        if not covered:
            _mark_listed(warm, dense, sparse)
        n += 1
        if progress is not None and not n % 512:
            progress(n)
    tally = (n, measured_tokens, measured_blocks, input_tokens)
    points = fc.points(warm_tokens, warm_units)
    return ideal_sweep("fifo", window, block_tokens, tally, points, "one read, one FIFO per capacity")


def reuse_bound(requests: Iterable[Request], *, block_tokens: int, window: Window) -> HitStats:
    """Hits with an unbounded cache: each request's leading blocks seen in any earlier request."""
    seen: set[int] = set()
    stats = HitStats()
    for r in requests:
        ids = r.blocks
        assert ids is not None
        h = 0
        for b in ids:
            if b in seen:
                h += 1
            else:
                break
        if r.index >= window.start:
            stats.add(_tokens(r, block_tokens), _hit_tokens(h, r.input_tokens, block_tokens), len(ids), h)
        seen.update(ids)
    return stats


def _mark_runs(tree: list[int], size: int, runs: list[int]) -> int:
    """Add one at every time of each run ``lo..hi`` (``runs`` is flat: lo, hi, lo, hi, ...) to the Fenwick tree
    ``tree[1..size]``; returns the number of times marked.

    A node ``j`` covers the times ``(j − lowbit(j), j]``. The nodes covering any time of a run are the run's own
    times, each gaining its overlap ``min(lowbit(j), j − lo + 1)``, and the nodes above ``hi`` on ``hi``'s update
    path (the only ones that cover ``hi``), each gaining ``min(hi − (j − lowbit(j)), hi − lo + 1)``: about
    ``(hi − lo) + log(size)`` steps instead of ``(hi − lo + 1) × log(size)`` for the times one by one."""
    marked = 0
    for at in range(0, len(runs), 2):
        lo = runs[at]
        hi = runs[at + 1]
        k = hi - lo + 1
        marked += k
        if k == 1:
            j = lo
            while j <= size:
                tree[j] += 1
                j += j & -j
            continue
        for j in range(lo, hi + 1):
            w = j & -j
            tree[j] += w if w <= j - lo else j - lo + 1
        j = hi + (hi & -hi)
        while j <= size:
            w = hi - j + (j & -j)
            tree[j] += w if w < k else k
            j += j & -j
    return marked


def _renumber(
    who: list[int], last: dict[int, int], now: int, track: int, nb: int, size: int
) -> tuple[list[int], list[int], int, int]:
    """Reference times live in a Fenwick tree (and a time -> block list) of a fixed size; when it fills, the live
    times are renumbered (dead times dropped) and only the ``max(capacities)`` most recently used blocks are kept
    (a block deeper than that misses at every capacity), and the tree doubles only when those would fill more
    than half of it (so at most about 4 × the largest capacity).

    Renumber the live times 1..L in order, keeping only the ``track`` most recent blocks (the others are deeper
    than every capacity from now on); the tree doubles while they and a request of ``nb`` blocks would fill more
    than half of it. ``last`` is updated in place; returns the new (empty) tree, ``who``, size and time."""
    get = last.get
    times = who[1 : now + 1]
    live = list(compress(times, map(eq, map(get, times), range(1, now + 1))))
    for blk in live[: max(len(live) - track, 0)]:
        del last[blk]
    live = live[-track:]
    while 2 * (len(live) + nb) > size:
        size *= 2
    tree = [0] * (size + 1)
    who = [0, *live] + [0] * (size - len(live))
    last.update(zip(live, range(1, len(live) + 1), strict=True))
    return tree, who, size, len(live)


# Leaf-LRU is a stack algorithm. Reference each request's blocks deepest first, so that a block is always more
# recent than everything below it: then the least recently used block is always a leaf, insertion stopping at
# ``capacity`` keeps the top of the stack, and the cache of ``C`` blocks is the top ``C`` of one LRU stack. A block
# hits at capacity ``C`` iff its stack distance at the start of its request is at most ``C``, and along a request's
# path the distances increase, so the hits form a prefix. One pass over the trace that records each reference's
# stack distance therefore gives the whole hit-rate curve. Distances come from a Fenwick tree over
# reference times that marks a time dead when its block is referenced again.
# kvcache-simulator (0.1.3) agrees with this exactly at every capacity of at least the longest request (in
# blocks), and with FIFO at every capacity. Below that its leaf-LRU differs: it protects only the path nodes that
# were cached *before* the request, so when a path does not fit, inserting a block evicts the request's own newest
# block (the new block's parent) and insertion stops, one block short. That is not a stack algorithm, which is why
# kvcache.ai's published LRU curves dip at small capacities (reference-results/README.md); kvplan keeps the path's
# first ``capacity`` blocks, and its curve never falls as the pool grows.
def lru_curve(
    requests: Iterable[Request],
    *,
    block_tokens: int,
    capacities: list[int],
    window: Window,
    progress: Progress | None = None,
) -> Sweep:
    """Leaf-LRU hit tokens at every capacity from one pass (stack distances; see the module doc). Memory is
    bounded by the largest capacity, not by the trace (:func:`_renumber`). Hits are counted per capacity
    interval; the blocks ever seen (for the unbounded pool and the fill verdicts) are one byte per id."""
    caps = sorted(set(capacities))
    track = max(caps[-1], 1) if caps else 1
    size = 1 << _TREE_BITS
    tree = [0] * (size + 1)
    who = [0] * (size + 1)
    """Reference time -> the block referenced then (live while ``last[block]`` is that time)."""
    last: dict[int, int] = {}
    get = last.get
    dense = bytearray()
    sparse = IdSet()
    # hits per capacity interval: slot k counts depths in (caps[k - 1], caps[k]]
    slot_tokens = [0] * (len(caps) + 1)
    slot_blocks = [0] * (len(caps) + 1)
    now = dead = distinct = unbounded = measured_tokens = measured_blocks = n = input_tokens = 0
    distinct_before: int | None = None
    start = window.start
    for r in requests:
        ids = r.blocks
        assert ids is not None
        if r.index == start:
            distinct_before = distinct
        length = r.input_tokens
        input_tokens += length
        if r.index >= start:
            measured_tokens += min(len(ids) * block_tokens, length)
            measured_blocks += len(ids)
            for i, b in enumerate(ids):
                t = get(b)
                if t is None:
                    if not (dense[b] if b < len(dense) else b in sparse):
                        break  # prefix-chained: everything after a cold block is cold
                    # seen, but deeper than every capacity: a hit only for the unbounded pool
                    unbounded += min(block_tokens, length - i * block_tokens)
                    continue
                w = min(block_tokens, length - i * block_tokens)
                unbounded += w
                s = 0
                j = t
                while j:
                    s += tree[j]
                    j &= j - 1
                depth = now - t - (dead - s) + 1
                k = bisect_left(caps, depth)
                slot_tokens[k] += w
                slot_blocks[k] += 1
        _grow_dense(dense, ids)
        nb = len(ids)
        if now + nb > size:  # the tree is full: renumbered (rarely: once per ``size`` references at most)
            tree, who, size, now = _renumber(who, last, now, track, nb, size)
            dead = 0
        nd = len(dense)
        big: list[int] = []
        # the times this request kills come in runs of consecutive times (the path was last referenced as a
        # whole, deepest first, as it is now): each run [lo, hi] is marked at once below
        runs: list[int] = []
        lo = hi = -2
        for b in reversed(ids):  # deepest first: the request's root is the most recent
            t = get(b)
            if t is not None:
                if t == hi + 1:
                    hi = t
                else:
                    if hi > 0:
                        runs += (lo, hi)
                    lo = hi = t
            elif b < nd:
                if not dense[b]:
                    dense[b] = 1
                    distinct += 1
            else:
                big.append(b)
            now += 1
            who[now] = b
            last[b] = now
        if hi > 0:
            runs += (lo, hi)
            dead += _mark_runs(tree, size, runs)
        if big:
            distinct += sparse.add_all(big)
        n += 1
        if progress is not None and not n % 512:
            progress(n)
    if distinct_before is None:
        distinct_before = distinct
    points = _lru_points(caps, slot_tokens, slot_blocks, distinct_before, distinct)
    tally = (n, measured_tokens, measured_blocks, input_tokens)
    return ideal_sweep(
        "lru",
        window,
        block_tokens,
        tally,
        points,
        "one pass (LRU stack distances)",
        unbounded_hit_tokens=unbounded,
        distinct_before_window=distinct_before,
    )


def _lru_points(
    caps: list[int], slot_tokens: list[int], slot_blocks: list[int], distinct_before: int, distinct: int
) -> list[SweepPoint]:
    """The curve from the hits per capacity interval: capacity ``caps[k]`` hits every depth up to it."""
    points = []
    at = bt = 0
    for k, c in enumerate(caps):
        at += slot_tokens[k]
        bt += slot_blocks[k]
        points.append(
            SweepPoint(
                capacity_units=c,
                hit_tokens=at,
                hit_units=bt,
                filled_before_window=c <= distinct_before,
                filled=c <= distinct,
            )
        )
    return points
