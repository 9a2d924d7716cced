"""The engine's scheduler over a closed-loop load, as ``bench_serving`` / ``vllm bench serve --max-concurrency``
run it: ``concurrency`` clients, each sending its next request the moment its last one finishes.

Which batch a step runs depends on counts only, never on how long a step took: the schedule is built once as step
indices (``Schedule``) and priced afterwards (``timings``), so calibration re-prices one schedule per candidate.

- SGLang (``Scheduler.get_next_batch_to_run``): a new prefill batch, when one can be formed, runs before decoding
  (``get_new_batch_prefill`` first; mixed chunks are off by default): up to ``chunked_prefill_size`` tokens of
  waiting requests, a longer prompt continuing as the chunked request in the next prefill batches; else one decode
  step of every running request.
- vLLM V1 (``Scheduler.schedule``): every step decodes each running request first, then fills the rest of
  ``max_num_batched_tokens`` with prefill tokens, the partial prefill first, then waiting requests while fewer than
  ``max_num_seqs`` run.
Admission: a request starts when the running set (prefilling + decoding) is below ``cap``: the smaller of the
engine's running-request limit and the pool's tokens over isl + osl (each running request holds its whole length).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

from kvplan.perf.engine import Engine, Stepped
from kvplan.perf.spec import Acceptance, steps_for
from kvplan.perf.step import Batch

# What is measured: the steady state, as the public measurements were taken. AIConfigurator's rows
# (silicon_sample.csv) come from `aiperf profile --concurrency C` with `--warmup-request-count C` (2C in its
# bench_run.sh), C × rounds measured requests of fixed lengths (ISL / OSL stddev 0, ignore_eos; its generator's
# sflow.py and benchmark/bench_run.sh.j2). closed_loop(steady=True) spreads the clients or, for the waves an engine
# keeps (WAVES), starts them together; a busy engine sees a new request TURNAROUND_STEPS late, and the clients keep
# sending until the measured requests finish. TTFT and TPOT are per measured request (the caller takes median and
# p90).
# Where the measured clients stand is the engine's doing, not the load's: aiperf starts every client at once, and
# whether the waves then drift apart follows from how each engine interleaves prefill with decode (WAVES).
WAVES = {"sglang": True, "vllm": False}
"""Whether the engine can hold a closed loop's clients in waves. SGLang (``Scheduler.get_next_batch_to_run``, mixed
chunks off): a wave's prefill batches all run before any of its requests decodes again, so requests of fixed
lengths sent together finish at one step and the clients send together again, each wave a burst; the clients'
turnaround jitter works against it, and the share that stays in waves is fitted (``Coefficients.wave_share``).
vLLM V1 (``Scheduler.schedule``): a request decodes from the step after its first token, beside the others' prefill
chunks, so it finishes as far after the others as it started; nothing re-synchronises the clients and they spread
over a request's service."""
TURNAROUND_STEPS = {"sglang": 2, "vllm": 1}
"""Steps a busy engine runs before it sees a request sent as the previous one's last token reached its client.
vLLM V1 (``EngineCore.run_busy_loop``): new requests are taken between steps, so one sent while step s + 1 runs
(its client got step s's token) is scheduled at s + 2. SGLang (``Scheduler.event_loop_overlap``, overlap on by
default): step s's results are processed only after step s + 1 is launched and the next loop's ``recv_requests``
has run, so the request is seen at s + 3. An idle engine takes it at once."""


@dataclass(frozen=True, kw_only=True)
class Schedule:
    runs: tuple[Batch, ...]
    """The steps, a run of decode steps as one (``Batch.repeat``)."""
    arrived: tuple[int, ...]
    """Per request: the step after whose end it was sent (-1: at the start)."""
    first: tuple[int, ...]
    """Per request: the step that sampled its first token."""
    finished: tuple[int, ...]
    cap: int
    peak_running: int
    warmup: int
    """Requests sent first and not measured (aiperf's --warmup-request-count); the measured ones follow."""
    measured: int
    """Requests measured after the warm-up (0: every request)."""
    preemptions: int = 0
    """vLLM preemptions / SGLang retractions the pool forced (kvplan.perf.engine)."""

    @property
    def steps(self) -> tuple[Batch, ...]:
        """The steps one by one."""
        return tuple(s for b in self.runs for s in b.each())

    @property
    def measured_ids(self) -> range:
        return range(self.warmup, self.warmup + self.measured if self.measured else len(self.arrived))


@dataclass
class _Req:
    rid: int
    done: int = 0
    isl: int = 0
    """Its own input and output tokens (a trace's); 0: the run's ``isl`` / ``osl``."""
    osl: int = 0
    out: int = 0
    """Output tokens made before its current fill or decode (a preempted request keeps them)."""
    fill: int = 0
    """Tokens its current prefill runs over: isl, or isl + out after a preemption (recompute)."""
    start: int = -1
    """The engine's decode count when it began decoding; -1 while waiting or prefilling."""
    epoch: int = 0
    res: int = 0
    """Output tokens its admission reserved (SGLang's estimate)."""
    cached: int = 0
    """vLLM: its computed tokens left in the prefix cache when it was preempted."""
    seq: int = 0
    """Its place in the running set's admission order (SGLang's retraction takes the latest among equals)."""
    falls: int = 0
    """SGLang, decoding: where its reservation starts to fall in the engine's count (kvplan.perf.reserve)."""


class Load(Protocol):
    """Who sends requests: the closed loop's clients (``_Clients``) or an open-loop arrival process (open_loop.py)."""

    first: list[int]
    finished: list[int]

    def seen(self, steps: list[Batch], step: int, idle: bool) -> list[_Req]: ...

    def send(self, after: int) -> None: ...

    def quiet_until(self, step: int) -> int:
        """The first step from ``step`` (a busy engine's) at which ``seen`` may hand over a request, as far as the
        load knows before any request finishes (``step`` itself where it cannot say)."""
        ...


@dataclass
class _Clients:
    """The load generator: who has sent what, and when the scheduler sees it."""

    num_prompts: int
    sustain: bool
    turnaround: int
    starts: list[int]
    """Per client not yet started: the step after which it sends its first request."""
    arrived: list[int]
    first: list[int]
    finished: list[int]
    pending: deque[tuple[int, _Req]]
    """Sent, not yet seen by the scheduler: (the first step that sees it, request)."""

    def send(self, after: int) -> None:
        if len(self.arrived) >= self.num_prompts and not self.sustain:
            return
        self.arrived.append(after)
        self.first.append(-1)
        self.finished.append(-1)
        self.pending.append((after + 1 + (self.turnaround if after >= 0 else 0), _Req(len(self.arrived) - 1)))

    def quiet_until(self, step: int) -> int:
        due = [self.starts[0] + 1] if self.starts else []  # seen() sends a start at the step after it
        return min([*due, self.pending[0][0]] if self.pending else due, default=1 << 62)

    def seen(self, steps: list[Batch], step: int, idle: bool) -> list[_Req]:
        """The requests the scheduler takes at step ``step``: those due, else (an idle engine) the next one sent."""
        s = step
        while self.starts and self.starts[0] < s:
            self.send(self.starts.pop(0))
        if idle and self.pending and self.pending[0][0] > s:  # an idle engine takes the head, and those sent with it
            sent = self.arrived[self.pending[0][1].rid]
            self.pending = deque((s, r) if self.arrived[r.rid] == sent else (due, r) for due, r in self.pending)
        out = []
        while self.pending and self.pending[0][0] <= s:
            out.append(self.pending.popleft()[1])
        return out


def closed_loop(
    *,
    engine: str,
    isl: int,
    osl: int,
    concurrency: int,
    cap: int,
    budget: int,
    num_prompts: int,
    warmup: int = 0,
    steady: bool = False,
    waves: bool = False,
    spec: Acceptance | None = None,
    pool: int = 0,
) -> Schedule:
    """The step-by-step schedule of ``num_prompts`` requests of ``isl`` + ``osl`` tokens from ``concurrency``
    clients; ``budget`` is the chunk (SGLang chunked_prefill_size) or token budget (vLLM max_num_batched_tokens).

    ``steady``: the state a benchmark measures after its warm-up (``warmup`` requests, not measured), not its first
    burst: the clients' first requests spread evenly over one request's service (``waves``: all sent at once, the
    waves SGLang keeps, ``WAVES``), each request seen ``TURNAROUND_STEPS`` late by a busy engine (an idle one takes
    it and those sent with it at once), and the clients sending on until every measured request has finished.
    Without it every client sends at step -1 and the engine sees it at once.

    ``spec`` (speculative decoding, kvplan.perf.spec): each decode step runs D tokens a request through the target
    and the draft and yields the acceptance length A, so a request decodes its osl − 1 tokens in ceil((osl − 1) / A)
    steps; vLLM counts the D tokens against its budget.

    ``pool``: the KV pool's tokens (0: none, ``cap`` alone); admission and preemption then follow the engine's own
    (kvplan.perf.engine)."""
    if min(isl, osl, concurrency, cap, budget, num_prompts) < 1 or not 0 <= warmup < num_prompts:
        raise ValueError("isl, osl, concurrency, the running cap, the token budget and the prompts must be >= 1")
    cycle = -(-isl // budget) + _decode_steps(osl, spec)  # one request's steps when it runs alone
    n = min(concurrency, num_prompts)
    starts = [i * cycle // n - 1 for i in range(n)] if steady and not waves else [-1] * n
    clients = _Clients(num_prompts=num_prompts, sustain=steady, turnaround=TURNAROUND_STEPS[engine] if steady else 0,
                       starts=starts, arrived=[], first=[], finished=[], pending=deque())  # fmt: skip
    if pool and isl + osl > pool:
        raise ValueError(f"a request of {isl:,} + {osl:,} tokens is larger than the whole pool ({pool:,} tokens)")
    run = _run(engine, isl, osl, cap, budget, clients, num_prompts if steady else 0, spec, pool)
    c = clients
    return Schedule(runs=tuple(run.steps), arrived=tuple(c.arrived), first=tuple(c.first),
                    finished=tuple(c.finished), cap=cap, peak_running=run.peak_running,
                    warmup=warmup if steady else 0, measured=num_prompts - warmup if steady else 0,
                    preemptions=run.preemptions)  # fmt: skip


def _decode_steps(osl: int, spec: Acceptance | None) -> int:
    return osl - 1 if spec is None else steps_for(osl - 1, spec.milli)


def _run(
    engine: str,
    isl: int,
    osl: int,
    cap: int,
    budget: int,
    c: Load,
    stop_at: int,
    spec: Acceptance | None,
    pool: int,
) -> Stepped:
    """Step the engine's policy (module doc; the pool's side: kvplan.perf.engine) until every request (the first
    ``stop_at``, when given) has finished. A request of its own lengths (``_Req.isl`` / ``osl``, a trace's) runs with
    them; the others with ``isl`` / ``osl``."""
    return Engine(engine=engine, isl=isl, osl=osl, cap=cap, budget=budget, pool=pool, load=c, stop_at=stop_at,
                  spec=spec).run()  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Timings:
    """Per-request figures in seconds, and the run's length: what ``bench_serving`` reports from its requests."""

    ttft: tuple[float, ...]
    tpot: tuple[float, ...]
    e2e: tuple[float, ...]
    duration: float
    itl_median: float
    """The median gap between two tokens of one request, over every decoded token: a decode step's end less the
    previous decode step's end (SGLang's prefill batches in between count in the gap)."""


def timings(sched: Schedule, step_seconds: list[float], osl: int) -> Timings:
    """The measured requests' figures (``Schedule.measured_ids``) and the whole run's length and ITL."""
    ends = list(itertools.accumulate(step_seconds))
    t = ends[-1] if ends else 0.0

    def at(step: int) -> float:
        return 0.0 if step < 0 else ends[step]

    ids = sched.measured_ids
    ttft = tuple(at(sched.first[i]) - at(sched.arrived[i]) for i in ids)
    e2e = tuple(at(sched.finished[i]) - at(sched.arrived[i]) for i in ids)
    tpot = tuple((e - t1) / (osl - 1) if osl > 1 else 0.0 for e, t1 in zip(e2e, ttft, strict=True))
    gaps: list[tuple[float, int]] = []
    last: int | None = None
    s = 0  # the run's first step
    for b in sched.runs:
        n = b.decode_requests
        if n:
            prev = ends[last] if last is not None else (ends[s - 1] if s else 0.0)  # first decode: first tokens
            gaps.append((ends[s] - prev, n))
            gaps.extend((ends[i] - ends[i - 1], n) for i in range(s + 1, s + b.repeat))
            last = s + b.repeat - 1
        s += b.repeat
    return Timings(ttft=ttft, tpot=tpot, e2e=e2e, duration=t, itl_median=_weighted_median(gaps))


def with_request_latency(t: Timings, seconds: float) -> Timings:
    """``t`` with a fixed per-request latency outside the steps added before the first token (TTFT, end to end and
    the run: its last token that much later)."""
    if not seconds:
        return t
    return replace(t, ttft=tuple(x + seconds for x in t.ttft), e2e=tuple(x + seconds for x in t.e2e),
                   duration=t.duration + seconds)  # fmt: skip


def blend(spread: Timings, waves: Timings, share: float) -> Timings:
    """The figures of a loop whose clients are ``share`` in waves and the rest spread: each quantile of each
    per-request figure (the measured requests of both, sorted) and the run's length and ITL are the share-weighted
    mean of the two loops' (``Coefficients.wave_share``)."""
    if not share:
        return spread

    def mix(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
        return tuple((1 - share) * x + share * y for x, y in zip(sorted(a), sorted(b), strict=True))

    return Timings(ttft=mix(spread.ttft, waves.ttft), tpot=mix(spread.tpot, waves.tpot), e2e=mix(spread.e2e, waves.e2e),
                   duration=(1 - share) * spread.duration + share * waves.duration,
                   itl_median=(1 - share) * spread.itl_median + share * waves.itl_median)  # fmt: skip


def _weighted_median(gaps: list[tuple[float, int]]) -> float:
    if not gaps:
        return 0.0
    half, seen = sum(w for _, w in gaps) / 2, 0
    for g, w in sorted(gaps):
        seen += w
        if seen >= half:
            return g
    return sorted(gaps)[-1][0]
