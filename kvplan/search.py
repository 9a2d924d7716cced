"""Bisection over integer knobs (pages, thousandths of a memory fraction, batch sizes)."""

from __future__ import annotations

from collections.abc import Callable


def smallest_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The smallest x in [lo, hi] with ok(x), for ok false below a threshold and true from it; None if none."""
    if lo > hi or not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def largest_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest x in [lo, hi] with ok(x), for ok true up to a threshold and false above it; None if none."""
    if lo > hi or not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
