"""The FIFO curve's kernel as insertion clocks (``ideal.fifo_curve``).

FIFO never refreshes a block on a hit, so a block is in a capacity-``C`` FIFO iff it was inserted and fewer than
``C`` insertions (misses) followed in that cache. Per capacity: a dict block -> the cache's insertion count when
it went in, and the count; a block is cached iff ``t >= count - C``. Eviction is implicit. Every insertion is of
a key not in the dict (an expired one is popped first), so the dict's order is insertion order and its expired
entries are a prefix of it: dropped in one C-level copy when the dict passes ``_SLACK`` × ``C`` entries."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice, repeat

from kvplan.sim.ideal import Progress, Window, _cold_run, _mark_listed
from kvplan.sim.idset import IdSet
from kvplan.sim.result import Sweep, SweepPoint, ideal_sweep
from kvplan.sim.trace import Request

_SLACK = 2
"""A dict is cut back to its live entries when it passes this many times its capacity (2: memory about twice the
cached blocks; 4 and 8 measured no faster)."""
_NEVER = -(1 << 62)
"""A missing block's insertion time: below every limit."""


def _each(d: dict[int, int], ids: list[int], c: int, cap: int) -> int:
    """Block by block from the request's first miss; the clock after."""
    for b in ids:
        t = d.get(b)
        if t is not None:
            if t >= c - cap:
                continue
            del d[b]
        d[b] = c
        c += 1
    return c


def fifo_curve(
    requests: Iterable[Request],
    *,
    block_tokens: int,
    capacities: list[int],
    window: Window,
    progress: Progress | None = None,
) -> Sweep:
    """``ideal.fifo_curve``'s curve with insertion clocks (the same points; how: the module docstring). A request
    whose ``warm`` run a cache holds whole inserts its ``cold`` run at once; any other goes block by block from its
    first miss (a bulk form for "hits, then misses" measured slower than this loop)."""
    caps = sorted(set(capacities))
    live = [c for c in caps if c > 0]
    nl = len(live)
    dicts: list[dict[int, int]] = [{} for _ in live]
    clocks = [0] * nl
    bounds = [_SLACK * c for c in live]
    lost_units = [0] * nl
    lost_tokens = [0] * nl
    full = [False] * nl
    filled_before = [False] * nl
    warm_units = warm_tokens = 0
    dense = bytearray()
    sparse = IdSet(exact=False)
    measured_tokens = measured_blocks = input_tokens = n = 0
    start = window.start
    missing = repeat(_NEVER)
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
        covered = False
        for k in range(nl):
            d = dicts[k]
            c = clocks[k]
            cap = live[k]
            lim = c - cap
            if not w or min(map(d.get, warm, missing)) >= lim:
                covered = True
                if cold:
                    d.update(zip(cold, range(c, c + len(cold)), strict=True))
                    c += len(cold)
            else:
                ts = list(map(d.get, warm, missing))
                h = list(map(lim.__le__, ts)).index(False)
                if measured:
                    lost_units[k] += w - h
                    lost_tokens[k] += wt - min(h * block_tokens, length)
                c = _each(d, ids[h:], c, cap)
            clocks[k] = c
            if len(d) > bounds[k]:
                dicts[k] = dict(islice(d.items(), len(d) - min(c, cap), None))
            if not full[k] and c >= cap:
                full[k] = True
                filled_before[k] = r.index < start
        if not covered:
            _mark_listed(warm, dense, sparse)
        n += 1
        if progress is not None and not n % 512:
            progress(n)
    tally = (n, measured_tokens, measured_blocks, input_tokens)
    points = [SweepPoint(c, 0, 0, False, filled=False) for c in caps if c <= 0]
    points += [
        SweepPoint(c, warm_tokens - lost_tokens[k], warm_units - lost_units[k], filled_before[k], filled=full[k])
        for k, c in enumerate(live)
    ]
    return ideal_sweep("fifo", window, block_tokens, tally, points, "one read, one FIFO per capacity")
