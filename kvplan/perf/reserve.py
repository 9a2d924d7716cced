"""SGLang's running reservations without a sum over the running requests at each admission (kvplan.perf.engine).

``PrefillAdder`` counts, for each decoding request, its output left clipped at ``CLIP_MAX_NEW_TOKENS``:
min(osl − output, 4096). A request of r tokens left when it joins the count holds t = min(r, 4096) then and
t − max(0, x − a) once x tokens have been made since the count began, where a is x when it joined plus
max(r − 4096, 0), the tokens it makes before its term starts to fall. x after k decode steps is at most
ceil(k × accept / 1000) (each step accepts accept / 1000 tokens on average, kvplan.perf.spec); without speculative
decoding it is k exactly, each request makes one token a step and the count is the sum itself: a request that
finishes or is retracted leaves it exactly. With speculative decoding it is a lower bound (a request that finishes
holds at most 0 in it by then) until a retraction, when the engine sums again.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

CLIP_MAX_NEW_TOKENS = 4096
"""SGLang schedule_policy.py: the output tokens a request's reservation counts at most."""


def term(left: int) -> tuple[int, int]:
    """(reservation, tokens it makes before it falls) of a request with ``left`` output tokens to make."""
    return min(left, CLIP_MAX_NEW_TOKENS), max(left - CLIP_MAX_NEW_TOKENS, 0)


@dataclass
class Reservations:
    """The decoding requests' reservations counted since decode count ``count``."""

    accept: int
    """Tokens a decode step accepts a request, thousandths (1000: no speculative decoding)."""
    valid: bool = field(init=False)
    """False after a retraction with speculative decoding, until the engine sums again."""
    count: int = field(init=False)
    total: int = field(init=False)
    """The terms as valued when each joined."""
    waiting: list[int] = field(init=False)
    """Heap: for each term not yet falling, the x at which it starts to (``a``)."""
    gone: Counter[int] = field(init=False)
    """Terms left before they started falling, by their ``a``: skipped when the heap reaches them."""
    falling: int = field(init=False)
    lost: int = field(init=False)
    """What the falling terms have lost by x = ``at``."""
    at: int = field(init=False)

    def __post_init__(self) -> None:
        self.restart(0, [])  # the empty sum of an engine that has run nothing

    @property
    def exact(self) -> bool:
        return self.accept == 1000

    def restart(self, count: int, lefts: list[int]) -> list[int]:
        """The exact sum over the decoding requests' outputs left (``lefts``) at decode count ``count``; each one's
        ``a``, for ``drop``."""
        terms = [term(left) for left in lefts]
        self.valid, self.count, self.total = True, count, sum(t for t, _ in terms)
        self.waiting = [s for _, s in terms]
        heapq.heapify(self.waiting)
        self.gone = Counter()
        self.falling = self.lost = self.at = 0
        return [s for _, s in terms]

    def made_by(self, count: int) -> int:
        """The most tokens a request can have made since the count began, at decode count ``count``."""
        return -(-(count - self.count) * self.accept // 1000)

    def add(self, count: int, left: int) -> int:
        """A request starts decoding at ``count`` with ``left`` output tokens to make; its ``a``. It has made at
        least floor(d × accept / 1000) tokens after d steps, so its term falls no sooner than it is counted to."""
        t, s = term(left)
        a = (count - self.count) * self.accept // 1000 + s
        self._sync(count)
        self.total += t
        if a >= self.at:
            heapq.heappush(self.waiting, a)
        else:  # speculative decoding: already past it; counting its loss since then only lowers the bound
            self.falling += 1
            self.lost += self.at - a
        return a

    def drop(self, count: int, a: int, value: int) -> None:
        """A request whose term now holds ``value`` (0: it finished) leaves the running set at ``count``: its term
        leaves the count. With speculative decoding a finished request's term is left in (it holds at most 0, so
        the bound holds) and a retracted one's cannot be taken out exactly: the count is void until the next sum."""
        if not self.exact:
            self.valid = self.valid and value == 0
            return
        self._sync(count)
        if a >= self.at:  # not yet falling: it holds what it joined with
            self.total -= value
            self.gone[a] += 1
        else:
            self.total -= value + self.at - a
            self.lost -= self.at - a
            self.falling -= 1

    def at_least(self, count: int) -> tuple[int, bool]:
        """(a lower bound of the reservations at ``count``, whether it is their sum): 0 while void; the sum itself
        without speculative decoding, or before any decode step."""
        if not self.valid:
            return 0, False
        self._sync(count)
        return max(self.total - self.lost, 0), self.exact or count == self.count

    def trend(self, count: int) -> tuple[int, int, int]:
        """Without speculative decoding: (the sum at ``count``, how much it falls each decode step, for how many
        steps it falls that way: until another term starts to fall)."""
        self._sync(count)
        return self.total - self.lost, self.falling, (self.waiting[0] - self.at if self.waiting else 1 << 62)

    def _sync(self, count: int) -> None:
        x = self.made_by(count)
        while self.waiting and self.waiting[0] < x:
            a = heapq.heappop(self.waiting)
            if self.gone[a]:
                self.gone[a] -= 1
                continue
            self.lost += self.falling * (a - self.at)
            self.at = a
            self.falling += 1
        self.lost += self.falling * (x - self.at)
        self.at = x
