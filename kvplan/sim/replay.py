"""Replaying a trace through an engine's pool: order mode and occupancy mode.

Order mode (the published studies' convention): requests one at a time in trace order. A request matches its
prefix, takes pages for its whole input, and its whole pages are cached when it is done. Output tokens are not
replayed (the trace's next turn carries them as input blocks). A request larger than the whole pool cannot run:
it counts as a miss and as ``too_long``.

Occupancy mode: requests arrive at their trace timestamps and hold their pages while they run, under the
service-time model at ``_Occupancy`` (all integers: prefill, decode, FCFS admission, vLLM's recompute
preemption). Waits are from arrival to first admission; hits are counted at first admission.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial

from kvplan.errors import InputError
from kvplan.sim.ideal import Window
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Pool, Seq
from kvplan.sim.result import HitStats, Occupancy, SimResult
from kvplan.sim.service import Service as Service
from kvplan.sim.trace import Request
from kvplan.units import cdiv

Progress = Callable[[int], None]

TIMELINE_POINTS = 400


def _page_keys(pool: Pool, paging: Paging) -> Callable[[Request, int], list[int]]:
    """Keys of a request's first whole pages: a pool may name pages its own way (the chunked vLLM pool: by
    segment)."""
    keys_of = getattr(pool, "keys_of", None)
    return paging.page_keys if keys_of is None else partial(keys_of, paging)


def replay_order(
    requests: Iterable[Request],
    pool: Pool,
    paging: Paging,
    *,
    window: Window,
    progress: Progress | None = None,
) -> SimResult:
    ps = pool.page_tokens
    stats = HitStats()
    peak = used_sum = n = too_long = input_tokens = 0
    filled_at: int | None = None
    evictions_before = pool.evictions
    page_keys = _page_keys(pool, paging)
    for r in requests:
        length = r.input_tokens
        input_tokens += length
        seq = Seq(r, page_keys(r, length // ps), r.index >= window.start)
        hit = 0
        if pool.start(seq):
            hit = seq.hit_pages
            used = pool.pages - pool.free_pages()
            peak = max(peak, used)
            if filled_at is None and (pool.evictions > evictions_before or pool.free_pages() == 0):
                filled_at = r.index
            pool.release(seq)
        else:
            too_long += 1
        if seq.measured:
            stats.add(length, hit * ps, cdiv(length, ps), hit)
        used_sum += pool.pages - pool.free_pages()
        n += 1
        if progress is not None and not n % 256:
            progress(n)
    return SimResult(
        semantics=pool.semantics,
        policy=pool.policy,
        mode="order",
        window=window.name,
        window_start=window.start,
        requests=n,
        unit="page",
        unit_tokens=ps,
        capacity_units=pool.pages,
        stats=stats,
        evictions=pool.evictions,
        peak_used_units=peak,
        used_sum=used_sum,
        used_samples=n,
        too_long=too_long,
        filled_at=filled_at,
        input_tokens=input_tokens,
    )


_GROW, _FINISH = 0, 1


# The service-time model:
# - prefill takes ``ceil(uncached tokens x 10^6 / prefill_tps)`` us, uncached = length - hit (a request's prefill
#   is independent of the others: no batching contention);
# - decode makes one token every ``tpot_us``; the sequence takes one more page whenever it crosses a page;
# - admission is FCFS with head-of-line blocking, up to ``max_running`` requests: the head is admitted when its
#   pages (hit pages that sit idle in the cache included) can be had from free or evictable pages, and its whole
#   pages are shareable from then on (vLLM caches blocks as it schedules them; SGLang inserts after a prefill);
# - when a running request needs a page and none can be had, the most recently admitted request is preempted
#   (vLLM's recompute preemption; it may be the request itself): its whole pages go to the cache, the rest are
#   freed, and it returns to the head of the queue keeping the tokens it generated, which it recomputes;
# - generated pages get keys of their own: only the request itself can hit them (after a preemption);
# - a request larger than the whole pool is dropped (``too_long``).
class _Occupancy:
    def __init__(self, pool: Pool, paging: Paging, service: Service, window: Window, progress: Progress | None):
        self.pool = pool
        self.paging = paging
        self.page_keys = _page_keys(pool, paging)
        self.pool_extend_keys: Callable[[Seq, Paging], None] | None = getattr(pool, "extend_keys", None)
        self.service = service
        self.window = window
        self.progress = progress
        self.ps = pool.page_tokens
        self.stats = HitStats()
        self.occ = Occupancy()
        self.events: list[tuple[int, int, int, int, Seq]] = []
        self.seqno = 0
        self.waiting: deque[Seq] = deque()
        self.running: dict[int, Seq] = {}
        self.now = 0
        self.too_long = 0
        self.filled_at: int | None = None
        self.peak_used = 0
        self.timeline = Timeline(TIMELINE_POINTS)
        self.last_t = 0
        self.input_tokens = 0
        self.arrived = 0
        self.last_arrival = -1
        self.held = 0
        """Pages held by running requests as of the last sample: the pool does not change between a step's sample and
        the next step's ``_advance`` (``run`` keeps it in a local and stores it when done)."""

    # -------------------------------------------------------------- bookkeeping

    def _advance(self, t: int) -> None:
        dt = t - self.last_t
        if dt > 0:
            self.occ.queue_area += len(self.waiting) * dt
            self.occ.used_area += self.held * dt
            self.last_t = t
        self.now = t

    def _sample(self) -> None:
        pool = self.pool
        free = pool.free_pages()
        used = pool.pages - free
        if used > self.peak_used:
            self.peak_used = used
        if self.filled_at is None and (free == 0 or pool.evictions):
            self.filled_at = self.arrived - 1
        occ = self.occ
        waiting = len(self.waiting)
        running = len(self.running)
        if waiting > occ.max_queue:
            occ.max_queue = waiting
        if running > occ.peak_running:
            occ.peak_running = running
        held = self.held = pool.held_pages()
        tl = self.timeline
        if tl.t0 is not None:
            # most samples lose to their bucket's peak: settle that before building one (Timeline.add's test)
            b = (self.now - tl.t0) // tl.width
            if b < tl.n:
                cur = tl.buckets[b]
                if cur is not None and held <= cur[3]:
                    return
        tl.add((self.now, running, waiting, held, pool.cached_pages()))

    def _generated_by(self, seq: Seq, t: int) -> int:
        if t <= seq.decode_start_us:
            return seq.generated_at_admit
        done = seq.generated_at_admit + (t - seq.decode_start_us) // self.service.tpot_us
        return min(done, seq.req.output_tokens)

    def _extend_keys(self, seq: Seq) -> None:
        if self.pool_extend_keys is not None:
            self.pool_extend_keys(seq, self.paging)
            return
        need = seq.tokens // self.ps
        while len(seq.keys) < need:
            seq.keys.append(self.paging.unique())

    # -------------------------------------------------------------- requests

    def _admit(self, seq: Seq) -> bool:
        seq.tokens = seq.req.input_tokens + seq.generated
        self._extend_keys(seq)
        if not self.pool.start(seq):
            return False
        self.pool.commit(seq)
        now = self.now
        uncached = seq.tokens - seq.hit_pages * self.ps
        self.occ.prefill_tokens += uncached
        prefill = -(-uncached * 1_000_000 // self.service.prefill_tps)
        seq.decode_start_us = now + prefill
        seq.generated_at_admit = seq.generated
        if seq.first_admit_us < 0:
            seq.first_admit_us = now
            if seq.measured:
                r = seq.req
                self.occ.waits_us.append(now - seq.arrival_us)
                self.stats.add(r.input_tokens, min(seq.hit_pages * self.ps, r.input_tokens),
                               -(-r.input_tokens // self.ps), seq.hit_pages)  # fmt: skip
        self.running[seq.req.index] = seq
        self._next_event(seq)
        return True

    def _next_event(self, seq: Seq) -> None:
        """The next page this sequence needs during decode, or its finish."""
        out = seq.req.output_tokens
        held_tokens = -(-seq.tokens // self.ps) * self.ps
        k = held_tokens - seq.req.input_tokens + 1  # the first generated token that needs a new page
        if k <= out:
            t = seq.decode_start_us + (k - seq.generated_at_admit) * self.service.tpot_us
            kind = _GROW
        else:
            t = seq.decode_start_us + (out - seq.generated_at_admit) * self.service.tpot_us
            kind = _FINISH
        self.seqno += 1
        heapq.heappush(self.events, (t, self.seqno, kind, seq.gen, seq))

    def _preempt(self, seq: Seq) -> None:
        seq.generated = self._generated_by(seq, self.now)
        seq.tokens = seq.req.input_tokens + seq.generated
        self._extend_keys(seq)
        self.pool.release(seq)
        del self.running[seq.req.index]
        seq.gen += 1
        self.waiting.appendleft(seq)
        self.occ.preemptions += 1

    def _grow(self, seq: Seq) -> None:
        # the sequence reached a page boundary: it needs one more page for its next token (``seq.generated`` is
        # brought up to date only if that takes a preemption: nothing else reads it before the next admission)
        if not self.pool.grow(seq, 1) and not self._make_room(seq):
            return
        # the new page holds the token that crossed the boundary: the sequence is one token into it
        seq.tokens = cdiv(seq.tokens, self.ps) * self.ps + 1
        self._next_event(seq)

    def _make_room(self, seq: Seq) -> bool:
        """``seq`` found no page for its next token: preempt the newest requests until it has one; False when it
        went itself (preempted, or alone and larger than the pool)."""
        seq.generated = self._generated_by(seq, self.now)
        while True:
            victim = next(reversed(self.running.values()))
            if victim is seq and len(self.running) == 1:
                # alone and still out of pages: larger than the pool
                seq.tokens = seq.req.input_tokens + seq.generated
                self._extend_keys(seq)
                self.pool.release(seq)
                del self.running[seq.req.index]
                self.too_long += 1
                return False
            self._preempt(victim)
            if victim is seq:
                return False
            if self.pool.grow(seq, 1):
                return True

    def _finish(self, seq: Seq) -> None:
        seq.generated = seq.req.output_tokens
        seq.tokens = seq.req.input_tokens + seq.generated
        self._extend_keys(seq)
        self.pool.release(seq)
        del self.running[seq.req.index]
        self.occ.completed += 1

    def _try_admit(self) -> None:
        limit = self.service.max_running
        while self.waiting and (limit is None or len(self.running) < limit):
            head = self.waiting[0]
            if not self.pool.can_ever_fit(head.req.input_tokens + head.req.output_tokens):
                self.waiting.popleft()
                self.too_long += 1
                continue
            if not self._admit(head):
                if not self.running:
                    # nothing will free pages: the head can never run (its hit path alone is too big)
                    self.waiting.popleft()
                    self.too_long += 1
                    continue
                break
            self.waiting.popleft()

    # -------------------------------------------------------------- loop

    def run(self, requests: Iterator[Request]) -> SimResult:
        """The whole trace through one pool: the steps below (``arrive``, ``handle_event``, ``settle``) with their
        common paths written out in one loop, the same operations in the same order. A running request's next page
        (most events) is taken inline and, when nothing waits, settled by a short sample: its running and waiting
        counts did not change and it holds one page more; a sample that loses to its timeline bucket's peak is
        settled by two comparisons (the bucket's bounds and peak are kept between samples)."""
        pool, occ, tl = self.pool, self.occ, self.timeline
        events, waiting, running = self.events, self.waiting, self.running
        ps, tpot = self.ps, self.service.tpot_us
        grow, free_pages, held_pages, pages, check = pool.grow, pool.free_pages, pool.held_pages, pool.pages, pool.check
        pop, push = heapq.heappop, heapq.heappush
        make_room, enqueue = self._make_room, self._enqueue
        last_t, held, peak_used = self.last_t, self.held, self.peak_used
        queue_area, used_area = occ.queue_area, occ.used_area
        filled = self.filled_at is not None
        full = filled and peak_used == pages
        # the current timeline bucket [lo, hi) and its peak (most samples lose to it)
        lo = hi = 0
        top = -1
        nxt = next(requests, None)
        t_next: float = math.inf if nxt is None else nxt.arrival_us
        while True:
            if events and events[0][0] < t_next:
                t, _, kind, gen, seq = pop(events)
                if t > last_t:
                    if waiting:
                        queue_area += len(waiting) * (t - last_t)
                    used_area += held * (t - last_t)
                    last_t = t
                self.now = t
                if gen != seq.gen or seq.req.index not in running:
                    continue  # stale: its sequence was preempted
                if kind == _GROW:
                    # _grow: the sequence reached a page boundary and needs one more page for its next token
                    taken = grow(seq, 1)
                    if taken or make_room(seq):
                        # one token into the new page; _next_event: its next page or its finish
                        r = seq.req
                        ds, g0, out = seq.decode_start_us, seq.generated_at_admit, r.output_tokens
                        held_tokens = -(-seq.tokens // ps) * ps + ps
                        seq.tokens = held_tokens - ps + 1
                        k = held_tokens - r.input_tokens + 1
                        self.seqno += 1
                        if k <= out:
                            push(events, (ds + (k - g0) * tpot, self.seqno, _GROW, seq.gen, seq))
                        else:
                            push(events, (ds + (out - g0) * tpot, self.seqno, _FINISH, seq.gen, seq))
                    if taken and not waiting and not check:
                        # settle and _sample after a page taken without preemption: nothing to admit, the same
                        # requests running and waiting, one page more held; the pool's use and fill need asking
                        # only until the pool was once seen full (then peak_used is the pool and filled_at set)
                        if not full:
                            free = free_pages()
                            if pages - free > peak_used:
                                peak_used = pages - free
                            if not filled and (free == 0 or pool.evictions):
                                self.filled_at = self.arrived - 1
                                filled = True
                            full = filled and peak_used == pages
                        held += 1
                        if lo <= t < hi and held <= top:
                            continue
                        tl.add((t, len(running), 0, held, pool.cached_pages()))
                        lo, hi, top = self._bucket(t)
                        continue
                else:
                    self._finish(seq)
            elif nxt is not None:
                t = nxt.arrival_us
                if t > last_t:
                    if waiting:
                        queue_area += len(waiting) * (t - last_t)
                    used_area += held * (t - last_t)
                    last_t = t
                self.now = t
                enqueue(nxt)
                nxt = next(requests, None)
                t_next = math.inf if nxt is None else nxt.arrival_us
            elif waiting:
                # only waiting requests and nothing running: admit or drop them
                if running:
                    raise AssertionError("running requests without events")
            else:
                break
            # settle
            if waiting:
                self._try_admit()
            if check:
                pool.verify()
            # _sample
            if not full:
                free = free_pages()
                if pages - free > peak_used:
                    peak_used = pages - free
                if not filled and (free == 0 or pool.evictions):
                    self.filled_at = self.arrived - 1
                    filled = True
                full = filled and peak_used == pages
            if len(waiting) > occ.max_queue:
                occ.max_queue = len(waiting)
            if len(running) > occ.peak_running:
                occ.peak_running = len(running)
            held = held_pages()
            now = self.now
            if lo <= now < hi and held <= top:
                continue
            tl.add((now, len(running), len(waiting), held, pool.cached_pages()))
            lo, hi, top = self._bucket(now)
        self.last_t, self.held, self.peak_used = last_t, held, peak_used
        occ.queue_area, occ.used_area = queue_area, used_area
        return self.result()

    def _bucket(self, t: int) -> tuple[int, int, int]:
        """The timeline bucket time ``t`` falls in: its bounds [lo, hi) and its peak pages held (-1: empty)."""
        tl = self.timeline
        assert tl.t0 is not None
        w = tl.width
        lo = tl.t0 + (t - tl.t0) // w * w
        cur = tl.buckets[(t - tl.t0) // w]
        return lo, lo + w, -1 if cur is None else cur[3]

    # -------------------------------------------------------------- steps (``run``, or a driver of several pools)

    def next_event_us(self) -> int | None:
        """When the next grow or finish event is due (None: none scheduled)."""
        return self.events[0][0] if self.events else None

    def arrive(self, r: Request) -> None:
        """``r`` arrives (now = its arrival time) and joins the queue; ``settle`` admits it."""
        self._advance(r.arrival_us)
        self._enqueue(r)

    def _enqueue(self, r: Request) -> None:
        """``r`` joins the queue (the clock is at its arrival)."""
        if r.arrival_us < self.last_arrival:
            raise InputError(
                f"request {r.index} (line {r.line}) arrives before the one before it: occupancy mode "
                "needs the trace sorted by arrival time"
            )
        self.last_arrival = r.arrival_us
        self.input_tokens += r.input_tokens
        seq = Seq(r, self.page_keys(r, r.input_tokens // self.ps), r.index >= self.window.start)
        self.waiting.append(seq)
        self.arrived += 1
        n = self.arrived
        if self.progress is not None and not n % 256:
            self.progress(n)

    def handle_event(self) -> bool:
        """Run the next event; False when it was stale (its sequence preempted or gone: nothing to settle)."""
        t, _, kind, gen, seq = heapq.heappop(self.events)
        self._advance(t)
        if gen != seq.gen or seq.req.index not in self.running:
            return False
        if kind == _GROW:
            self._grow(seq)
        else:
            self._finish(seq)
        return True

    def settle(self) -> None:
        """After each step: admit what can be admitted, check (debug mode), sample."""
        self._try_admit()
        if self.pool.check:
            self.pool.verify()
        self._sample()

    def result(self) -> SimResult:
        n = self.arrived
        self.occ.makespan_us = self.now
        self.occ.timeline = self.timeline.points()
        return SimResult(
            semantics=self.pool.semantics,
            policy=self.pool.policy,
            mode="occupancy",
            window=self.window.name,
            window_start=self.window.start,
            requests=n,
            unit="page",
            unit_tokens=self.ps,
            capacity_units=self.pool.pages,
            stats=self.stats,
            evictions=self.pool.evictions,
            peak_used_units=self.peak_used,
            used_sum=self.occ.used_area,
            used_samples=max(self.now, 1),
            too_long=self.too_long,
            filled_at=self.filled_at,
            occupancy=self.occ,
            input_tokens=self.input_tokens,
        )


Sample = tuple[int, int, int, int, int]
"""(time us, running, waiting, pages held by running requests, pages cached and unreferenced)."""


class Timeline:
    """The occupancy timeline in fixed memory: at most ``points`` samples, one per time bucket, the one with the
    most pages held (the first such; peaks survive).

    Buckets start one microsecond wide from the first sample; when a sample falls past the last bucket, the
    width doubles and neighbouring buckets merge (each keeping its larger peak), so the buckets always cover
    the run so far with between ``points / 2`` and ``points`` of them, whatever the trace's length."""

    def __init__(self, points: int) -> None:
        self.n = points
        self.width = 1
        self.t0: int | None = None
        self.buckets: list[Sample | None] = [None] * points

    def add(self, s: Sample) -> None:
        if self.t0 is None:
            self.t0 = s[0]
        b = (s[0] - self.t0) // self.width
        while b >= self.n:
            self._halve()
            b = (s[0] - self.t0) // self.width
        cur = self.buckets[b]
        if cur is None or s[3] > cur[3]:
            self.buckets[b] = s

    def _halve(self) -> None:
        old = self.buckets
        merged: list[Sample | None] = []
        for i in range(0, self.n, 2):
            a, b = old[i], old[i + 1] if i + 1 < self.n else None
            merged.append(b if a is None or (b is not None and b[3] > a[3]) else a)
        self.buckets = merged + [None] * (self.n - len(merged))
        self.width *= 2

    def points(self) -> list[Sample]:
        return [s for s in self.buckets if s is not None]


def replay_occupancy(
    requests: Iterable[Request],
    pool: Pool,
    paging: Paging,
    *,
    service: Service,
    window: Window,
    progress: Progress | None = None,
) -> SimResult:
    return _Occupancy(pool, paging, service, window, progress).run(iter(requests))
