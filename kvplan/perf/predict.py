"""``kvplan perf``'s question: TTFT, TPOT, end-to-end latency and tokens per second per GPU of a deployment under a
closed-loop concurrency, from its own plan (pool, running cap, chunk budget), the step model and the coefficients.

Bands: each figure times and divided by 1 + 1.5 × the held-out MAPE of the coefficient row it used (TTFT's, TPOT's
or throughput's, from benchmarks/perf_calibrate.py); 1 + 3 × it when the row was borrowed (a GPU class, engine
version, kernel family or GEMM quant mode with no measured rows of its own), at least the largest miss measured of a
row borrowed that way, and with speculative decoding at least its largest miss (coeffs.band_mape).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch, Split
from kvplan.perf.coeffs import WORST_SPECULATIVE, Coefficients, band_mape, coefficients_for, family_of
from kvplan.perf.open_loop import SEED, open_loop, open_timings, thinking_loop
from kvplan.perf.peaks import Peaks, peaks_of
from kvplan.perf.sched import (
    TURNAROUND_STEPS,
    WAVES,
    Schedule,
    Timings,
    blend,
    closed_loop,
    timings,
    with_request_latency,
)
from kvplan.perf.shape import StepShape, step_shape
from kvplan.perf.spec import Acceptance, acceptance
from kvplan.perf.step import (
    Batch,
    attention_each,
    attention_part,
    attention_rates,
    attention_roofline,
    parts,
    rest_key,
    rest_of,
    step_seconds,
)
from kvplan.perf.trace_loop import Arrival, TraceLoad, trace_loop, trace_timings

RATE_PROMPTS = 256
"""Requests of an open-loop run (bench_serving's --num-prompts; its default 1,000 priced step by step is slower)."""
PROMPTS_PER_CLIENT = 3
"""Requests per client in the closed loop (num_prompts = 3 × concurrency), as the calibration ran: the first
``concurrency`` are the warm-up (aiperf's ``--warmup-request-count``, one per client in AIConfigurator's generated
benchmark, generator/sflow.py), the other two rounds are measured in the steady state (kvplan.perf.sched)."""


@dataclass(frozen=True)
class Band:
    value: int
    low: int
    high: int


@dataclass(frozen=True, kw_only=True)
class PerfResult:
    model: str
    engine: str
    engine_version: str
    gpu: str
    gpus: int
    isl: int
    osl: int
    concurrency: int
    num_prompts: int
    running_cap: int
    running_cap_from: str
    peak_running: int
    budget_tokens: int
    budget_from: str
    quant: str
    """The dense GEMMs' format (MLPs, shared experts; the attention projections' too unless ``attention_quant``)."""
    expert_quant: str
    """The routed experts' GEMM format (what the coefficient row is chosen by); '' for a dense model."""
    us: dict[str, Band]
    """ttft, ttft_p90, tpot, tpot_p90, itl, e2e, e2e_p90: microseconds."""
    tokens_per_s_per_gpu: dict[str, Band]
    """output, total."""
    coefficients: Coefficients
    borrowed: str
    peaks_source: str
    assumptions: tuple[str, ...]
    rate_per_s: float | None = None
    """--rate: an open loop of Poisson arrivals (concurrency 0); None for the closed loop."""
    acceptance: Acceptance | None = None
    """Speculative decoding's acceptance length, given or defaulted (kvplan.perf.spec); None without it."""
    pool_tokens: int = 0
    """The KV pool the loop admitted against (tokens, every DP rank's together)."""
    preemptions: int = 0
    """vLLM preemptions / SGLang retractions over the whole run (kvplan.perf.engine)."""
    trace: str | None = None
    """--trace: the trace and how it was read (isl / osl are then its means); None for the other loads."""
    attention_quant: str = ""
    """The attention projections' format where the checkpoint keeps them at another than ``quant``, else ''."""
    heldout: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The held-out MAPE of TTFT, TPOT, throughput the bands were built from (Coefficients.mape_for)."""
    heldout_of: str = ""
    """Which models that error was measured on."""
    range_ratio: float = 1.0
    """Lengths uniform in [range_ratio × L, L] (``isl`` / ``osl`` are then their means); 1.0: fixed lengths."""


def lowest_length(length: int, ratio: float) -> int:
    """The shortest length SGLang's bench_serving draws (``sample_random_requests``:
    ``np.random.randint(max(int(input_len * range_ratio), 1), input_len + 1)``; its outputs may start at 0, a token
    less at the low end, counted as 1 here)."""
    return max(int(length * ratio), 1)


def mean_length(length: int, ratio: float) -> int:
    """The mean of lengths drawn uniformly from [lowest_length, length], rounded half up."""
    return (lowest_length(length, ratio) + length + 1) // 2


def _lengths_line(isl: int, osl: int, ratio: float) -> str:
    if ratio >= 1:
        return ("lengths fixed (aiperf and the measurements the coefficients were fitted on; bench_serving"
                " --random-range-ratio 1): lengths drawn at random spread the clients (--range-ratio)")  # fmt: skip
    lo_i, lo_o = lowest_length(isl, ratio), lowest_length(osl, ratio)
    return (f"lengths uniform in [{lo_i:,}, {isl:,}] + [{lo_o:,}, {osl:,}] (bench_serving --random-range-ratio"
            f" {ratio:g}), priced at their means {mean_length(isl, ratio):,} + {mean_length(osl, ratio):,};"
            " requests of unequal lengths finish apart, so no SGLang waves; the p90 figures are those of requests of"
            " the mean lengths, not of the longest")  # fmt: skip


class StepPrice(Protocol):
    """Seconds of one step, and of each step of a run (``Batch.repeat``)."""

    def __call__(self, b: Batch) -> float: ...

    def each(self, b: Batch) -> list[float]: ...


class _Pricer:
    """Seconds of a step (kvplan.perf.step), a run's each step by ``each``; ``decode``: a PD decode instance's share
    of it (``decode_share``)."""

    def __init__(self, shape: StepShape, split: Split, formats: GemmFormats, kv_bytes: int, nodes: int,
                 peaks: Peaks, coeffs: Coefficients, *, decode: bool) -> None:  # fmt: skip
        self.shape, self.split, self.formats, self.kv_bytes, self.nodes = shape, split, formats, kv_bytes, nodes
        self.peaks, self.coeffs, self.decode = peaks, coeffs, decode
        self.rest: dict[tuple[int, ...], float] = {}  # all but attention, by its rest_key
        self.roof, self.rates = attention_roofline(peaks, coeffs), attention_rates(peaks, coeffs)

    def __call__(self, b: Batch) -> float:
        run = decode_share(b) if self.decode else b
        if run is None:
            return 0.0
        a = attention_part(self.shape, run, self.split, self.kv_bytes)
        return self._rest(run) + self.roof(a.flops, a.bytes)

    def each(self, b: Batch) -> list[float]:
        """Each step of a run (``Batch.repeat``): the parts but attention priced once, attention at each step's mean
        context (one longer each step), as ``__call__`` prices each step alone."""
        if b.repeat == 1:
            return [self(b)]
        run = decode_share(b) if self.decode else b
        assert run is not None  # a run decodes
        m = run.decode_context // run.decode_requests
        means = range(m, m + run.repeat)
        return attention_each(self.shape, run, self.split, self.kv_bytes, means, self.rates, self._rest(run))

    def _rest(self, run: Batch) -> float:
        key = rest_key(run)
        seconds = self.rest.get(key)
        if seconds is None:  # what a schedule repeats is priced once
            f = self.formats
            ps = parts(self.shape, rest_of(run), self.split, f.dense, f.experts, kv_bytes=self.kv_bytes,
                       nodes=self.nodes, attention_quant=f.attention)  # fmt: skip
            seconds = self.rest[key] = step_seconds(tuple(p for p in ps if p.name != "attention"), self.peaks,
                                                    self.coeffs)  # fmt: skip
        return seconds


def _priced_lengths(isl: int, osl: int, ratio: float, trace: TraceLoad | None) -> tuple[int, int, tuple[str, ...]]:
    """(isl, osl priced, the line saying how): below 1 (not with a trace, whose requests have their own lengths)
    lengths uniform in [ratio × L, L] are priced at their means with the clients never in waves (the cookbook's
    bench_serving runs of random lengths, benchmarks/perf_published.py: SGLang's median TTFT stays flat with the
    concurrency where the waves of fixed lengths raise it)."""
    if not 0 <= ratio <= 1 or (trace is not None and ratio < 1):
        raise ValueError("--range-ratio is a share in [0, 1] of --isl / --osl, not for a trace (its own lengths)")
    line = () if trace else (_lengths_line(isl, osl, ratio),)
    return (mean_length(isl, ratio), mean_length(osl, ratio), line) if ratio < 1 else (isl, osl, line)


def _budget(plan: PoolPlan, dp: int) -> tuple[int, str]:
    """(a rank's token budget a step, where it comes from)."""
    knob, knob_tokens, origin = token_budget(plan)
    budget = rank_budget(plan)
    if budget != knob_tokens:
        origin += f"; ÷ {dp} DP ranks: server_args chunked_prefill_size // dp_size"
    return budget, f"{knob} {knob_tokens:,} ({origin})"


@dataclass(frozen=True)
class GemmFormats:
    """The GEMM formats a checkpoint runs its weights at: attention projections (and the DSA indexer), the other
    dense GEMMs (MLPs, shared experts), the routed experts ('bf16' without them)."""

    attention: str
    dense: str
    experts: str

    @classmethod
    def of(cls, arch: ModelArch, moe: bool) -> GemmFormats:
        """Each as its checkpoint names it (``_quant``); the other dense GEMMs by the shared experts' or the dense
        MLPs' group, else the attention's (NVIDIA's NVFP4 checkpoints keep attention bf16, their MLPs NVFP4)."""
        attention = _quant(arch, "attention")
        mlp = next((g.name for g in arch.param_groups if g.name in ("shared_experts", "dense_mlp") and g.params), "")
        return cls(
            attention, _quant(arch, mlp) if mlp else attention, _quant(arch, "routed_experts") if moe else "bf16"
        )

    def line(self) -> str:
        """How the report says they were priced."""
        apart = f"attention projections {self.apart}, " if self.apart else ""
        int4 = "; int4 is weight-only, its GEMMs at bf16 peak" if "int4" in (self.dense, self.experts) else ""
        return (f"GEMMs at {self.dense} ({apart}experts {self.experts}) as the checkpoint's quantization names them"
                f" (else by its bytes per parameter){int4}")  # fmt: skip

    @property
    def apart(self) -> str:
        """The attention projections' format where it is not the other dense GEMMs', else ''."""
        return self.attention if self.attention != self.dense else ""


def _quant(arch: ModelArch, group: str) -> str:
    """The GEMM dtype of a parameter group: the format its checkpoint names (``ParamGroup.gemm``: int4 W4A16, fp4,
    fp8), else what its bytes per parameter imply (2 bytes bf16, 1 fp8, under 1 a 4-bit format)."""
    g = next((g for g in arch.param_groups if g.name == group), None)
    if g is None or not g.params:
        return "bf16"
    if g.gemm:
        return g.gemm
    per = g.bytes_per_param_num * g.params / (g.bytes_per_param_den * g.gemm_params())  # a value's, not an element's
    return "bf16" if per >= 1.9 else "fp8" if per >= 0.9 else "fp4"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(int(q * len(s)), len(s) - 1)]


def _band(v: float, rel: float, up: float = 1.0, down: float = 1.0) -> Band:
    """Multiplicative: a ratio error either way; ``up`` / ``down`` widen it further (the acceptance length's band).
    Its ends round outwards: a band is never narrower than the error it is built from."""
    return Band(round(v), math.floor(v / ((1 + rel) * down)), math.ceil(v * (1 + rel) * up))


def _figures(
    t: Timings,
    rel: tuple[float, float, float],
    spec: Acceptance | None,
    *,
    out: float,
    isl: int,
    osl: int,
) -> tuple[dict[str, Band], dict[str, Band]]:
    """(latencies in µs, tokens a second per GPU) with their bands. A defaulted acceptance length widens the decode
    figures by its band's ratio (TPOT goes as 1 / A: high end at A's low end)."""
    e_ttft, e_tpot, e_tput = rel
    slow, fast = (spec.milli / spec.low_milli, spec.high_milli / spec.milli) if spec else (1.0, 1.0)
    ttft, tpot, e2e = (list(x) for x in (t.ttft, t.tpot, t.e2e))
    us = {
        "ttft": _band(1e6 * _pct(ttft, 0.5), e_ttft), "ttft_p90": _band(1e6 * _pct(ttft, 0.9), e_ttft),
        "tpot": _band(1e6 * _pct(tpot, 0.5), e_tpot, slow, fast),
        "tpot_p90": _band(1e6 * _pct(tpot, 0.9), e_tpot, slow, fast),
        "itl": _band(1e6 * t.itl_median, e_tpot, slow, fast),
        "e2e": _band(1e6 * _pct(e2e, 0.5), e_tput, slow, fast),
        "e2e_p90": _band(1e6 * _pct(e2e, 0.9), e_tput, slow, fast),
    }  # fmt: skip
    tput = {"output": _band(out, e_tput, fast, slow), "total": _band(out * (isl + osl) / osl, e_tput, fast, slow)}
    return us, tput


def running_cap(plan: PoolPlan, isl: int, osl: int) -> tuple[int, str]:
    """Requests the engine runs at once: its running-request limit, or fewer where the pool cannot hold that many
    requests of isl + osl tokens (each holds its whole length; per DP rank, times the ranks); and where it came from."""
    dp = max(plan.deployment.dp_attention, 1)
    by_pool = plan.usable_tokens * dp // (isl + osl)
    cap = max(min(plan.max_running_requests, by_pool), 1)
    return cap, (f"max_running_requests {plan.max_running_requests:,}" if cap == plan.max_running_requests else
                 f"pool {plan.usable_tokens:,} tokens × {dp} DP rank(s) // (isl + osl) = {by_pool:,}")  # fmt: skip


def token_budget(plan: PoolPlan) -> tuple[str, int, str]:
    """(knob, tokens a step, its origin): SGLang's chunked_prefill_size, vLLM's max_num_batched_tokens."""
    knob = "chunked_prefill_size" if plan.engine == "sglang" else "max_num_batched_tokens"
    k = plan.knob(knob)
    return knob, int(k.value) if isinstance(k.value, int) and k.value > 0 else 8192, k.origin


def rank_budget(plan: PoolPlan) -> int:
    """Tokens one DP-attention rank schedules a step. vLLM's max_num_batched_tokens is each EngineCore's own;
    SGLang divides chunked_prefill_size among its ranks (``server_args._handle_data_parallelism``:
    ``chunked_prefill_size // dp_size``, "to avoid MoE kernel issues"), so its ranks together take the knob's value."""
    budget, dp = token_budget(plan)[1], max(plan.deployment.dp_attention, 1)
    return max(budget // dp, 1) if plan.engine == "sglang" else budget


@dataclass(frozen=True)
class Ran:
    """What a loop ran: its peak running set, its requests and the preemptions the pool forced."""

    peak: int
    requests: int
    preemptions: int


def _pool_line(engine: str, pool: int, dp: int, preemptions: int) -> str:
    how = ("vLLM V1 preempts the newest running request (Scheduler.schedule → _preempt_request)" if engine == "vllm"
           else "SGLang retracts decode requests (update_running_batch → retract_decode)")  # fmt: skip
    return (
        f"admission against the KV pool, {pool:,} tokens ({dp} DP rank(s) as one pool), as the engine admits;"
        f" when the running set's growth does not fit, {how} and recomputes it: {preemptions:,} preemption(s)"
    )


@dataclass(frozen=True, kw_only=True)
class Load:
    engine: str
    isl: int
    osl: int
    cap: int
    budget: int
    spec: Acceptance | None
    pool: int = 0
    """The KV pool's tokens (kvplan.perf.engine: admission and preemption against it)."""
    request_s: float = 0.0
    """The coefficients' per-request latency outside the steps (kvplan.perf.coeffs.Coefficients.request_us)."""
    client_s: float = 0.0
    """The coefficients' latency before a first token per request in flight (Coefficients.client_us)."""
    ranks: int = 1
    """DP-attention ranks: each schedules its own requests with its own running cap and token budget."""
    wave_share: float = 0.0
    """The coefficients' share of a closed loop's clients in waves (kvplan.perf.coeffs.Coefficients.wave_share)."""

    def before_first(self, in_flight: int) -> float:
        """Seconds each request waits outside the steps before its first token with ``in_flight`` requests."""
        return self.request_s + self.client_s * in_flight


def _closed(ld: Load, concurrency: int, price: StepPrice) -> tuple[Timings, float, Ran, str]:
    """(timings, output tok/s, what ran, how) of the closed loop in its steady state. Under DP attention every rank
    schedules its own requests with its own token budget (SGLang ``DataParallelController`` → one ``Scheduler`` a
    rank; vLLM one ``EngineCore`` a rank): the loop's step takes ``ranks`` × the budget. An engine that keeps waves
    (sched.WAVES) runs the loop both ways and blends them by the coefficients' ``wave_share``."""
    n = PROMPTS_PER_CLIENT * concurrency
    share = ld.wave_share if WAVES[ld.engine] else 0.0

    def loop(waves: bool) -> tuple[Schedule, Timings]:
        s = closed_loop(engine=ld.engine, isl=ld.isl, osl=ld.osl, concurrency=concurrency, cap=ld.cap * ld.ranks,
                        budget=ld.budget * ld.ranks, num_prompts=n, warmup=concurrency, steady=True, waves=waves,
                        spec=ld.spec, pool=ld.pool)  # fmt: skip
        return s, timings(s, [t for b in s.runs for t in price.each(b)], ld.osl)

    s, t = loop(False)
    ran = Ran(s.peak_running, n, s.preemptions)
    if share:
        w, tw = loop(True)
        t = blend(t, tw, share)
        ran = Ran(max(s.peak_running, w.peak_running), n, max(s.preemptions, w.preemptions))
    t = with_request_latency(t, ld.before_first(concurrency))
    out = concurrency * ld.osl / (sum(t.e2e) / len(t.e2e))  # Little's law: each client one request per e2e
    ranks = (f"; DP attention: {ld.ranks} ranks, each its own scheduler and budget of {ld.budget:,} tokens a step"
             f" ({ld.budget * ld.ranks:,} in all)" if ld.ranks > 1 else "")  # fmt: skip
    phase = (f"the clients {1 - share:.0%} spread over a request's service, {share:.0%} in waves (SGLang prefills a"
             " wave before decoding it; the share is the coefficients' fitted wave_share: each quantile the"
             " share-weighted mean of the two loops'; the running set's peak and the preemptions the larger of the"
             " two)" if share
             else "the clients spread over a request's service")  # fmt: skip
    how = (f"closed loop: {concurrency} clients, each sending its next request of {ld.isl:,} + {ld.osl:,} tokens when"
           f" its last finishes (aiperf --concurrency, bench_serving --max-concurrency); steady state: {concurrency}"
           f" warm-up requests, {n - concurrency} measured, {phase}, a busy engine"
           f" seeing a new request {TURNAROUND_STEPS[ld.engine]} step(s) late{ranks}")  # fmt: skip
    return t, out, ran, how


def _open(ld: Load, rate: float, price: Callable[[Batch], float]) -> tuple[Timings, float, Ran, str]:
    """The same for an open loop: Poisson arrivals at ``rate`` a second, every request measured."""
    n = RATE_PROMPTS
    s = open_loop(engine=ld.engine, isl=ld.isl, osl=ld.osl, rate_per_s=rate, num_prompts=n, cap=ld.cap,
                  budget=ld.budget, price=price, spec=ld.spec, pool=ld.pool)  # fmt: skip
    t = with_request_latency(open_timings(s, ld.osl), ld.before_first(s.peak_running))
    how = (f"open loop: {n} requests of {ld.isl:,} + {ld.osl:,} tokens arriving as a Poisson process at {rate:g}/s"
           f" (seed {SEED}; bench_serving / vllm bench serve --request-rate {rate:g}, burstiness 1.0), every request"
           " measured from its arrival; throughput over the whole run, drain included, as bench_serving reports"
           " it")  # fmt: skip
    return t, n * ld.osl / t.duration, Ran(s.peak_running, n, s.preemptions), how


def _thinking(
    ld: Load, clients: int, think_s: float, price: Callable[[Batch], float]
) -> tuple[Timings, float, Ran, str]:
    """The same for clients that think ``think_s`` between requests, every request measured."""
    n = PROMPTS_PER_CLIENT * clients
    s = thinking_loop(engine=ld.engine, isl=ld.isl, osl=ld.osl, clients=clients, think_s=think_s, num_prompts=n,
                      cap=ld.cap, budget=ld.budget, price=price, pool=ld.pool)  # fmt: skip
    t = with_request_latency(open_timings(s, ld.osl), ld.before_first(clients))
    how = (f"closed loop with think time: {clients} clients, each sending its next request of {ld.isl:,} + {ld.osl:,}"
           f" tokens {think_s:,.3f} s after its last finishes, first requests spread over that time; {n} requests,"
           " every one measured")  # fmt: skip
    return t, n * ld.osl / t.duration, Ran(s.peak_running, n, s.preemptions), how


def _fits_a_rank(rank_pool: int, dp: int, requests: Iterable[tuple[int, int, str] | Arrival]) -> None:
    """ValueError (one line) for a request longer than one DP rank's pool: a rank holds each request whole (the
    DP ranks' pools are admitted as one pool, kvplan.perf.engine, but no request spans two)."""
    if dp < 2:
        return  # the loop's own check names it
    for r in requests:
        isl, osl, where = (r.isl, r.osl, r.where) if isinstance(r, Arrival) else r
        if isl + osl > rank_pool:
            raise ValueError(f"{where}: a request of {isl:,} + {osl:,} tokens is larger than one DP rank's pool "
                             f"({rank_pool:,} tokens): the engine rejects it")  # fmt: skip


_SPECULATIVE_BAND = (
    f"; no row was fitted on speculative steps: each band at least × / ÷ {WORST_SPECULATIVE[0]} TTFT,"
    f" {WORST_SPECULATIVE[1]} TPOT, {WORST_SPECULATIVE[2]} tok/s (the largest miss measured with it: the"
    " sgl-cookbook's GLM-5 EAGLE on 8 × H200 SGLang at 100 clients, TPOT 36.5 ms measured, 15.4 ms priced)"
)


def _bench_itl(t: Timings, engine: str, spec: Acceptance | None) -> tuple[Timings, str]:
    """The ITL as the engine's own benchmark reports it, and how, with speculative decoding (a step streams several
    tokens at once). SGLang's bench_serving spreads each streamed chunk's gap over its tokens (``chunk_gap /
    num_new_tokens``, once a token): a step's gap ÷ the acceptance length. ``vllm bench serve`` appends one gap a
    chunk (``endpoint_request_func``: ``output.itl.append``): a step's gap."""
    if spec is None:
        return t, ""
    if engine != "sglang":
        return t, "; ITL one gap a step, as vllm bench serve takes one a streamed chunk"
    itl = replace(t, itl_median=t.itl_median * 1000 / spec.milli)
    return itl, (
        f"; ITL a step's gap ÷ {spec.milli / 1000:.2f}, as SGLang's bench_serving spreads a chunk's gap over its tokens"
        " (the steps' accepted counts vary about that mean: an estimate)"
    )


def _outside_line(c: Coefficients) -> str:
    """What each request waits outside the steps before its first token, fitted (Coefficients.request_us, client_us)."""
    cookbook_row = coefficients_for("blackwell", "sglang", "0.5.6", "mla")[0]  # the one that prices that deployment
    line = (
        f"before each first token, outside the steps: {c.request_us / 1e3:,.1f} ms fitted (request_us: HTTP, tokenizer;"
        " fitted under aiperf, AIConfigurator's harness: bench_serving straight at the server measured less, the"
        " sgl-cookbook's DeepSeek-R1 on B200 141 ms at one client where the B200 SGLang row's"
        f" {cookbook_row.request_us / 1e3:,.0f} ms alone is more)"
    )
    if c.client_us:
        line += (f" + {c.client_us / 1e3:,.2f} ms a request in flight (client_us: vLLM's API server detokenizes and"
                 " streams every request in one event loop)")  # fmt: skip
    return line


def decode_share(b: Batch) -> Batch | None:
    """What a PD decode instance runs of step ``b``: its decodes alone (the prefill was done on the prefill
    instance; the KV arrives by the hand-off), None for a step without decodes."""
    if not b.decode_requests:
        return None
    return replace(b, prefill_tokens=0, prefill_pairs=0, sampled=b.decode_requests * b.verify_tokens)


def _traced(ld: Load, trace: TraceLoad, price: Callable[[Batch], float]) -> tuple[Timings, float, Ran, str]:
    """The same for a trace: its requests at their times and lengths, every request measured."""
    n = len(trace.arrivals)
    s = trace_loop(engine=ld.engine, arrivals=trace.arrivals, cap=ld.cap, budget=ld.budget, pool=ld.pool,
                   price=price, spec=ld.spec)  # fmt: skip
    t = with_request_latency(trace_timings(s), ld.before_first(s.peak_running))
    how = (
        f"trace: {trace.source}; {n:,} requests at their arrival times with their own lengths, every request"
        " measured from its arrival; throughput over the whole run (first arrival to last token); every input token"
        " prefilled: prefix-cache hits between requests are not priced (`kvplan simulate` gives the trace's hit rate)"
    )
    return t, trace.osl_sum / t.duration, Ran(s.peak_running, n, s.preemptions), how


def _run(
    ld: Load,
    price: StepPrice,
    *,
    trace: TraceLoad | None,
    concurrency: int | None,
    think_s: float | None,
    rate: float | None,
) -> tuple[Timings, float, Ran, str]:
    """The load ``perf`` was given, replayed: a trace, thinking clients (a PD prefill side), a rate or a closed loop."""
    if trace is not None:
        return _traced(ld, trace, price)
    if think_s is not None and concurrency is not None:
        return _thinking(ld, concurrency, think_s, price)
    if rate is not None:
        return _open(ld, rate, price)
    if concurrency is not None:
        return _closed(ld, concurrency, price)
    raise ValueError("perf prices a load: give a concurrency or a rate")


def perf(
    arch: ModelArch,
    plan: PoolPlan,
    *,
    isl: int,
    osl: int,
    concurrency: int | None = None,
    acceptance_length: float | None = None,
    rate_per_s: float | None = None,
    trace: TraceLoad | None = None,
    phase: str | None = None,
    think_s: float | None = None,
    range_ratio: float = 1.0,
) -> PerfResult:
    """ValueError (one line) for a GPU without peaks, a model without a step model, or an acceptance length that
    does not apply (kvplan.perf.spec). With ``trace``, ``isl`` / ``osl`` are its means (the running cap shown).
    ``phase`` "decode": a PD decode instance, whose requests arrive prefilled (their KV handed off): the schedule is
    the same, its prefill tokens cost nothing (``decode_share``). ``think_s`` with ``concurrency``: the clients wait
    that long after a request's last token before the next (a PD prefill instance: ``_thinking``). ``range_ratio``:
    ``_priced_lengths``."""
    isl, osl, lengths = _priced_lengths(isl, osl, range_ratio, trace)
    dep = plan.deployment
    peaks = peaks_of(dep.gpu)
    if peaks is None:
        raise ValueError(f"perf has no datasheet peaks for {dep.gpu.name} (kvplan.perf.peaks: H100, H200, B200, B300)")
    if dep.pp > 1:  # the step model prices one tp group over every layer: stages in sequence are not modelled
        raise ValueError(f"perf does not model pipeline parallelism (pp {dep.pp}): price the deployment at pp 1")
    shape = step_shape(arch)
    dp = max(dep.dp_attention, 1)
    split = Split.of(tp=dep.tp, dp_attention=dp, ep=dep.ep)
    cap, cap_from = running_cap(plan, isl, osl)
    budget, budget_from = _budget(plan, dp)
    formats = GemmFormats.of(arch, shape.num_experts > 0)
    quant, moe = formats.dense, formats.experts
    family = family_of(tuple(g.kind for g in shape.attention))
    coeffs, borrowed = coefficients_for(peaks.gpu_class, plan.engine, plan.engine_version, family,
                                        moe if shape.num_experts else quant)  # fmt: skip
    spec = acceptance(verify_tokens=dep.speculative_num_draft_tokens, has_mtp_layers=arch.num_mtp_layers > 0,
                      given=acceptance_length)  # fmt: skip
    kv_bytes = 1 if plan.is_fp8 else 2

    tp_nodes = -(-dep.tp // max(dep.gpus_per_node, 1))  # the nodes one tp group spans
    price = _Pricer(shape, split, formats, kv_bytes, tp_nodes, peaks, coeffs, decode=phase == "decode")
    gpus = dep.tp
    pool = plan.usable_tokens * dp
    _fits_a_rank(plan.usable_tokens, dp, trace.arrivals if trace else ((isl, osl, "--isl + --osl"),))
    ld = Load(engine=plan.engine, isl=isl, osl=osl, cap=max(plan.max_running_requests, 1), budget=budget, spec=spec,
              pool=pool, request_s=coeffs.request_us / 1e6, client_s=coeffs.client_us / 1e6, ranks=dp,
              wave_share=coeffs.wave_share if range_ratio == 1 else 0.0)  # fmt: skip
    t, out, ran, load_line = _run(ld, price, trace=trace, concurrency=concurrency, think_s=think_s, rate=rate_per_s)
    t, itl_line = _bench_itl(t, plan.engine, spec)
    mape, mape_of = coeffs.mape_for(moe=shape.num_experts > 0)
    rel = band_mape(mape, borrowed, speculative=spec is not None)
    sums = (trace.isl_sum, trace.osl_sum) if trace else (isl, osl)  # total tok/s: output × (Σ isl + Σ osl) / Σ osl
    us, tput = _figures(t, rel, spec, out=out / gpus, isl=sums[0], osl=sums[1])
    said = (
        load_line,
        *lengths,
        f"{formats.line()}; KV cache {'fp8' if kv_bytes == 1 else 'bf16'}",
        spec.line() + _SPECULATIVE_BAND + itl_line
        if spec
        else "no speculative decoding (speculative_num_draft_tokens 0)",
        "no expert-parallel all-to-all priced; one all-reduce pair a layer over NVLink"
        + (f", across {tp_nodes} nodes over the nodes' 8 × 400 Gb/s NICs at NCCL's latency" if tp_nodes > 1 else ""),
        _pool_line(plan.engine, pool, dp, ran.preemptions),
        _outside_line(coeffs),
    )
    return PerfResult(
        model=arch.name, engine=plan.engine, engine_version=plan.engine_version, gpu=dep.gpu.name, gpus=gpus,
        isl=isl, osl=osl, concurrency=concurrency or 0, num_prompts=ran.requests, running_cap=cap,
        running_cap_from=cap_from, peak_running=ran.peak, pool_tokens=pool, preemptions=ran.preemptions,
        budget_tokens=budget, budget_from=budget_from,
        quant=quant, expert_quant=moe if shape.num_experts else "", attention_quant=formats.apart, us=us,
        tokens_per_s_per_gpu=tput,
        coefficients=coeffs, borrowed=borrowed,
        peaks_source=peaks.source, assumptions=said, acceptance=spec, rate_per_s=rate_per_s,
        trace=trace.source if trace else None, heldout=mape, heldout_of=mape_of, range_ratio=range_ratio,
    )  # fmt: skip
