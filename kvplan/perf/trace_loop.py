"""An arrival trace as the load (``perf --trace FILE``): each request arrives at its trace time with its own input and
output lengths, and the engine's policy (kvplan.perf.engine: running cap, token budget, the pool's admission and
preemption) runs them; each step is priced as it is scheduled, as in the open loop (kvplan.perf.open_loop). Every
request is measured from its arrival, as ``bench_serving`` replays a trace; TPOT counts the requests of more than one
output token (bench_serving's ``output_len > 1``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvplan.perf.open_loop import _Arrivals, itl_median
from kvplan.perf.sched import Timings, _run
from kvplan.perf.spec import Acceptance
from kvplan.perf.step import Batch


@dataclass(frozen=True)
class Arrival:
    """One request of the trace: microseconds from the trace's first arrival, its lengths, and where it is read."""

    arrival_us: int
    isl: int
    osl: int
    where: str


@dataclass(frozen=True, kw_only=True)
class TraceLoad:
    """The trace perf prices: its requests in arrival order and how they were read (shown on perf's output)."""

    arrivals: tuple[Arrival, ...]
    source: str
    """The file, its format, the requests taken and any output length assumed."""

    @property
    def isl_sum(self) -> int:
        return sum(a.isl for a in self.arrivals)

    @property
    def osl_sum(self) -> int:
        return sum(a.osl for a in self.arrivals)


@dataclass(frozen=True, kw_only=True)
class TraceSchedule:
    steps: tuple[Batch, ...]
    arrival_s: tuple[float, ...]
    osl: tuple[int, ...]
    first: tuple[int, ...]
    finished: tuple[int, ...]
    ends: tuple[float, ...]
    peak_running: int
    preemptions: int


def trace_loop(
    *,
    engine: str,
    arrivals: Sequence[Arrival],
    cap: int,
    budget: int,
    pool: int,
    price: Callable[[Batch], float],
    spec: Acceptance | None = None,
) -> TraceSchedule:
    """ValueError (one line) for an empty trace, requests out of arrival order, a request without input or output
    tokens, or one larger than the whole pool (the engine rejects it)."""
    if not arrivals or min(cap, budget) < 1:
        raise ValueError("a trace of at least one request, a running cap and a token budget >= 1")
    if any(b.arrival_us < a.arrival_us for a, b in itertools.pairwise(arrivals)):
        raise ValueError("a trace's requests in arrival order (kvplan.cli._perf_trace sorts them)")
    for a in arrivals:
        if a.isl < 1 or a.osl < 1:
            raise ValueError(f"{a.where}: {a.isl} input and {a.osl} output tokens: perf needs at least 1 of each")
        if pool and a.isl + a.osl > pool:
            raise ValueError(f"{a.where}: a request of {a.isl:,} + {a.osl:,} tokens is larger than the whole pool "
                             f"({pool:,} tokens): the engine rejects it")  # fmt: skip
    n = len(arrivals)
    t0 = arrivals[0].arrival_us
    load = _Arrivals(times=[(a.arrival_us - t0) / 1e6 for a in arrivals], price=price, first=[-1] * n,
                     finished=[-1] * n, lengths=[(a.isl, a.osl) for a in arrivals])  # fmt: skip
    run = _run(engine, 1, 1, cap, budget, load, n, spec, pool)
    load.catch_up(run.steps)
    return TraceSchedule(steps=tuple(run.steps), arrival_s=tuple(load.times), osl=tuple(a.osl for a in arrivals),
                         first=tuple(load.first), finished=tuple(load.finished), ends=tuple(load.ends),
                         peak_running=run.peak_running, preemptions=run.preemptions)  # fmt: skip


def trace_timings(s: TraceSchedule) -> Timings:
    """Every request's figures from its arrival; the run from the first arrival to the last token."""
    ttft = tuple(s.ends[f] - a for a, f in zip(s.arrival_s, s.first, strict=True))
    e2e = tuple(s.ends[f] - a for a, f in zip(s.arrival_s, s.finished, strict=True))
    tpot = tuple((e - t) / (o - 1) for e, t, o in zip(e2e, ttft, s.osl, strict=True) if o > 1)
    return Timings(ttft=ttft, tpot=tpot or (0.0,), e2e=e2e, duration=s.ends[-1] - s.arrival_s[0],
                   itl_median=itl_median(s.steps, s.ends))  # fmt: skip
