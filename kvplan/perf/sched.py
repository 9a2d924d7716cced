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

import heapq
from collections import deque
from dataclasses import dataclass

from kvplan.perf.step import Batch, chunk_pairs


@dataclass(frozen=True, kw_only=True)
class Schedule:
    steps: tuple[Batch, ...]
    arrived: tuple[int, ...]
    """Per request: the step after whose end it was sent (-1: at the start)."""
    first: tuple[int, ...]
    """Per request: the step that sampled its first token."""
    finished: tuple[int, ...]
    cap: int
    peak_running: int


@dataclass
class _Req:
    rid: int
    done: int = 0


def closed_loop(
    *, engine: str, isl: int, osl: int, concurrency: int, cap: int, budget: int, num_prompts: int
) -> Schedule:
    """The step-by-step schedule of ``num_prompts`` requests of ``isl`` + ``osl`` tokens from ``concurrency``
    clients; ``budget`` is the chunk (SGLang chunked_prefill_size) or token budget (vLLM max_num_batched_tokens)."""
    if min(isl, osl, concurrency, cap, budget, num_prompts) < 1:
        raise ValueError("isl, osl, concurrency, the running cap, the token budget and the prompts must be >= 1")
    mixed = engine == "vllm"
    arrived, first, finished = [-1] * num_prompts, [0] * num_prompts, [0] * num_prompts
    waiting: deque[_Req] = deque(_Req(i) for i in range(min(concurrency, num_prompts)))
    sent = len(waiting)
    prefilling: list[_Req] = []
    decoding: list[tuple[int, int]] = []  # heap of (decode count at which it finishes, rid)
    decode_count = context = peak = 0
    steps: list[Batch] = []
    while len(steps) < 10_000_000:
        s = len(steps)
        prefill_first = not mixed and (prefilling or (waiting and len(decoding) + len(prefilling) < cap))
        n_dec = 0 if prefill_first else len(decoding)
        room = budget - n_dec if mixed else (budget if prefill_first else 0)
        tokens = pairs = 0
        done_now: list[_Req] = []
        while room > 0:
            if not prefilling:
                if not waiting or len(decoding) + len(prefilling) + len(done_now) >= cap:
                    break
                prefilling.append(waiting.popleft())
            r = prefilling[0]
            n = min(isl - r.done, room)
            pairs += chunk_pairs(n, r.done)
            r.done += n
            tokens += n
            room -= n
            if r.done == isl:
                done_now.append(prefilling.pop(0))
        peak = max(peak, len(decoding) + len(prefilling) + len(done_now))
        steps.append(Batch(prefill_tokens=tokens, prefill_pairs=pairs, decode_requests=n_dec,
                           decode_context=context if n_dec else 0, sampled=n_dec + len(done_now)))  # fmt: skip
        if n_dec:
            decode_count += 1
            context += n_dec
            while decoding and decoding[0][0] <= decode_count:
                _, rid = heapq.heappop(decoding)
                finished[rid] = s
                context -= isl + osl
                if sent < num_prompts:
                    arrived[sent] = s
                    waiting.append(_Req(sent))
                    sent += 1
        for r in done_now:
            first[r.rid] = s
            if osl == 1:
                finished[r.rid] = s
                if sent < num_prompts:
                    arrived[sent] = s
                    waiting.append(_Req(sent))
                    sent += 1
                continue
            heapq.heappush(decoding, (decode_count + osl - 1, r.rid))
            context += isl + 1
        if not (waiting or prefilling or decoding):
            break
    return Schedule(steps=tuple(steps), arrived=tuple(arrived), first=tuple(first), finished=tuple(finished),
                    cap=cap, peak_running=peak)  # fmt: skip


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
    ends: list[float] = []
    t = 0.0
    for dt in step_seconds:
        t += dt
        ends.append(t)

    def at(step: int) -> float:
        return 0.0 if step < 0 else ends[step]

    ttft = tuple(at(f) - at(a) for a, f in zip(sched.arrived, sched.first, strict=True))
    e2e = tuple(at(f) - at(a) for a, f in zip(sched.arrived, sched.finished, strict=True))
    tpot = tuple((e - t1) / (osl - 1) if osl > 1 else 0.0 for e, t1 in zip(e2e, ttft, strict=True))
    gaps: list[tuple[float, int]] = []
    last = -1
    for s, b in enumerate(sched.steps):
        if b.decode_requests:
            prev = ends[last] if last >= 0 else (ends[s - 1] if s else 0.0)  # first decode: from the first tokens
            gaps.append((ends[s] - prev, b.decode_requests))
            last = s
    return Timings(ttft=ttft, tpot=tpot, e2e=e2e, duration=t, itl_median=_weighted_median(gaps))


def _weighted_median(gaps: list[tuple[float, int]]) -> float:
    if not gaps:
        return 0.0
    half, seen = sum(w for _, w in gaps) / 2, 0
    for g, w in sorted(gaps):
        seen += w
        if seen >= half:
            return g
    return sorted(gaps)[-1][0]
