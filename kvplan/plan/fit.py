"""The smallest deployment that meets the requirements (`kvplan fit`; pure).

Candidates are enumerated over GPU type, engine, tp (powers of two and divisors of --max-gpus), DP attention and
dcp (MLA models; each divides tp, as the loader's layout rule says), kv cache dtype (bf16 and fp8 in the
engine's spelling) and MTP on/off (models with MTP layers). Each is planned with the engine's own model
(``plan_pool``); what the engine refuses (its validation errors, a startup failure such as weights that do not
fit) is pruned with the engine's message. The requirements are checked with gate's code
(:func:`kvplan.plan.gate.requirement_admissions`); a started candidate that misses them with the engine's default
memory knob is re-tried with the smallest memory knob that admits each requirement (admit's own search,
:func:`kvplan.plan.admit.memory_remedy`), the largest of those values, checked whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.load_checks import load_refusal
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import ENGINES, Deployment, Gpu, Requirements
from kvplan.models.deployment import check_model_for_deployment
from kvplan.plan.admit import memory_remedy
from kvplan.plan.band_verdict import low_end_plan
from kvplan.plan.fit_sla import SlaCheck, SlaSpec, check_sla
from kvplan.plan.fit_trace import check_trace
from kvplan.plan.gate import RequirementCheck, requirement_admissions

if TYPE_CHECKING:
    from kvplan.plan.fit_trace import TraceFit, TraceSpec

MEMORY_KNOB = {"sglang": "mem_fraction_static", "vllm": "gpu_memory_utilization"}
KV_DTYPES = {"sglang": ("bf16", "fp8_e4m3"), "vllm": ("bf16", "fp8")}
"""The kv cache dtypes searched, as each engine spells them (``--kv-cache-dtype``)."""


# What the search leaves out, and how it is kept fast:
#
# Not searched, and why: ``ep`` (with ep <= tp the routed experts are split max(tp, ep) = tp ways either way:
# the same plan, kvplan.models.arch.Split), except where the engine refuses to build the experts' slices at ep 1
# (kvplan.engines.load_checks: an fp8 block split, SGLang's width per MoE-TP rank): that candidate is pruned with
# the engine's message and the same layout with ep = tp (whole experts) is searched after it; ``pp`` (1), page
# size (the engine's default; DSA forces 64).
#
# With --trace (:mod:`kvplan.plan.fit_trace`) a candidate that meets the requirements must also
# hold a real trace replayed through its own pools, per DP rank; per GPU count the candidates are replayed in rank
# order until ``TRACE_PASSES`` hold it (``_replay_group``). The memory knob is not re-searched for the trace.
#
# Speed: the model is loaded once by the caller; candidates are planned in order of GPUs used,
# and once a GPU count has an admitted candidate, only the next larger count is still planned (for the frontier
# table); larger ones cannot rank first and are counted as skipped, not planned. No plan is approximated.
@dataclass(frozen=True, kw_only=True)
class FitQuery:
    model_ref: str
    """The --model as given (written into --emit-deploy)."""
    gpus: tuple[Gpu, ...]
    engines: tuple[str, ...]
    requirements: Requirements
    max_gpus: int = 32
    gpus_per_node: int = 8
    mtp: tuple[bool, ...] = (False, True)
    draft_tokens: int = 4
    """speculative_num_draft_tokens of an MTP candidate."""
    exhaustive: bool = False
    """Plan every candidate up to max_gpus (no skipping past the first admitting GPU count)."""
    trace: TraceSpec | None = None
    """--trace: every candidate that meets the requirements must also hold this trace (kvplan.plan.fit_trace)."""
    sla: SlaSpec | None = None
    """--require-ttft / -tpot / -throughput: priced on every candidate meeting the memory ones (plan/fit_sla.py)."""

    def __post_init__(self) -> None:
        if self.requirements.min_ctx_tokens is None and not self.requirements.concurrency:
            raise InputError("nothing to fit: give --require-ctx and/or --require-concurrency N@CTX")
        if self.max_gpus < 1:
            raise InputError(f"--max-gpus must be positive, got {self.max_gpus}")


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One candidate: planned (``plan`` and ``checks``) or pruned (``pruned``: the engine's message)."""

    deployment: Deployment
    plan: PoolPlan | None = None
    checks: tuple[RequirementCheck, ...] = ()
    pruned: str | None = None
    memory: tuple[str, float, float] | None = None
    """(knob, value, the engine's default) when the default memory knob missed the requirements."""
    trace: TraceFit | None = None
    """--trace: the trace replayed through this candidate's pools (only once it meets the requirements)."""
    unreplayed: bool = False
    """--trace: met the requirements, ranked below the GPU count's frontier: not replayed (``TRACE_PASSES``)."""
    low_checks: tuple[RequirementCheck, ...] | None = None
    """The requirements checked on the plan at its band's low end (kvplan.plan.band_verdict); None when exact."""
    sla: SlaCheck | None = None

    @property
    def gpus(self) -> int:
        return self.deployment.tp * self.deployment.pp

    @property
    def ok(self) -> bool:
        return (
            self.pruned is None
            and not self.unreplayed
            and all(c.admission.admitted for c in self.checks)
            and (self.trace is None or self.trace.ok)
            and (self.sla is None or self.sla.ok)
        )

    @property
    def headroom_ppm(self) -> int:
        """The least relative headroom over the requirements' capacity checks that can bind (pool, running
        requests, SGLang's workspace; not the context length, a fixed limit, nor vLLM's workspace, which its
        profile run reserves at need: ``Check.can_bind``), in ppm of what the check has."""
        tight = self._tightest()
        return tight[0] if tight else 0

    @property
    def low_headroom_ppm(self) -> int:
        """``headroom_ppm`` at the band's low end: what the frontier ranks by (an estimate may be that far off)."""
        if self.low_checks is None:
            return self.headroom_ppm
        return replace(self, checks=self.low_checks, low_checks=None).headroom_ppm

    @property
    def ok_at_low_end(self) -> bool:
        return self.low_checks is None or all(c.admission.admitted for c in self.low_checks)

    @property
    def binding(self) -> tuple[str, RequirementCheck] | None:
        """What binds: the capacity check with the least headroom, and the requirement it was checked for."""
        tight = self._tightest()
        return (tight[1], self.checks[tight[2]]) if tight else None

    def _tightest(self) -> tuple[int, str, int] | None:
        out = [
            ((c.have - c.need) * 1_000_000 // max(c.have, 1), c.name, i)
            for i, r in enumerate(self.checks)
            for c in r.admission.checks
            if c.can_bind and c.name != "context length"
        ]
        return min(out) if out else None

    @property
    def first_concurrency(self) -> int:
        """Requests at once at the first N@ctx requirement (the tie-break after headroom), 0 without one."""
        return next((c.admission.max_concurrent for c in self.checks if c.concurrency), 0)

    @property
    def largest_ctx(self) -> int:
        return self.checks[0].admission.largest_ctx if self.checks else 0

    @property
    def closeness_ppm(self) -> int:
        """How much of the requirements it meets: the least of largest ctx / required ctx and, per N@ctx, the
        requests that fit at once / N (capped at 1,000,000 each)."""
        parts = []
        for c in self.checks:
            a = c.admission
            got, want = (
                (a.max_concurrent, a.request.concurrent) if c.concurrency else (a.largest_ctx, a.request.ctx_tokens)
            )
            parts.append(min(got * 1_000_000 // want, 1_000_000))
        t = self.trace
        if t is not None and not t.ok:  # met the flat requirements, not the trace: just below those that hold it
            got = t.hit_ppm if t.bound_tokens is None else t.bound_tokens * 1_000_000 // max(t.prompt_tokens, 1)
            hit = got * 999_999 // t.min_hit_ppm if t.min_hit_ppm else 999_999
            parts.append(min(hit, 999_999 if t.holds else 999_998))
        parts += [self.sla.closeness_ppm] if self.sla is not None else []
        return min(parts) if parts else 0

    @property
    def lacks(self) -> tuple[str, ...]:
        out = []
        for c in self.checks:
            a = c.admission
            if a.admitted:
                continue
            got = f"{a.max_concurrent} fit at once" if c.concurrency else f"largest {a.largest_ctx:,} tokens"
            out.append(f"{c.label}: rejected by {a.binding.name}; {got}")
        if self.trace is not None:
            out.extend(self.trace.lacks)
        return tuple(out) + (self.sla.lacks if self.sla is not None else ())


@dataclass(frozen=True, kw_only=True)
class Fit:
    query: FitQuery
    outcomes: tuple[Outcome, ...]
    """Every candidate planned or pruned, in enumeration order."""
    skipped: int
    """Candidates not planned: more GPUs than the frontier needs (module doc)."""
    unreplayed: int = 0
    """--trace: candidates meeting the requirements whose trace replay was skipped (``TRACE_PASSES``)."""

    @property
    def admitted(self) -> tuple[Outcome, ...]:
        """The frontier: admitted candidates ranked by GPUs, then (with an SLA) its order (SlaCheck.rank), then those
        admitted at the band's low end first, then headroom at the low end, then at the point (most first)."""
        ok = [o for o in self.outcomes if o.ok]
        return tuple(sorted(ok, key=lambda o: (o.gpus, o.sla.rank if o.sla else (False, 0), not o.ok_at_low_end,
                                               -o.low_headroom_ppm, -o.headroom_ppm,
                                               -o.first_concurrency)))  # fmt: skip

    @property
    def best(self) -> Outcome | None:
        return self.admitted[0] if self.admitted else None

    @property
    def planned(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.pruned is None)

    @property
    def pruned(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.pruned is not None)

    @property
    def closest(self) -> Outcome | None:
        """When nothing fits: the planned candidate meeting the largest share of the requirements (then fewer
        GPUs)."""
        planned = self.planned
        if not planned:
            return None
        return min(planned, key=lambda o: (-o.closeness_ppm, o.gpus, -o.headroom_ppm))


def tp_sizes(max_gpus: int) -> tuple[int, ...]:
    """Powers of two and divisors of max_gpus, up to max_gpus."""
    pow2 = {1 << i for i in range(max_gpus.bit_length()) if 1 << i <= max_gpus}
    return tuple(sorted(pow2 | {d for d in range(1, max_gpus + 1) if max_gpus % d == 0}))


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _context_length(arch: ModelArch, engine: str, req: Requirements) -> int | None:
    """vLLM starts only if its pool holds max_model_len: a candidate is asked to start with the longest required
    context (--max-model-len), as a vLLM deployment for these requirements would; SGLang keeps its default."""
    if engine != "vllm":
        return None
    longest = max([c for _, c in req.concurrency] + [req.min_ctx_tokens or 0])
    return longest if longest < arch.max_position_embeddings else None


def candidates(arch: ModelArch, q: FitQuery) -> Iterator[Deployment]:
    """Every deployment searched, in order of GPUs used (then GPU type, engine, layout)."""
    mtps = q.mtp if arch.num_mtp_layers > 0 else (False,)
    for tp in tp_sizes(q.max_gpus):
        nodes = -(-tp // q.gpus_per_node)
        for gpu in q.gpus:
            for engine in q.engines:
                ctx_len = _context_length(arch, engine, q.requirements)
                for dp in _divisors(tp) if arch.is_mla else (1,):
                    for dcp in _divisors(tp) if arch.is_mla else (1,):
                        for dtype in KV_DTYPES[engine]:
                            for mtp in mtps:
                                explicit = {"tp", "nodes", "gpus_per_node", "dp_attention", "dcp", "kv_cache_dtype"}
                                if ctx_len is not None:
                                    explicit.add("context_length")
                                if mtp:
                                    explicit.add("speculative_num_draft_tokens")
                                dep = Deployment(
                                    name=f"fit-{arch.name}",
                                    source="kvplan fit",
                                    model=q.model_ref,
                                    engine=engine,
                                    engine_version=ENGINES[engine][0],
                                    gpu=gpu,
                                    gpus_per_node=q.gpus_per_node,
                                    nodes=nodes,
                                    tp=tp,
                                    dp_attention=dp,
                                    dcp=dcp,
                                    kv_cache_dtype=dtype,
                                    context_length=ctx_len,
                                    speculative_num_draft_tokens=q.draft_tokens if mtp else 0,
                                    explicit=frozenset(explicit),
                                )
                                yield dep
                                if tp > 1 and (r := load_refusal(arch, dep)) is not None and r.experts:
                                    yield replace(dep, ep=tp, explicit=dep.explicit | {"ep"})


def evaluate(arch: ModelArch, dep: Deployment, req: Requirements) -> Outcome:
    """Plan one candidate, check the requirements; with the memory knob the requirements need if the default
    misses them (or the engine does not start with it, the weights loaded). The engine's refusals are the pruned
    reason."""
    try:
        check_model_for_deployment(arch, dep)
        plan = plan_pool(arch, dep)
    except InputError as e:
        return Outcome(deployment=dep, pruned=str(e))
    checks = requirement_admissions(plan, req)
    if plan.startup_error is None:
        out = Outcome(deployment=dep, plan=plan, checks=checks)
        if out.ok:
            return replace(out, low_checks=low_end_checks(arch, plan, req))
    else:
        out = Outcome(deployment=dep, plan=plan, pruned=f"the engine does not start: {plan.startup_error}")
        if not plan.loads_weights or load_refusal(arch, plan.deployment) is not None:
            return out  # the weights do not fit, or the engine cannot build the model: no memory knob helps
    # a pool too small to start (vLLM's max_model_len check, SGLang's empty budget) or to admit: admit's own
    # memory search, per failing requirement; the largest value, checked whole
    values = []
    for c in checks:
        if c.admission.admitted:
            continue
        mem = memory_remedy(plan, c.admission.request)
        if mem is None:
            return out  # no memory knob admits this one
        values.append(float(mem.value))  # type: ignore[arg-type]
    knob = MEMORY_KNOB[dep.engine]
    default = plan.knob(knob).as_float()
    tuned = replace(dep, **{knob: max(values)}, explicit=dep.explicit | {knob})  # type: ignore[arg-type]
    try:
        plan2 = plan_pool(arch, tuned)
    except InputError:
        return out
    checks2 = requirement_admissions(plan2, req)
    out2 = Outcome(deployment=tuned, plan=plan2, checks=checks2, memory=(knob, max(values), default))
    return replace(out2, low_checks=low_end_checks(arch, plan2, req)) if out2.ok else out


def low_end_checks(arch: ModelArch, plan: PoolPlan, req: Requirements) -> tuple[RequirementCheck, ...] | None:
    low = low_end_plan(plan, arch)  # the same deployment with other memory figures: a startup error, not a refusal
    return requirement_admissions(low, req) if low is not None else None


def fit(arch: ModelArch, q: FitQuery) -> Fit:
    """Search the candidates (module doc), stopping one GPU count past the first that admits."""
    outcomes: list[Outcome] = []
    skipped = unreplayed = 0
    first_ok: int | None = None
    stop_after: int | None = None
    group: list[Outcome] = []

    def close_group() -> None:
        nonlocal first_ok, stop_after, unreplayed
        if q.trace is not None:
            unreplayed += _replay_group(group, q, capped=first_ok is not None)
        outcomes.extend(group)
        if first_ok is None and any(o.ok for o in group):
            g = group[0].gpus
            first_ok = g
            larger = [t for t in tp_sizes(q.max_gpus) if t > g]
            stop_after = larger[0] if larger else g
        group.clear()

    for dep in candidates(arch, q):
        g = dep.tp * dep.pp
        if group and group[0].gpus != g:
            close_group()
        if first_ok is not None and not q.exhaustive and stop_after is not None and g > stop_after:
            skipped += 1
            continue
        o = evaluate(arch, dep, q.requirements)
        group.append(replace(o, sla=check_sla(arch, o.plan, q.sla)) if q.sla and o.ok and o.plan else o)
    if group:
        close_group()
    return Fit(query=q, outcomes=tuple(outcomes), skipped=skipped, unreplayed=unreplayed)


TRACE_PASSES = 3
"""--trace: replays per GPU count stop once this many candidates hold the trace (the frontier table's rows per
GPU count); those ranked below them are not replayed (``Fit.unreplayed``)."""


def _replay_group(group: list[Outcome], q: FitQuery, *, capped: bool = False) -> int:
    """Replay the trace through the candidates of one GPU count that meet the flat requirements, in rank order
    (headroom, then concurrency: ``Fit.admitted``'s order), until ``TRACE_PASSES`` hold it (all with
    --exhaustive); ``capped`` (a GPU count past the first that holds it, shown for the table only): at most
    ``TRACE_PASSES`` replays, whatever they find. Returns how many were left unreplayed; those stay in the group
    without a trace check, marked ``unreplayed`` (not ok)."""
    assert q.trace is not None
    flat_ok = sorted(
        (i for i, o in enumerate(group) if o.ok and o.plan is not None),
        key=lambda i: (-group[i].headroom_ppm, -group[i].first_concurrency),
    )
    passes = left = done = 0
    for i in flat_ok:
        o = group[i]
        if not q.exhaustive and (passes >= TRACE_PASSES or (capped and done >= TRACE_PASSES)):
            group[i] = replace(o, unreplayed=True)
            left += 1
            continue
        assert o.plan is not None
        group[i] = replace(o, trace=check_trace(o.plan, q.trace))
        passes += group[i].ok
        done += 1
    return left


def layout(dep: Deployment) -> str:
    """A candidate's layout in one cell: TP8 DPA2 DCP2 · fp8_e4m3 · MTP."""
    parts = [f"TP{dep.tp}"]
    if dep.ep > 1:
        parts.append(f"EP{dep.ep}")
    if dep.dp_attention > 1:
        parts.append(f"DPA{dep.dp_attention}")
    if dep.dcp > 1:
        parts.append(f"DCP{dep.dcp}")
    out = " ".join(parts) + f" · {dep.kv_cache_dtype}"
    if dep.mtp:
        out += f" · MTP {dep.speculative_num_draft_tokens}"
    return out
