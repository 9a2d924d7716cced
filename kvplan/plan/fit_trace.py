"""`kvplan fit --trace`: a candidate must hold a real trace, not only a flat requirement.

The trace (any format ``kvplan simulate`` reads, parsed once) is replayed in occupancy mode through the
candidate's own pool: per DP rank ``usable_pages`` pages of ``logical_page_tokens`` tokens (the planned pool, the
page size, 64 × dcp for DSA), ``max_running_requests`` running at most, the engine's prefix-cache semantics (SGLang
radix tree, vLLM block pool; MTP candidates with the EAGLE key rule), each request routed to one DP rank as the
engine routes it (:mod:`kvplan.sim.ranks`). The candidate holds the trace when every request is admitted on
arrival, none is preempted and none is too long for its rank's pool; its hit rate is the replay's hit tokens over
the trace's prompt tokens (all ranks), at least ``--min-hit``.

The flat requirement a trace implies is checked first with gate's code (cheap): the longest request
(input + output tokens) admitted once. Replays are cached per (engine, pool pages, page tokens, DP ranks, running
limit, EAGLE): candidates that plan the same pool share one replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.plan.admit import dp_ranks
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Pool
from kvplan.sim.ranks import ENGINE_ROUTER, Stop, replay_ranks
from kvplan.sim.registry import engine_pool
from kvplan.sim.replay import Service
from kvplan.sim.trace import CompactTrace, Trace

TraceKey = tuple[str, int, int, int, int, bool]


@dataclass(frozen=True, kw_only=True)
class TraceSpec:
    """The trace a fit must hold, parsed once, and the replays done so far."""

    path: str
    description: str
    block_tokens: int
    compact: CompactTrace = field(compare=False, repr=False)
    requests: int
    longest_tokens: int
    """The longest request's input + output tokens: the context every candidate must admit."""
    min_hit_ppm: int
    """The least hit rate (hit tokens / prompt tokens), in parts per million."""
    prefill_tps: int
    tpot_us: int
    cache: dict[TraceKey, TraceFit] = field(default_factory=dict, compare=False, repr=False)
    bounds: dict[tuple[int, str], int] = field(default_factory=dict, compare=False, repr=False)
    """(DP ranks, router) -> the reuse bound on hit tokens (:func:`reuse_bound`)."""

    @property
    def prompt_tokens(self) -> int:
        return sum(self.compact.input)

    def service(self, max_running: int) -> Service:
        return Service(self.prefill_tps, self.tpot_us, max_running)

    def service_text(self) -> str:
        return (
            f"prefill {self.prefill_tps:,} tokens/s per request (uncached tokens), decode {self.tpot_us / 1000:g} ms "
            "a token, the candidate's max_running_requests per rank; FCFS, newest-first recompute preemption"
        )


def with_trace(req: Requirements, spec: TraceSpec) -> Requirements:
    """The requirements with the trace's own: its longest request (input + output) admitted once."""
    return replace(req, min_ctx_tokens=max(req.min_ctx_tokens or 0, spec.longest_tokens))


def trace_spec(trace: Trace, *, min_hit_ppm: int, prefill_tps: int = 10_000, tpot_us: int = 40_000) -> TraceSpec:
    """Read the trace once (a malformed trace is bad input here, before any search)."""
    compact = CompactTrace(trace)
    n = len(compact)
    if n == 0:
        raise InputError(f"trace {trace.path}: no requests")
    longest = max(i + o for i, o in zip(compact.input, compact.output, strict=True))
    if longest <= 0:
        raise InputError(f"trace {trace.path}: every request is empty (0 input and 0 output tokens)")
    return TraceSpec(
        path=str(trace.path),
        description=trace.describe(),
        block_tokens=trace.block_tokens,
        compact=compact,
        requests=n,
        longest_tokens=longest,
        min_hit_ppm=min_hit_ppm,
        prefill_tps=prefill_tps,
        tpot_us=tpot_us,
    )


@dataclass(frozen=True, kw_only=True)
class TraceFit:
    """One candidate's pool replaying the trace."""

    engine: str
    router: str
    ranks: int
    pool_pages: int
    """Usable pages of one rank's pool."""
    page_tokens: int
    max_running: int
    eagle: bool
    min_hit_ppm: int
    peak_held_pages: int = 0
    """The most pages running requests held at once on one rank."""
    peak_running: int = 0
    waited: int = 0
    """Requests not admitted on arrival (memory or the running limit)."""
    preemptions: int = 0
    dropped: int = 0
    """Requests too long for one rank's pool."""
    hit_tokens: int = 0
    prompt_tokens: int = 0
    rank_requests: tuple[int, ...] = ()
    error: str | None = None
    """Why the trace cannot be replayed on this pool (its blocks and the pages do not nest)."""
    stop: Stop | None = None
    """The first shortfall: the replay stops there (the trace is not held; no hit rate is measured)."""
    bound_tokens: int | None = None
    """Not replayed: the trace's reuse on these ranks caps the hit tokens below --min-hit (:func:`reuse_bound`)."""

    @property
    def holds(self) -> bool:
        return self.error is None and self.stop is None and self.bound_tokens is None

    @property
    def hit_ppm(self) -> int:
        return self.hit_tokens * 1_000_000 // self.prompt_tokens if self.prompt_tokens else 0

    @property
    def hit_ok(self) -> bool:
        return self.holds and self.hit_tokens * 1_000_000 >= self.min_hit_ppm * self.prompt_tokens

    @property
    def ok(self) -> bool:
        return self.holds and self.hit_ok

    @property
    def headroom_ppm(self) -> int:
        """Pages one rank's pool had left at the trace's peak, in ppm of the pool."""
        return (self.pool_pages - self.peak_held_pages) * 1_000_000 // max(self.pool_pages, 1)

    @property
    def lacks(self) -> tuple[str, ...]:
        if self.error is not None:
            return (f"trace: {self.error}",)
        if self.bound_tokens is not None:
            cap = self.bound_tokens * 1_000_000 // max(self.prompt_tokens, 1)
            return (
                f"trace: hit rate at most {cap / 10_000:.1f}% < {self.min_hit_ppm / 10_000:.1f}% on "
                f"{self.ranks} rank{'s' if self.ranks > 1 else ''} (the trace's own reuse, even with unbounded pools)",
            )
        if self.stop is not None:
            return (f"trace: not held: {self.stop_text}",)
        if not self.hit_ok:
            return (f"trace: hit rate {self.hit_ppm / 10_000:.1f}% < {self.min_hit_ppm / 10_000:.1f}%",)
        return ()

    @property
    def stop_text(self) -> str:
        s = self.stop
        if s is None:
            return ""
        who = "a running request's next page" if s.index < 0 else f"request {s.index:,} (line {s.line})"
        what = {"waited": "was not admitted on arrival", "too long": "is too long for one rank's pool"}.get(
            s.what, "preempted a running request"
        )
        if s.index < 0:
            what = "preempted a running request"
        binds = "running requests" if s.running >= self.max_running else "pool pages"
        return (
            f"{who} {what} at {s.time_us / 1_000_000:,.1f} s on rank {s.rank} ({s.held_pages:,} of "
            f"{self.pool_pages:,} pages held, {s.running:,} of {self.max_running:,} running: {binds} bind)"
        )


def trace_key(plan: PoolPlan) -> TraceKey:
    d = plan.deployment
    return (plan.engine, plan.usable_pages, plan.logical_page_tokens, dp_ranks(plan), plan.max_running_requests, d.mtp)


def check_trace(plan: PoolPlan, spec: TraceSpec) -> TraceFit:
    """The trace replayed through the candidate's pools (cached per :func:`trace_key`)."""
    key = trace_key(plan)
    if (hit := spec.cache.get(key)) is not None:
        return hit
    out = _replay(key, spec)
    spec.cache[key] = out
    return out


def _replay(key: TraceKey, spec: TraceSpec) -> TraceFit:
    engine, pages, page_tokens, ranks, max_running, eagle = key
    router = ENGINE_ROUTER[engine]
    base = TraceFit(
        engine=engine, router=router, ranks=ranks, pool_pages=pages, page_tokens=page_tokens,
        max_running=max_running, eagle=eagle, min_hit_ppm=spec.min_hit_ppm,
    )  # fmt: skip
    try:
        paging = Paging(spec.block_tokens, page_tokens)
    except InputError as e:
        return replace(base, error=str(e))
    prompt = spec.prompt_tokens
    if spec.min_hit_ppm:
        bound = reuse_bound(spec, ranks, router)
        if bound * 1_000_000 < spec.min_hit_ppm * prompt:
            return replace(base, bound_tokens=bound, prompt_tokens=prompt)
    pools: list[Pool] = [engine_pool(engine, pages, page_tokens, paging, eagle=eagle) for _ in range(ranks)]
    results, stop = replay_ranks(
        spec.compact.read(),
        pools,
        lambda: Paging(spec.block_tokens, page_tokens),
        service=spec.service(max_running),
        router=router,
        until_short=True,
    )
    occ = [r.result.occupancy for r in results]
    if stop is not None:
        return replace(
            base,
            stop=stop,
            peak_held_pages=max(r.peak_held_pages for r in results),
            peak_running=max(o.peak_running for o in occ if o is not None),
        )
    return replace(
        base,
        peak_held_pages=max(r.peak_held_pages for r in results),
        peak_running=max(o.peak_running for o in occ if o is not None),
        waited=sum(sum(1 for w in o.waits_us if w > 0) for o in occ if o is not None),
        preemptions=sum(o.preemptions for o in occ if o is not None),
        dropped=sum(r.result.too_long for r in results),
        hit_tokens=sum(r.result.stats.hit_tokens for r in results),
        prompt_tokens=sum(r.result.input_tokens for r in results),
        rank_requests=tuple(r.requests for r in results),
    )


def reuse_bound(spec: TraceSpec, ranks: int, router: str) -> int:
    """An upper bound on the hit tokens of any pool on ``ranks`` DP ranks: per rank, each request's leading
    blocks that an earlier request on the same rank listed (prefix-chained ids: the whole prefix was seen), times
    the block, at most its input. An engine hits only KV an earlier request on its rank computed, in whole pages
    inside those blocks, so no pool size, page size or eviction policy hits more. Round-robin routing fixes the
    ranks' requests (request k on rank k mod N); any other router is bounded by one shared cache (ranks = 1).
    A trace without block ids reuses nothing: 0."""
    n = ranks if router == "round_robin" else 1
    key = (n, router if n > 1 else "")
    if (hit := spec.bounds.get(key)) is not None:
        return hit
    c = spec.compact
    total = 0
    if c.has_blocks and spec.block_tokens:
        seen: list[set[int]] = [set() for _ in range(n)]
        ids, st, bt = c.ids, c.starts, spec.block_tokens
        for i in range(len(c)):
            blocks = ids[st[i] : st[i + 1]]
            mine = seen[i % n]
            lead = 0
            for b in blocks:
                if b not in mine:
                    break
                lead += 1
            total += min(lead * bt, c.input[i])
            mine.update(blocks)
    spec.bounds[key] = total
    return total
