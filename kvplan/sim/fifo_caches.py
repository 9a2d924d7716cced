"""The FIFO curve's caches (``ideal.fifo_curve``): one block FIFO per capacity, a set and an insertion deque each,
and the request updates that do not take the curve's common path."""

from __future__ import annotations

from collections import deque
from itertools import compress, islice
from operator import not_

from kvplan.sim.result import SweepPoint


def _fifo_each(ids: list[int], cache: set[int], order: deque[int], cap: int) -> None:
    """Block FIFO block by block (a repeated id, a request over the cache, a displaced block it reaches again)."""
    for b in ids:
        if b in cache:
            continue
        if len(cache) >= cap:
            cache.discard(order[0])
        cache.add(b)
        order.append(b)


class _FifoCaches:
    """One FIFO per capacity that can hold a block (a pool of 0 never hits and never fills), side by side; the
    replay keeps its lists as locals and updates them in place."""

    def __init__(self, capacities: list[int]) -> None:
        self.caps = sorted(set(capacities))
        self.live = [c for c in self.caps if c > 0]
        nl = len(self.live)
        self.caches: list[set[int]] = [set() for _ in self.live]
        self.orders = [deque[int](maxlen=c) for c in self.live]
        """Per capacity: the cached blocks in insertion order, the oldest first (an append to a full one drops it)."""
        self.lost_units = [0] * nl
        self.lost_tokens = [0] * nl
        """What each capacity missed of the measured requests' ``warm`` runs."""
        self.full = [False] * nl
        self.filled_before = [False] * nl

    def insert(
        self, k: int, ids: list[int], warm: list[int], new: list[int], *, behind: bool, distinct: bool,
        before_window: bool,
    ) -> bool:  # fmt: skip
        """Capacity ``k`` takes a request's ``new`` blocks where the common case does not apply; True when this
        fills it (a full cache stays full)."""
        cache, order, cap = self.caches[k], self.orders[k], self.live[k]
        size = len(cache)
        over = size + len(new) - cap
        if distinct and (
            over <= 0 or (over <= size and not (behind and not set(warm).isdisjoint(islice(order, over))))
        ):
            # the new blocks go in at once, and the ``over`` oldest entries (none of them a cached block the
            # request reaches after an insertion) leave at once
            if over > 0:
                cache.difference_update(islice(order, over))
            cache.update(new)
            order.extend(new)
        else:
            _fifo_each(ids, cache, order, cap)
        if self.full[k] or len(cache) < cap:
            return False
        self.full[k] = True
        self.filled_before[k] = before_window
        return True

    def points(self, warm_tokens: int, warm_units: int) -> list[SweepPoint]:
        """The curve: every measured ``warm`` run, less what each capacity missed of it."""
        points = [SweepPoint(c, 0, 0, False, filled=False) for c in self.caps if c <= 0]
        return points + [
            SweepPoint(
                c, warm_tokens - self.lost_tokens[k], warm_units - self.lost_units[k], self.filled_before[k],
                filled=self.full[k],
            )
            for k, c in enumerate(self.live)
        ]  # fmt: skip


def _fifo_misses(cache: set[int], ids: list[int], warm: list[int]) -> tuple[int, bool, list[int]]:
    """For a ``warm`` run not wholly cached: the cached prefix's length, whether a cached block comes after the
    first miss (``behind``), and the blocks to insert (the request's uncached ones in order)."""
    present = list(map(cache.__contains__, warm))
    h = present.index(False)
    behind = True in present[h:]
    return h, behind, ([*compress(warm, map(not_, present)), *ids[len(warm) :]] if behind else ids[h:])
