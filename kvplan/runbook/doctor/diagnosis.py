"""The doctor: is the pool an engine built the pool the config implies, and if not, why? (pure)

It reads the last complete server start of a log (``kvplan.runbook.parse``) and rebuilds the expected pool:

(a) from the config alone: ``plan_pool`` of the deployment. ``(a')`` is the same with the knobs the log reveals
    (tp, dcp, kv dtype and DSA backend, memory fraction, page size, context length, MTP, ...) applied with
    ``dataclasses.replace``; each knob that differs from the config is a finding with its own pool effect.
(b) from the memory figures the log reports, with (a')'s accounting (SGLang's and vLLM's figures at
    ``diagnose``).

A gap between (a') and (b) is memory; a gap between (b) and the logged pool is accounting: the doctor re-plans
with each known cause and reports the ones whose pool falls within the log's rounding (the tolerance at
``_compare``). Then the runbook checks: admission of ``--ctx`` with the log's pool, what a ``--hit`` cannot save
of the indexer work, and the per-step indexer K read that makes decode time linear in context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import ENGINES, Deployment
from kvplan.plan.admit import Admission, Request, admit, with_pool_tokens
from kvplan.plan.prefix import PrefixHit, prefix_hit
from kvplan.runbook.doctor.band import config_alone_band
from kvplan.runbook.doctor.causes import (
    _allocated_for_rows,
    _decode,
    _model_check,
    _range_plans,
)
from kvplan.runbook.doctor.findings import _bytes_agree, _cap, _causes, _filtered, _headline
from kvplan.runbook.doctor.knobs import _reveal, _sglang_knobs, _vllm_knobs
from kvplan.runbook.doctor.plans import _plan, _with
from kvplan.runbook.doctor.pool import _logged_pool, _LogMemory, _measure, _sglang_memory, _vllm_memory, _within
from kvplan.runbook.doctor.results import (
    CANNOT_CHECK,
    CANNOT_TELL,
    MATCH,
    MISMATCH,
    ByteFact,
    Cause,
    Comparison,
    DecodeRead,
    Diagnosis,
    Headline,
    KvSize,
    LoggedPool,
    ModelCheck,
    PerRank,
    Revealed,
)
from kvplan.runbook.doctor.startup import _implied_from, _mha_implied, _startup, mha_self_check
from kvplan.runbook.evidence import gather
from kvplan.runbook.memory_chain import gpu_hint, sglang_chain, taken_after_load
from kvplan.runbook.parse import At, ParsedLog, Run, largest
from kvplan.versions import vllm_rules

# --------------------------------------------------------------------------- the diagnosis


# (b) SGLang: pre-load free = ``Load weight begin avail mem`` and weights = pre-load free - ``Load weight end avail
# mem`` (= its ``mem usage``, the minimum over ranks, as SGLang takes it); vLLM: ``Available KV cache memory`` ->
# num_blocks via bytes_per_block.
def diagnose(
    arch: ModelArch,
    dep: Deployment,
    log: ParsedLog,
    *,
    ctx: int | None = None,
    hit: int | None = None,
) -> Diagnosis:
    run = log.chosen
    notes = _run_notes(log)
    engine, dep = _engine_rules(run, dep, notes)
    model = _model_check(arch, run)
    pool = _logged_pool(run, engine)
    if model.kind == "mha":
        return _mha_diagnosis(log, notes, model)
    problems: list[str] = []
    config = plan_pool(arch, dep)
    revealed, dep1 = _reveal(arch, dep, config, run, pool, notes)
    revealed_plan = _plan(arch, dep1) or config
    if model.kind == "class_differs":
        problems.append("model")
    problems += [f"knob {r.knob}" for r in revealed if r.drift]
    memory = (
        _sglang_memory(arch, dep1, revealed_plan, run, notes)
        if engine == "sglang"
        else _vllm_memory(arch, dep1, revealed_plan, run)
    )
    if memory.matches is False:
        problems.append("memory")
    deps = memory.deps or (dep1, dep1, dep1)
    plans = _range_plans(arch, deps, None)
    base = plans[0] if plans else revealed_plan
    comparison: Comparison | None = None
    causes: list[Cause] = []
    if pool is not None and plans is not None:
        comparison, causes = _compare(_Planned(arch, deps, config, revealed_plan, base, plans), run, engine, pool,
                                      memory, revealed, notes, problems)  # fmt: skip
    elif not run.complete:
        problems.append("incomplete")
    causes, byte_fact = _ranked(arch, base, run, memory, pool, comparison, causes)
    comparison, causes = _band_or_cause(comparison, causes, problems)
    best = next((c.plan for c in causes if c.explains and not c.contradicted and c.plan is not None), base)
    per_rank = _per_rank(engine, run, best, problems)
    kv_size = _kv_size(engine, run, best)
    # the chain: the config's memory term by term; its pool term for the log's own rows (the KV size's allocation)
    tables = kv_size.expected_bytes + int(best.extras.get("req_to_token_bytes", 0)) if kv_size is not None else None
    chain = sglang_chain(run, revealed_plan, tables) if engine == "sglang" else None
    startup = _startup(run, best, memory)
    if startup is not None:
        problems.append("startup")
    unexplained = comparison is not None and not comparison.within and not comparison.in_band
    implied = None
    if comparison is not None and unexplained and not any(c.explains for c in causes):
        implied = _implied_from(run, best, comparison, engine)
    checks = _runbook_checks(run, best, pool, ctx, hit, problems)
    if run.errors and startup is None:
        problems.append("startup")
    headline = _headline(model, comparison, causes, byte_fact, startup, problems, memory, revealed, run.complete)
    if headline.kind in ("mismatch", "cannot_tell") and chain is not None and (hint := gpu_hint(chain)):
        headline = replace(headline, missing=(hint, *headline.missing))
    status = CANNOT_TELL if headline.kind == "cannot_tell" else MATCH if not problems else MISMATCH
    return Diagnosis(log=log, run=run, status=status, problems=tuple(dict.fromkeys(problems)), notes=tuple(notes),
                     model=model, config=config, revealed=revealed, revealed_plan=revealed_plan, memory=memory.terms,
                     memory_matches=memory.matches, log_plan=plans[0] if plans and memory.deps else None,
                     comparison=comparison, causes=tuple(causes), per_rank=per_rank, kv_size=kv_size,
                     startup=startup, implied=implied, log_budget=None, best=best, admission=checks.admission,
                     admission_asked=ctx is not None, prefix=checks.prefix, decode=checks.decode,
                     byte_fact=byte_fact, headline=headline, evidence=gather(run), chain=chain)  # fmt: skip


def _run_notes(log: ParsedLog) -> list[str]:
    """Which start of the log is diagnosed, where it holds several (or its last is incomplete)."""
    run = log.chosen
    if len(log.runs) <= 1 and run.complete:
        return []
    skipped = [r for r in log.runs if r.index > run.index]
    msg = f"{len(log.runs)} server start(s) in the log; using run {run.index} (lines {run.first_line}-"
    msg += f"{run.last_line}), the last complete one" if run.complete else f"{run.last_line}), which is incomplete"
    if skipped:
        msg += "; skipped " + ", ".join(f"run {r.index} (from line {r.first_line}, no pool lines)" for r in skipped)
    return [msg]


def _engine_rules(run: Run, dep: Deployment, notes: list[str]) -> tuple[str, Deployment]:
    """The log's engine, and the rules of the log's own version where kvplan models them."""
    engine = run.engine or dep.engine
    if engine != dep.engine:
        notes.append(
            f"the log is from {engine}; the deployment {dep.name} is {dep.engine}: planned with "
            f"{engine} {ENGINES[engine][0]} semantics"
        )
        dep = _with(dep, {"engine": engine, "engine_version": ENGINES[engine][0]})
    if run.version is not None and engine == "vllm" and run.version.value.lstrip("v") != dep.engine_version:
        logged = run.version.value.lstrip("v")
        try:  # the rules in force for the log's own version (kvplan/versions.py), where kvplan models it
            vllm_rules(logged)
        except InputError:
            notes.append(
                f"the log is from vLLM {run.version.value}; kvplan applies vLLM {dep.engine_version} semantics"
            )
        else:
            notes.append(f"the log is from vLLM {run.version.value}: planned with the rules in force then")
            dep = _with(dep, {"engine_version": logged})
    if engine == "sglang" and run.kv:
        if any(k.value.dtype is None and not k.value.mha for k in run.kv):
            notes.append("the KV line prints no 'dtype:': the format of SGLang 0.5.9 and earlier")
        if run.args is not None and run.args.value.has("nsa_decode_backend"):
            notes.append("ServerArgs has nsa_* fields: SGLang 0.5.9 or earlier (0.5.23 names them dsa_*)")
    return engine, dep


def _mha_diagnosis(log: ParsedLog, notes: list[str], model: ModelCheck) -> Diagnosis:
    """A K/V pool against an MLA config: another model's log, checked against itself only."""
    run = log.chosen
    return Diagnosis(
        log=log,
        run=run,
        status=CANNOT_CHECK,
        problems=("model",),
        notes=tuple(notes),
        model=model,
        implied=_mha_implied(run),
        log_budget=mha_self_check(run),
        headline=Headline(
            kind="cannot_tell",
            missing=(
                f"--model for {model.log_class or 'the log’s model'} (its pool is K/V rows; the config plans "
                f"{model.arch_class}, an MLA model)",
                "--deploy for its deployment",
            ),
        ),
        evidence=gather(run),
    )


@dataclass(frozen=True)
class _Planned:
    """The plans a logged pool is held against: the config's, with the knobs the log reveals, and the range the
    log's memory figures span (``plans``; ``base`` its first)."""

    arch: ModelArch
    deps: tuple[Deployment, ...]
    config: PoolPlan
    revealed: PoolPlan
    base: PoolPlan
    plans: tuple[PoolPlan, ...]


# Tolerance: every memory figure a log prints is rounded (SGLang ``{:.2f}`` GiB, vLLM ``round(x, 2)`` GiB), so
# it stands for +-half a unit of its last decimal (+-0.005 GiB = +-5,368,709 B). (b) is planned at both ends of
# that interval and "matches" means the logged count lies in the resulting range; a config figure matches a
# logged one when it rounds to it. Counts (tokens, rows, blocks) are exact; vLLM's ``GPU KV cache size`` next to
# a concurrency figure is ``int(num_blocks / blocks_per_request x max_model_len)`` and may lose one token to its
# float arithmetic, so one token is allowed there. The known causes re-planned (``_causes``): indexer on every
# layer = SGLang 0.5.9 semantics or elision off; a dcp factor; bf16 / fp8_ds_mla / raw-fp8 rows; an MTP draft
# pool; the memory fraction; vLLM's block size; one padding page or the null block.
def _compare(
    p: _Planned,
    run: Run,
    engine: str,
    pool: LoggedPool,
    memory: _LogMemory,
    revealed: tuple[Revealed, ...],
    notes: list[str],
    problems: list[str],
) -> tuple[Comparison, list[Cause]]:
    """The logged pool against the planned range, and the known causes re-planned where it falls outside."""
    slack = 1 if engine == "vllm" and pool.max_model_len else 0
    values = tuple(_measure(x, pool) for x in p.plans)
    within = _within(pool, values, slack)
    if not within and memory.deps is not None and (late := taken_after_load(p.base, pool.unit, pool.value, values)):
        within = True
        notes.append(late)
    comparison = Comparison(
        logged=pool,
        config=_measure(p.config, pool),
        revealed=_measure(p.revealed, pool),
        expected=values[0],
        low=min(values),
        high=max(values),
        slack=slack,
        within=within,
        memory_from_log=memory.deps is not None,
        available_low=memory.available_low,
        available_high=memory.available_high,
        band=_band(p.arch, p.base, pool) if not within and memory.deps is None else None,
    )
    if within:
        return comparison, []
    problems.append("accounting" if memory.deps is not None else "pool")
    # a knob the log prints is known even where the config cannot plan it (left out above): never fitted
    shown = _sglang_knobs(run) if engine == "sglang" else _vllm_knobs(run)
    known = {**{k.knob: k.value for k in shown}, **{r.knob: r.value for r in revealed}}
    if run.version is not None:
        known["engine_version"] = run.version.value
    return comparison, _causes(p.arch, p.deps, p.base, pool, slack, known)


def _ranked(
    arch: ModelArch,
    base: PoolPlan,
    run: Run,
    memory: _LogMemory,
    pool: LoggedPool | None,
    comparison: Comparison | None,
    causes: list[Cause],
) -> tuple[list[Cause], ByteFact | None]:
    """Evidence first: the log's byte figures fix the row; a cause whose rows they contradict is never the cause.
    The causes ranked (explaining and uncontradicted first, then measured before fitted, single before combined)."""
    agrees, byte_fact = _bytes_agree(base, run, memory, pool)
    causes = [_filtered(arch, c, agrees, run, memory, pool) for c in causes]
    if pool is not None and comparison is not None and not comparison.within:
        cap = _cap(base, pool, comparison, agrees, run)
        if cap is not None:
            causes.append(cap)
    causes.sort(key=lambda c: (not c.explains or bool(c.contradicted), c.fitted, "+" in c.key))
    return causes, byte_fact


def _per_rank(engine: str, run: Run, best: PoolPlan, problems: list[str]) -> PerRank | None:
    """SGLang's rows of one rank against its logical pool (× dcp)."""
    if engine != "sglang" or not run.kv or run.summary is None:
        return None
    per_rank = PerRank(
        rows=run.kv[0].value.tokens,
        logical=run.summary.value.max_total_num_tokens,
        dcp=best.dcp,
        rows_line=run.kv[0].line,
        logical_line=run.summary.line,
    )
    if not per_rank.consistent:
        problems.append("per-rank vs logical")
    return per_rank


def _kv_size(engine: str, run: Run, best: PoolPlan) -> KvSize | None:
    """SGLang's 'KV size' against the bytes the plan allocates for the log's own rows."""
    if engine != "sglang" or not run.kv or run.kv[0].value.kv is None:
        return None
    k = run.kv[0]
    assert k.value.kv is not None
    allocated = _allocated_for_rows(best.arch, best.deployment, k.value.tokens)
    if allocated is None:
        return None
    return KvSize(logged=k.value.kv, rows=k.value.tokens, expected_bytes=allocated,
                  budget_bytes=best.available_bytes, line=k.line)  # fmt: skip


@dataclass(frozen=True)
class _Checks:
    admission: Admission | None
    prefix: PrefixHit | None
    decode: DecodeRead | None


def _runbook_checks(
    run: Run, best: PoolPlan, pool: LoggedPool | None, ctx: int | None, hit: int | None, problems: list[str]
) -> _Checks:
    """Runbook checks 2-4: admission of --ctx with the log's pool, what a --hit saves, the decode read."""
    pool_tokens = pool.pool_tokens if pool is not None else None
    if pool_tokens is None and run.override is not None:
        pool_tokens = run.override.value.blocks * best.page_tokens * best.dcp
    elif pool_tokens is None and pool is not None and pool.unit == "blocks":
        pool_tokens = pool.value * best.page_tokens * best.dcp
    if pool_tokens is None and pool is not None and pool.unit == "rows":
        pool_tokens = pool.value * best.dcp
    ctx_q = ctx if ctx is not None else best.context_len
    admission = None
    try:
        if pool_tokens:
            source = f"the log's {pool.source if pool else 'pool'}: {pool_tokens:,} tokens"
            admission = admit(with_pool_tokens(best, pool_tokens), Request(ctx_tokens=ctx_q), pool_source=source)
        else:
            admission = admit(best, Request(ctx_tokens=ctx_q))
    except InputError:
        admission = None
    if ctx is not None and admission is not None and not admission.admitted:
        problems.append("admission")
    prefix = prefix_hit(best, ctx_q, hit) if hit is not None and best.arch.is_dsa else None
    weights_log = largest(At(e.value.usage, e.line) for e in run.load_end if e.value.usage is not None)
    weights_log = weights_log or largest(run.model_loading)
    weights = weights_log.value.bytes if weights_log else best.knob("weights_per_gpu").as_int()
    decode_ctx = ctx if ctx is not None else min(best.context_len, pool_tokens or best.usable_tokens)
    decode = _decode(best, decode_ctx, weights, "the log" if weights_log else "the config")
    return _Checks(admission, prefix, decode)


def _band(arch: ModelArch, base: PoolPlan, pool: LoggedPool) -> tuple[int, int, str] | None:
    """The config-alone plan's band in the log's unit (kvplan.runbook.doctor.band)."""
    b = config_alone_band(arch, base, pool)
    return (b.low, b.high, b.why) if b is not None else None


def _named(c: Cause) -> bool:
    """A cause the log's own figures make (not fitted to the gap) that explains it."""
    return c.explains and not c.contradicted and not c.fitted


def _band_or_cause(
    comparison: Comparison | None, causes: list[Cause], problems: list[str]
) -> tuple[Comparison | None, list[Cause]]:
    """Inside the band of a config-alone plan with no cause the log names: the expected error, no fitted cause;
    a named cause that explains the gap wins over the band."""
    if comparison is None or not comparison.in_band:
        return comparison, causes
    if any(_named(c) for c in causes):
        return replace(comparison, band=None), causes
    problems[:] = [p for p in problems if p != "pool"]
    return comparison, []
