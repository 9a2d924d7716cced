"""A set of block ids in about 8 bytes an id, whatever their magnitude: the curves' record of every block ever
listed, which must hold a fleet trace's distinct ids (11.7 million in the 770K-request one) when they are hashes.

A Python set costs about 110 bytes an id (the int object and the table slot). Here an id ``b`` below 2**64 is
multiplied by an odd constant modulo 2**64 (one to one, and it spreads hashed and dense ids alike); the top 14
bits of the product pick one of 16,384 buckets, and the bucket keeps the other 50 bits in a sorted ``array('Q')``
(8 bytes, plus the array's 1/16 headroom at most). A lookup is one C bisection in a bucket of about
``n / 16,384`` ids; an insertion shifts the bucket's tail in C (about 700 ids, 6 KB, at 11.7 million). Ids of
2**64 and more (the readers allow ``limits.MAX_INT_DIGITS`` digits) are rare and go to a plain set.

``IdSet(exact=False)`` keeps only the top 32 of the 50 bits (``array('I')``, 4 bytes an id): two ids then share
an entry about once in 2**46 / n lookups, so it may answer "in" for an id never added (never "not in" for one
that was). The FIFO curve's record of listed blocks takes that: a block it wrongly takes as listed is only looked
up in each cache, where it is not.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

_MULT = 0xD6E8FEB86659FD93
"""Odd, so ``b * _MULT mod 2**64`` is one to one on 64-bit ids."""
_MASK = (1 << 64) - 1
_SHIFT = 50
"""A product's top 64 - 50 = 14 bits are its bucket; the low 50 bits are what the bucket stores."""
_LOW = (1 << _SHIFT) - 1


class IdSet:
    """Non-negative ints: ``b in s``, ``s.add(b)`` and ``s.add_all(ids)`` (how many were new), ``len(s)``."""

    __slots__ = ("_buckets", "_code", "_drop", "_huge")

    def __init__(self, *, exact: bool = True) -> None:
        self._buckets: list[array[int] | None] = []
        """The 16,384 slots (128 KiB) are made with the first id, each bucket with its first id."""
        self._huge: set[int] = set()
        self._code = "Q" if exact else "I"
        self._drop = 0 if exact else _SHIFT - 32
        """Low bits of the stored 50 that are dropped (``exact=False``: 18, leaving 32)."""

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets if b is not None) + len(self._huge)

    def __contains__(self, b: int) -> bool:
        if b > _MASK or not self._buckets:
            return b in self._huge
        x = b * _MULT & _MASK
        got = self._buckets[x >> _SHIFT]
        if got is None:
            return False
        r = (x & _LOW) >> self._drop
        i = bisect_left(got, r)
        return i < len(got) and got[i] == r

    def add(self, b: int) -> bool:
        """Put ``b`` in; True when it was not in already (``add_all``'s loop for one id, without its call)."""
        if b > _MASK or not self._buckets:
            return self.add_all((b,)) == 1
        x = b * _MULT & _MASK
        got = self._buckets[x >> _SHIFT]
        if got is None:
            got = self._buckets[x >> _SHIFT] = array(self._code)
        r = (x & _LOW) >> self._drop
        i = bisect_left(got, r)
        if i < len(got) and got[i] == r:
            return False
        got.insert(i, r)
        return True

    def add_all(self, ids: Iterable[int]) -> int:
        """Put every id in; returns how many were not in already (one call a request: the loop's names are local)."""
        buckets = self._buckets
        if not buckets:
            buckets = self._buckets = [None] * (1 << (64 - _SHIFT))
        new = 0
        code, drop = self._code, self._drop
        for b in ids:
            if b > _MASK:
                if b not in self._huge:
                    self._huge.add(b)
                    new += 1
                continue
            x = b * _MULT & _MASK
            got = buckets[x >> _SHIFT]
            if got is None:
                got = buckets[x >> _SHIFT] = array(code)
            r = (x & _LOW) >> drop
            i = bisect_left(got, r)
            if i == len(got) or got[i] != r:
                got.insert(i, r)
                new += 1
        return new

    def add_run(self, ids: list[int], j: int, below: int) -> int:
        """Put ``ids[j - 1]``, ``ids[j - 2]``, ... in, down to the first that is below ``below`` or was in
        already (not put in again); returns the index after it (0 when none stopped the run). The trailing run of
        never-seen ids in one call a request, the loop's names local (``IdSet.add`` a block costs a call each)."""
        buckets = self._buckets
        if not buckets:
            buckets = self._buckets = [None] * (1 << (64 - _SHIFT))
        code, drop, huge = self._code, self._drop, self._huge
        while j:
            b = ids[j - 1]
            if b < below:
                return j
            if b > _MASK:
                if b in huge:
                    return j
                huge.add(b)
            else:
                x = b * _MULT & _MASK
                got = buckets[x >> _SHIFT]
                if got is None:
                    got = buckets[x >> _SHIFT] = array(code)
                r = (x & _LOW) >> drop
                i = bisect_left(got, r)
                if i < len(got) and got[i] == r:
                    return j
                got.insert(i, r)
            j -= 1
        return 0
