"""An open-loop load (``perf --rate R/s``): requests arrive as a Poisson process whatever the engine's pace, as
``bench_serving --request-rate R`` (burstiness 1.0) and ``vllm bench serve --request-rate R`` send them. The gaps are
drawn from a seeded generator, so a rate always gives the same schedule. Unlike the closed loop, when a request
arrives depends on how long the steps before it took: each step is priced as it is scheduled (``price``); the
engine's policy is the closed loop's (sched._run)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kvplan.perf.sched import Timings, _Req, _run, _weighted_median
from kvplan.perf.spec import Acceptance
from kvplan.perf.step import Batch

SEED = 0
"""The generator's seed (stated on perf's output)."""


@dataclass
class _Arrivals:
    times: list[float]
    price: Callable[[Batch], float]
    first: list[int]
    finished: list[int]
    lengths: list[tuple[int, int]] | None = None
    """Per request: its own (isl, osl) (a trace's); None: the run's."""
    ends: list[float] = field(default_factory=list)
    """Each step's end, seconds from the first arrival's clock origin (an idle engine waits for the next arrival)."""
    next: int = 0
    clock: float = 0.0

    def catch_up(self, steps: list[Batch]) -> None:
        while len(self.ends) < len(steps):
            self.clock += self.price(steps[len(self.ends)])
            self.ends.append(self.clock)

    def seen(self, steps: list[Batch], step: int, idle: bool) -> list[_Req]:
        self.catch_up(steps)
        if idle and self.next < len(self.times):
            self.clock = max(self.clock, self.times[self.next])
        out = []
        while self.next < len(self.times) and self.times[self.next] <= self.clock:
            isl, osl = self.lengths[self.next] if self.lengths else (0, 0)
            out.append(_Req(self.next, isl=isl, osl=osl))
            self.next += 1
        return out

    def send(self, after: int) -> None:  # open loop: a finished request sends nothing
        return None

    def quiet_until(self, step: int) -> int:  # arrivals by time: each step priced before the next is scheduled
        return step


@dataclass(frozen=True, kw_only=True)
class OpenSchedule:
    steps: tuple[Batch, ...]
    arrival_s: tuple[float, ...]
    first: tuple[int, ...]
    finished: tuple[int, ...]
    ends: tuple[float, ...]
    peak_running: int
    preemptions: int = 0


def poisson_times(rate_per_s: float, n: int, seed: int = SEED) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate_per_s)
        out.append(t)
    return out


def open_loop(
    *,
    engine: str,
    isl: int,
    osl: int,
    rate_per_s: float,
    num_prompts: int,
    cap: int,
    budget: int,
    price: Callable[[Batch], float],
    spec: Acceptance | None = None,
    pool: int = 0,
) -> OpenSchedule:
    if min(isl, osl, num_prompts, cap, budget) < 1 or not rate_per_s > 0:
        raise ValueError("isl, osl, the prompts, the running cap and the token budget must be >= 1, the rate > 0")
    a = _Arrivals(times=poisson_times(rate_per_s, num_prompts), price=price, first=[-1] * num_prompts,
                  finished=[-1] * num_prompts)  # fmt: skip
    if pool and isl + osl > pool:
        raise ValueError(f"a request of {isl:,} + {osl:,} tokens is larger than the whole pool ({pool:,} tokens)")
    run = _run(engine, isl, osl, cap, budget, a, num_prompts, spec, pool)
    a.catch_up(run.steps)
    return OpenSchedule(steps=tuple(run.steps), arrival_s=tuple(a.times), first=tuple(a.first),
                        finished=tuple(a.finished), ends=tuple(a.ends), peak_running=run.peak_running,
                        preemptions=run.preemptions)  # fmt: skip


def open_timings(s: OpenSchedule, osl: int) -> Timings:
    """Every request's figures (bench_serving measures them all), from its arrival; duration: first arrival to the
    last token."""
    ttft = tuple(s.ends[f] - a for a, f in zip(s.arrival_s, s.first, strict=True))
    e2e = tuple(s.ends[f] - a for a, f in zip(s.arrival_s, s.finished, strict=True))
    tpot = tuple((e - t) / (osl - 1) if osl > 1 else 0.0 for e, t in zip(e2e, ttft, strict=True))
    return Timings(ttft=ttft, tpot=tpot, e2e=e2e, duration=s.ends[-1] - s.arrival_s[0],
                   itl_median=itl_median(s.steps, s.ends))  # fmt: skip


def itl_median(steps: tuple[Batch, ...], ends: tuple[float, ...]) -> float:
    """The median gap between a request's two tokens, over every decoded token (sched.Timings.itl_median)."""
    gaps: list[tuple[float, int]] = []
    last = -1
    for i, b in enumerate(steps):
        if b.decode_requests:
            gaps.append((ends[i] - (ends[last] if last >= 0 else ends[i - 1] if i else 0.0), b.decode_requests))
            last = i
    return _weighted_median(gaps)


@dataclass
class _Thinking(_Arrivals):
    """Clients that wait ``think_s`` after a request's last token before sending the next (until ``total``)."""

    think_s: float = 0.0
    total: int = 0
    sends: list[int] = field(default_factory=list)
    """Steps after which a client sends, not yet turned into arrival times (a step's end is known once priced)."""

    def seen(self, steps: list[Batch], step: int, idle: bool) -> list[_Req]:
        self.catch_up(steps)
        for s in self.sends:
            if len(self.times) < self.total:
                self.times.append(self.ends[s] + self.think_s)
                self.first.append(-1)
                self.finished.append(-1)
        self.sends.clear()
        return super().seen(steps, step, idle)

    def send(self, after: int) -> None:
        self.sends.append(after)


def thinking_loop(
    *,
    engine: str,
    isl: int,
    osl: int,
    clients: int,
    think_s: float,
    num_prompts: int,
    cap: int,
    budget: int,
    price: Callable[[Batch], float],
    pool: int = 0,
) -> OpenSchedule:
    """A closed loop whose clients think ``think_s`` between a request's last token and their next request (a PD
    prefill instance's clients: the decode side's time of a request), their first requests spread over one think
    time; ``num_prompts`` requests in all."""
    if min(isl, osl, clients, num_prompts, cap, budget) < 1 or think_s < 0:
        raise ValueError("isl, osl, the clients, the prompts, the running cap and the budget must be >= 1")
    n = min(clients, num_prompts)
    a = _Thinking(times=[i * think_s / n for i in range(n)], price=price, first=[-1] * n, finished=[-1] * n,
                  think_s=think_s, total=num_prompts)  # fmt: skip
    run = _run(engine, isl, osl, cap, budget, a, num_prompts, None, pool)
    a.catch_up(run.steps)
    return OpenSchedule(steps=tuple(run.steps), arrival_s=tuple(a.times), first=tuple(a.first),
                        finished=tuple(a.finished), ends=tuple(a.ends), peak_running=run.peak_running,
                        preemptions=run.preemptions)  # fmt: skip
