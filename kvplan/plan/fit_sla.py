"""fit's latency and throughput requirements (``--require-ttft / --require-tpot / --require-throughput``; pure).

A candidate that meets the memory requirements is priced by ``kvplan perf`` under the SLA's load (closed loop of
``concurrency`` clients, ``isl`` + ``osl`` tokens a request: kvplan.perf.predict) and each requirement checked at
the statistic asked (median or p90 over the measured requests). Every figure has a band (perf's, from the held-out
error of the coefficients it used); as fit treats the memory band (kvplan.plan.band_verdict: ranked by the low end),
a requirement is

- met: even at the band's unfavourable end (TTFT / TPOT at their high end, throughput at its low end);
- met at the estimate only: the estimate meets it, the band's unfavourable end does not;
- met only inside the band: the estimate misses it, the favourable end meets it (not admitted: said so);
- missed: even the favourable end misses it.

Candidates are ranked by GPUs, then those met at the unfavourable end first, then the least margin to the SLA at the
estimate (most first). Throughput is the deployment's output tokens a second under that load (per GPU × GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.perf.predict import Band, PerfResult, perf, rank_budget, token_budget
from kvplan.plan.transfer import transfer

MET, AT_ESTIMATE, INSIDE_BAND, MISSED = "met", "met at the estimate only", "met only inside the band", "missed"


@dataclass(frozen=True, kw_only=True)
class SlaSpec:
    """The load and the requirements (None: not required); ``at`` is 'median' or 'p90'."""

    isl: int
    osl: int
    concurrency: int
    ttft_us: int | None = None
    tpot_us: int | None = None
    output_tokens_per_s: int | None = None
    at: str = "median"
    acceptance_length: float | None = None
    """--acceptance-length: applied to the candidates that draft (MTP on); the others have none to apply."""
    range_ratio: float = 1.0
    """--range-ratio: lengths uniform in [ratio × L, L], priced at their means (kvplan.perf.predict.perf)."""
    side: str = ""
    """--pd: 'prefill' (TTFT only: the clients' one-token requests, each client waiting ``think_s`` between them,
    plus the hand-off) or 'decode' (TPOT and throughput only: the closed loop with the prefill done elsewhere); ''
    for one instance."""
    think_s: float = 0.0
    """The prefill side's clients' wait between requests: the decode side's time of one (kvplan.plan.fit_pd_sla)."""
    link: str = "400Gbps"
    """The prefill side's hand-off link (fit --link)."""
    cache: dict[tuple[object, ...], PerfResult] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """perf results by what they depend on (candidates differing only in dcp or a pool that holds every client
    price alike: one closed loop each)."""

    @property
    def label(self) -> str:
        parts = [f"TTFT ≤ {self.ttft_us / 1000:,g} ms" if self.ttft_us else "",
                 f"TPOT ≤ {self.tpot_us / 1000:,g} ms" if self.tpot_us else "",
                 f"≥ {self.output_tokens_per_s:,} output tok/s" if self.output_tokens_per_s else ""]  # fmt: skip
        return (f"{', '.join(p for p in parts if p)} ({self.at}) at {self.concurrency:,} clients of "
                f"{self.isl:,} + {self.osl:,} tokens"
                + (f" (random lengths in [{self.range_ratio:g} × L, L])" if self.range_ratio < 1 else ""))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SlaTerm:
    name: str
    """'TTFT', 'TPOT' or 'throughput'."""
    required: int
    got: Band
    """µs for the latencies, output tokens a second for throughput."""
    unit: str

    @property
    def higher_is_better(self) -> bool:
        return self.name == "throughput"

    def _meets(self, v: int) -> bool:
        return v >= self.required if self.higher_is_better else v <= self.required

    @property
    def verdict(self) -> str:
        worst, best = (self.got.low, self.got.high) if self.higher_is_better else (self.got.high, self.got.low)
        if self._meets(worst):
            return MET
        if self._meets(self.got.value):
            return AT_ESTIMATE
        return INSIDE_BAND if self._meets(best) else MISSED

    @property
    def margin_ppm(self) -> int:
        """(required − estimate) / required for a latency, (estimate − required) / required for throughput."""
        d = self.got.value - self.required if self.higher_is_better else self.required - self.got.value
        return d * 1_000_000 // self.required


@dataclass(frozen=True, kw_only=True)
class SlaCheck:
    terms: tuple[SlaTerm, ...] = ()
    perf: PerfResult | None = None
    hand_off_us: Band | None = None
    """--pd, the prefill side: the hand-off's time added to its TTFT (kvplan.plan.fit_pd_sla.hand_off_band)."""
    error: str | None = None
    """perf could not price the candidate (a GPU without datasheet peaks, a model without a step model)."""

    @property
    def ok(self) -> bool:
        return self.error is None and all(t.verdict in (MET, AT_ESTIMATE) for t in self.terms)

    @property
    def ok_at_band_edge(self) -> bool:
        return self.ok and all(t.verdict == MET for t in self.terms)

    @property
    def margin_ppm(self) -> int:
        return min((t.margin_ppm for t in self.terms), default=0) if self.error is None else -1_000_000

    @property
    def rank(self) -> tuple[bool, int]:
        """fit's order after the GPU count: met at the band's unfavourable end first, then the larger margin."""
        return not self.ok_at_band_edge, -self.margin_ppm

    @property
    def closeness_ppm(self) -> int:
        """For fit's closest candidate: 1,000,000 less the largest shortfall (0 when not priced)."""
        return max(0, min(999_999, 1_000_000 + self.margin_ppm)) if not self.ok else 1_000_000

    @property
    def lacks(self) -> tuple[str, ...]:
        if self.error is not None:
            return (f"SLA not priced: {self.error}",)
        return tuple(f"{t.name} {_shown(t.got.value, t.unit)} against {_shown(t.required, t.unit)}: {t.verdict}"
                     for t in self.terms if t.verdict not in (MET, AT_ESTIMATE))  # fmt: skip


def _shown(v: int, unit: str) -> str:
    return f"{v / 1000:,.1f} ms" if unit == "us" else f"{v:,} tok/s"


def check_sla(arch: ModelArch, plan: PoolPlan, spec: SlaSpec) -> SlaCheck:
    """Price ``plan`` under the SLA's load (cached, module doc) and check each requirement."""
    dep = plan.deployment
    pool = plan.usable_tokens * max(dep.dp_attention, 1)  # the loop admits against it (kvplan.perf.engine)
    binds = pool if spec.concurrency * (spec.isl + spec.osl) > pool else 0  # a pool holding every client: no matter
    key = (spec.side, dep.gpu.key, plan.engine, plan.engine_version, dep.tp, dep.dp_attention, dep.ep, dep.pp,
           plan.is_fp8,
           dep.speculative_num_draft_tokens, min(plan.max_running_requests, spec.concurrency), binds,
           token_budget(plan)[1])  # fmt: skip
    r = spec.cache.get(key)
    if r is None:
        try:
            a = spec.acceptance_length if dep.speculative_num_draft_tokens >= 2 else None
            if spec.side == "prefill":  # its requests end at their first token; the clients then wait on the decode
                r = perf(arch, plan, isl=spec.isl, osl=1, concurrency=spec.concurrency, think_s=spec.think_s,
                         acceptance_length=a, range_ratio=spec.range_ratio)  # fmt: skip
            else:
                r = perf(arch, plan, isl=spec.isl, osl=spec.osl, concurrency=spec.concurrency, acceptance_length=a,
                         phase="decode" if spec.side == "decode" else None, range_ratio=spec.range_ratio)  # fmt: skip
        except ValueError as e:
            return SlaCheck(error=str(e))
        spec.cache[key] = r
    suffix = "_p90" if spec.at == "p90" else ""
    terms = []
    hand = hand_off_band(plan, spec.isl, spec.link, rank_budget(plan)) if spec.side == "prefill" else None
    if spec.ttft_us and spec.side != "decode":
        got = r.us["ttft" + suffix]
        if hand is not None:
            got = Band(got.value + hand.value, got.low + hand.low, got.high + hand.high)
        terms.append(SlaTerm(name="TTFT", required=spec.ttft_us, got=got, unit="us"))
    if spec.tpot_us and spec.side != "prefill":
        terms.append(SlaTerm(name="TPOT", required=spec.tpot_us, got=r.us["tpot" + suffix], unit="us"))
    if spec.output_tokens_per_s and spec.side != "prefill":
        per_gpu = r.tokens_per_s_per_gpu["output"]
        got = Band(per_gpu.value * r.gpus, per_gpu.low * r.gpus, per_gpu.high * r.gpus)
        terms.append(SlaTerm(name="throughput", required=spec.output_tokens_per_s, got=got, unit="tok/s"))
    return SlaCheck(terms=tuple(terms), perf=r, hand_off_us=hand)


def hand_off_band(plan: PoolPlan, isl: int, link: str, budget: int) -> Band:
    """µs the KV hand-off of one request of ``isl`` tokens adds to TTFT (kvplan.plan.transfer's pages at ``link``):
    the estimate, each rank sending its own rows over its own link at line rate once the prefill is done; high, every
    rank's rows over one link; low, for SGLang only the last chunk's share (``send_kv_chunk`` sends each chunk as it
    is prefilled), for vLLM the estimate (NixlConnector: the decode side reads the blocks once the request finished
    its prefill, ``request_finished`` → ``start_load_kv``)."""
    t = transfer(plan, isl, unit="page", link=link)
    per_rank = t.microseconds(t.bytes_per_rank)
    low = per_rank * min(budget, isl) // isl if plan.engine == "sglang" else per_rank
    return Band(per_rank, low, t.microseconds(t.total_bytes))
