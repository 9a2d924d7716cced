"""``kvplan perf``'s question: TTFT, TPOT, end-to-end latency and tokens per second per GPU of a deployment under a
closed-loop concurrency, from its own plan (pool, running cap, chunk budget), the step model and the coefficients.

Bands: each figure times and divided by 1 + 1.5 × the held-out MAPE of the coefficient row it used (TTFT's, TPOT's
or throughput's, from benchmarks/perf_calibrate.py), the MAPE doubled when the row was borrowed (a GPU class, engine
version or kernel family with no measured rows of its own).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch, Split
from kvplan.perf.coeffs import Coefficients, coefficients_for, family_of
from kvplan.perf.peaks import peaks_of
from kvplan.perf.sched import TURNAROUND_STEPS, Timings, closed_loop, timings
from kvplan.perf.shape import step_shape
from kvplan.perf.spec import Acceptance, acceptance
from kvplan.perf.step import parts, step_seconds

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
    us: dict[str, Band]
    """ttft, ttft_p90, tpot, tpot_p90, itl, e2e, e2e_p90: microseconds."""
    tokens_per_s_per_gpu: dict[str, Band]
    """output, total."""
    coefficients: Coefficients
    borrowed: str
    peaks_source: str
    assumptions: tuple[str, ...]
    acceptance: Acceptance | None = None
    """Speculative decoding's acceptance length, given or defaulted (kvplan.perf.spec); None without it."""


def _quant(arch: ModelArch, group: str) -> str:
    """The GEMM dtype a parameter group's checkpoint bytes imply (2 bytes bf16, 1 fp8, under 1 a 4-bit format)."""
    g = next((g for g in arch.param_groups if g.name == group), None)
    if g is None or not g.params:
        return "bf16"
    per = g.bytes_per_param_num / g.bytes_per_param_den
    return "bf16" if per >= 1.9 else "fp8" if per >= 0.9 else "fp4"


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(int(q * len(s)), len(s) - 1)]


def _band(v: float, rel: float, up: float = 1.0, down: float = 1.0) -> Band:
    """Multiplicative: a ratio error either way; ``up`` / ``down`` widen it further (the acceptance length's band)."""
    return Band(round(v), round(v / ((1 + rel) * down)), round(v * (1 + rel) * up))


def _figures(
    t: Timings,
    rel: tuple[float, float, float],
    spec: Acceptance | None,
    *,
    concurrency: int,
    isl: int,
    osl: int,
    gpus: int,
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
    out = concurrency * osl / (sum(e2e) / len(e2e)) / gpus  # Little's law: each client one request per e2e
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


def perf(
    arch: ModelArch, plan: PoolPlan, *, isl: int, osl: int, concurrency: int, acceptance_length: float | None = None
) -> PerfResult:
    """ValueError (one line) for a GPU without peaks, a model without a step model, or an acceptance length that
    does not apply (kvplan.perf.spec)."""
    dep = plan.deployment
    peaks = peaks_of(dep.gpu)
    if peaks is None:
        raise ValueError(f"perf has no datasheet peaks for {dep.gpu.name} (kvplan.perf.peaks: H100, H200, B200, B300)")
    shape = step_shape(arch)
    dp = max(dep.dp_attention, 1)
    split = Split.of(tp=dep.tp, dp_attention=dp, ep=dep.ep)
    cap, cap_from = running_cap(plan, isl, osl)
    knob, budget, budget_origin = token_budget(plan)
    quant, moe = _quant(arch, "attention"), _quant(arch, "routed_experts") if shape.num_experts else "bf16"
    family = family_of(tuple(g.kind for g in shape.attention))
    coeffs, borrowed = coefficients_for(peaks.gpu_class, plan.engine, plan.engine_version, family)
    spec = acceptance(verify_tokens=dep.speculative_num_draft_tokens, has_mtp_layers=arch.num_mtp_layers > 0,
                      given=acceptance_length)  # fmt: skip
    n = PROMPTS_PER_CLIENT * concurrency
    sched = closed_loop(engine=plan.engine, isl=isl, osl=osl, concurrency=concurrency, cap=cap, budget=budget,
                        num_prompts=n, warmup=concurrency, steady=True, spec=spec)  # fmt: skip
    kv_bytes = 1 if plan.is_fp8 else 2
    secs = [step_seconds(parts(shape, b, split, quant, moe, kv_bytes=kv_bytes), peaks, coeffs) for b in sched.steps]
    t = timings(sched, secs, osl)
    widen = 3.0 if borrowed else 1.5
    rel = (widen * coeffs.heldout_mape[0], widen * coeffs.heldout_mape[1], widen * coeffs.heldout_mape[2])
    gpus = dep.tp * max(dep.pp or 1, 1)
    us, tput = _figures(t, rel, spec, concurrency=concurrency, isl=isl, osl=osl, gpus=gpus)
    said = (
        f"closed loop: {concurrency} clients, each sending its next request of {isl:,} + {osl:,} tokens when its last"
        f" finishes (aiperf --concurrency, bench_serving --max-concurrency); steady state: {concurrency} warm-up"
        f" requests, {n - concurrency} measured, clients spread over a request's service, a busy engine seeing a"
        f" new request {TURNAROUND_STEPS[plan.engine]} step(s) late",
        f"GEMMs at {quant} (experts {moe}) from the checkpoint's bytes per parameter; KV cache "
        f"{'fp8' if kv_bytes == 1 else 'bf16'}",
        spec.line() if spec else "no speculative decoding (speculative_num_draft_tokens 0)",
        "no expert-parallel all-to-all priced; one all-reduce pair a layer over NVLink",
    )
    return PerfResult(
        model=arch.name, engine=plan.engine, engine_version=plan.engine_version, gpu=dep.gpu.name, gpus=gpus,
        isl=isl, osl=osl, concurrency=concurrency, num_prompts=n, running_cap=cap, running_cap_from=cap_from,
        peak_running=sched.peak_running, budget_tokens=budget, budget_from=f"{knob} {budget:,} ({budget_origin})",
        quant=quant, us=us, tokens_per_s_per_gpu=tput, coefficients=coeffs, borrowed=borrowed,
        peaks_source=peaks.source, assumptions=said, acceptance=spec,
    )  # fmt: skip
