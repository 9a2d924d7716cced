"""The doctor: is the pool an engine built the pool the config implies, and if not, why? (pure)

It reads the last complete server start of a log (``kvplan.runbook.parse``) and rebuilds the expected pool:

(a) from the config alone: ``plan_pool`` of the deployment. ``(a')`` is the same with the knobs the log reveals
    (tp, dcp, kv dtype and DSA backend, memory fraction, page size, context length, MTP, ...) applied with
    ``dataclasses.replace``; each knob that differs from the config is a finding with its own pool effect.
(b) from the memory figures the log reports, with (a')'s accounting. SGLang: pre-load free = ``Load weight
    begin avail mem`` and weights = pre-load free − ``Load weight end avail mem`` (= its ``mem usage``, the
    minimum over ranks, as SGLang takes it); vLLM: ``Available KV cache memory`` → num_blocks via bytes_per_block.

A gap between (a') and (b) is memory (the log's weights or free memory differ from the config's); a gap
between (b) and the logged pool is accounting: the doctor re-plans with each known cause (indexer on every
layer = SGLang 0.5.9 semantics or elision off; a dcp factor; bf16 / fp8_ds_mla / raw-fp8 rows; an MTP draft pool;
the memory fraction; vLLM's block size; one padding page or the null block) and reports the ones whose pool
falls within the log's rounding.

Tolerance: every memory figure a log prints is rounded (SGLang ``{:.2f}`` GiB, vLLM ``round(x, 2)`` GiB), so
it stands for ±half a unit of its last decimal (±0.005 GiB = ±5,368,709 B). (b) is planned at both ends of
that interval and "matches" means the logged count lies in the resulting range; a config figure matches a
logged one when it rounds to it. Counts (tokens, rows, blocks) are exact; vLLM's ``GPU KV cache size`` next to
a concurrency figure is ``int(num_blocks / blocks_per_request × max_model_len)`` and may lose one token to its
float arithmetic, so one token is allowed there.

Then the runbook checks: admission of ``--ctx`` with the log's pool, what a ``--hit`` cannot save of the indexer
work, and the per-step indexer K read that makes decode time linear in context.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_hybrid_log import blocks_for_logged_tokens
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import ENGINES, Deployment
from kvplan.plan.admit import Request, admit, with_pool_tokens
from kvplan.plan.prefix import prefix_hit
from kvplan.runbook.doctor.causes import (
    _allocated_for_rows,
    _combine,
    _decode,
    _hypotheses,
    _mem_fraction,
    _model_check,
    _one_page,
    _range_plans,
    _test,
    _version_hypotheses,
)
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
    Diagnosis,
    Headline,
    KvSize,
    LoggedPool,
    ModelCheck,
    PerRank,
    Revealed,
    StartupCheck,
)
from kvplan.runbook.doctor.startup import _implied_from, _mha_implied, _startup, mha_self_check
from kvplan.runbook.evidence import gather
from kvplan.runbook.memory_chain import gpu_hint, sglang_chain, taken_after_load
from kvplan.runbook.parse import At, ParsedLog, Run, largest
from kvplan.runbook.verdict import (
    MISMATCH_ADD,
    ROWS_ADD,
    closes_gap,
    deviation_percent,
    near_rows,
)
from kvplan.versions import vllm_rules

# --------------------------------------------------------------------------- the diagnosis


def diagnose(
    arch: ModelArch,
    dep: Deployment,
    log: ParsedLog,
    *,
    ctx: int | None = None,
    hit: int | None = None,
) -> Diagnosis:
    run = log.chosen
    notes: list[str] = []
    problems: list[str] = []
    if len(log.runs) > 1 or not run.complete:
        skipped = [r for r in log.runs if r.index > run.index]
        msg = f"{len(log.runs)} server start(s) in the log; using run {run.index} (lines {run.first_line}-"
        msg += f"{run.last_line}), the last complete one" if run.complete else f"{run.last_line}), which is incomplete"
        if skipped:
            msg += "; skipped " + ", ".join(f"run {r.index} (from line {r.first_line}, no pool lines)" for r in skipped)
        notes.append(msg)
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

    model = _model_check(arch, run)
    pool = _logged_pool(run, engine)
    if model.kind == "mha":
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

    config = plan_pool(arch, dep)
    revealed, dep1 = _reveal(arch, dep, config, run, pool, notes)
    revealed_plan = _plan(arch, dep1) or config
    if model.kind == "class_differs":
        problems.append("model")
    for r in revealed:
        if r.drift:
            problems.append(f"knob {r.knob}")

    memory = (
        _sglang_memory(arch, dep1, revealed_plan, run, notes)
        if engine == "sglang"
        else _vllm_memory(arch, dep1, revealed_plan, run)
    )
    if memory.matches is False:
        problems.append("memory")
    deps = memory.deps or (dep1, dep1, dep1)
    plans = _range_plans(arch, deps, None)
    log_plan = plans[0] if plans and memory.deps else None
    base = plans[0] if plans else revealed_plan

    comparison: Comparison | None = None
    causes: list[Cause] = []
    slack = 1 if pool is not None and engine == "vllm" and pool.max_model_len else 0
    if pool is not None and plans is not None:
        values = tuple(_measure(p, pool) for p in plans)
        within = _within(pool, values, slack)
        if not within and memory.deps is not None and (late := taken_after_load(base, pool.unit, pool.value, values)):
            within = True
            notes.append(late)
        comparison = Comparison(
            logged=pool,
            config=_measure(config, pool),
            revealed=_measure(revealed_plan, pool),
            expected=values[0],
            low=min(values),
            high=max(values),
            slack=slack,
            within=within,
            memory_from_log=memory.deps is not None,
            available_low=memory.available_low,
            available_high=memory.available_high,
        )
        if not within:
            problems.append("accounting" if memory.deps is not None else "pool")
            # a knob the log prints is known even where the config cannot plan it (left out above): never fitted
            shown = _sglang_knobs(run) if engine == "sglang" else _vllm_knobs(run)
            known = {**{k.knob: k.value for k in shown}, **{r.knob: r.value for r in revealed}}
            if run.version is not None:
                known["engine_version"] = run.version.value
            causes = _causes(arch, deps, base, pool, slack, known)
    elif not run.complete:
        problems.append("incomplete")

    # evidence first: the log's byte figures fix the row; a cause whose rows they contradict is never the cause
    base_bytes = _bytes_agree(base, run, memory, pool)
    byte_fact = base_bytes[1]
    causes = [_filtered(arch, c, base_bytes[0], run, memory, pool) for c in causes]
    if pool is not None and comparison is not None and not comparison.within:
        cap = _cap(base, pool, comparison, base_bytes[0], run)
        if cap is not None:
            causes.append(cap)
    causes.sort(key=lambda c: (not c.explains or bool(c.contradicted), c.fitted, "+" in c.key))

    best = base
    for c in causes:
        if c.explains and not c.contradicted and c.plan is not None:
            best = c.plan
            break

    per_rank = None
    if engine == "sglang" and run.kv and run.summary is not None:
        per_rank = PerRank(
            rows=run.kv[0].value.tokens,
            logical=run.summary.value.max_total_num_tokens,
            dcp=best.dcp,
            rows_line=run.kv[0].line,
            logical_line=run.summary.line,
        )
        if not per_rank.consistent:
            problems.append("per-rank vs logical")

    kv_size = None
    if engine == "sglang" and run.kv and run.kv[0].value.kv is not None:
        k = run.kv[0]
        assert k.value.kv is not None
        allocated = _allocated_for_rows(best.arch, best.deployment, k.value.tokens)
        if allocated is not None:
            kv_size = KvSize(logged=k.value.kv, rows=k.value.tokens, expected_bytes=allocated,
                             budget_bytes=best.available_bytes, line=k.line)  # fmt: skip

    # the chain: the config's memory term by term; its pool term for the log's own rows (the KV size's allocation)
    tables = kv_size.expected_bytes + int(best.extras.get("req_to_token_bytes", 0)) if kv_size is not None else None
    chain = sglang_chain(run, revealed_plan, tables) if engine == "sglang" else None
    startup = _startup(run, best, memory)
    if startup is not None:
        problems.append("startup")

    implied = None
    if comparison is not None and not comparison.within and not any(c.explains for c in causes):
        implied = _implied_from(run, best, comparison, engine)

    # ---- runbook checks 2-4
    pool_tokens = pool.pool_tokens if pool is not None else None
    if pool_tokens is None and run.override is not None:
        pool_tokens = run.override.value.blocks * best.page_tokens * best.dcp
    elif pool_tokens is None and pool is not None and pool.unit == "blocks":
        pool_tokens = pool.value * best.page_tokens * best.dcp
    if pool_tokens is None and pool is not None and pool.unit == "rows":
        pool_tokens = pool.value * best.dcp
    asked = ctx is not None
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
    if asked and admission is not None and not admission.admitted:
        problems.append("admission")
    prefix = None
    if hit is not None and best.arch.is_dsa:
        prefix = prefix_hit(best, ctx_q, hit)
    weights_log = largest(At(e.value.usage, e.line) for e in run.load_end if e.value.usage is not None)
    weights_log = weights_log or largest(run.model_loading)
    weights = weights_log.value.bytes if weights_log else best.knob("weights_per_gpu").as_int()
    decode_ctx = ctx if ctx is not None else min(best.context_len, pool_tokens or best.usable_tokens)
    decode = _decode(best, decode_ctx, weights, "the log" if weights_log else "the config")
    if run.errors and startup is None:
        problems.append("startup")
    headline = _headline(model, comparison, causes, byte_fact, startup, problems, memory, revealed, run.complete)
    if headline.kind in ("mismatch", "cannot_tell") and chain is not None and (hint := gpu_hint(chain)):
        headline = replace(headline, missing=(hint, *headline.missing))
    status = CANNOT_TELL if headline.kind == "cannot_tell" else MATCH if not problems else MISMATCH
    return Diagnosis(
        log=log,
        run=run,
        status=status,
        problems=tuple(dict.fromkeys(problems)),
        notes=tuple(notes),
        model=model,
        config=config,
        revealed=revealed,
        revealed_plan=revealed_plan,
        memory=memory.terms,
        memory_matches=memory.matches,
        log_plan=log_plan,
        comparison=comparison,
        causes=tuple(causes),
        per_rank=per_rank,
        kv_size=kv_size,
        startup=startup,
        implied=implied,
        log_budget=None,
        best=best,
        admission=admission,
        admission_asked=asked,
        prefix=prefix,
        decode=decode,
        byte_fact=byte_fact,
        headline=headline,
        evidence=gather(run),
        chain=chain,
    )


def _bytes_agree(
    p: PoolPlan, run: Run, memory: _LogMemory, pool: LoggedPool | None
) -> tuple[bool | None, ByteFact | None]:
    """Whether plan ``p``'s rows have the bytes the log's own figures give them (None: the log gives none)."""
    if p.engine == "sglang" and run.kv:
        k = run.kv[0]
        rows = k.value.tokens
        alloc = _allocated_for_rows(p.arch, p.deployment, rows) if rows else None
        if alloc is None:
            return None, None
        if k.value.kv is not None:
            g = k.value.kv
            fact = ByteFact(what=f"KV size {g.text} GiB for {rows:,} rows", line=k.line, low=g.low_bytes,
                            high=g.high_bytes, config=alloc, unit="B for the logged rows")  # fmt: skip
            return fact.agrees, fact
        if k.value.k is not None and k.value.v is not None:
            kk, vv = k.value.k, k.value.v
            fact = ByteFact(what=f"K size {kk.text} GiB + V size {vv.text} GiB for {rows:,} rows", line=k.line,
                            low=kk.low_bytes + vv.low_bytes, high=kk.high_bytes + vv.high_bytes, config=alloc,
                            unit="B for the logged rows")  # fmt: skip
            return fact.agrees, fact
        return None, None
    if p.engine == "vllm" and pool is not None and memory.available_low is not None and memory.available_high:
        bpb = p.extras.get("bytes_per_block", 0)
        if pool.unit == "blocks":
            blocks = most = pool.value
        elif pool.unit == "tokens" and not pool.max_model_len and p.pools and "kv_cache_groups" in p.extras:
            # a hybrid: 'GPU KV cache size' is not num_blocks × block; the engine's map inverted (a range of blocks)
            blocks, most = blocks_for_logged_tokens(
                pool.value, version=p.engine_version, groups=p.extras["kv_cache_groups"], block=p.page_tokens,
                blocks_per_request=p.extras["blocks_per_request"], max_model_len=p.context_len)  # fmt: skip
        elif pool.unit == "tokens" and not pool.max_model_len:
            blocks = most = pool.value // max(p.page_tokens * p.dcp, 1)
        else:
            return None, None
        if not bpb or blocks <= 0:
            return None, None
        span = f"{blocks:,}" if most == blocks else f"{blocks:,} – {most:,}"
        fact = ByteFact(what=f"KV budget over {span} blocks", line=pool.line,
                        low=memory.available_low // (most + 1) + 1, high=memory.available_high // blocks,
                        config=bpb, unit="B per block")  # fmt: skip
        return fact.agrees, fact
    return None, None


def _filtered(arch: ModelArch, c: Cause, base_agrees: bool | None, run: Run, memory: _LogMemory,
              pool: LoggedPool | None) -> Cause:  # fmt: skip
    """A cause the log's byte figures contradict is marked so (and never reported as the cause)."""
    if c.plan is not None and not c.fitted:
        agrees, fact = _bytes_agree(c.plan, run, memory, pool)
        if agrees is False and fact is not None:
            return replace(c, contradicted=f"{fact.what} (line {fact.line})", bytes_agree=False)
        return replace(c, bytes_agree=agrees)
    # a fitted knob that keeps the rows (a memory fraction, a page, a block) cannot explain rows of other bytes
    if base_agrees is False:
        return replace(c, contradicted="the log's byte figures: its rows are not the config's")
    return c


def _cap(base: PoolPlan, lp: LoggedPool, c: Comparison, agrees: bool | None, run: Run) -> Cause | None:
    """A round pool below what the memory allows, with rows of the right bytes: a token cap, not another model."""
    if agrees is False or lp.unit not in ("tokens", "rows", "blocks") or lp.value >= c.low:
        return None
    if lp.value % 1000 and lp.value % 1024:
        return None
    if base.engine == "sglang":
        name = (f"a --max-total-tokens cap: the pool is the round {lp.value:,}, below the {c.low:,} the memory "
                "allows")  # fmt: skip
        change = f"--set max_total_tokens={lp.value}"
    else:
        name = (f"a cap on the KV cache (--kv-cache-memory or --num-gpu-blocks-override): the pool is the round "
                f"{lp.value:,}, below the {c.low:,} the memory allows")  # fmt: skip
        change = ""
    args = run.args.value if run.args is not None else None
    if args is not None and args.integer("max_total_tokens") not in (None, lp.value):
        return None
    return Cause(key="cap", name=name, change=change, cell_bytes=base.cell.total_bytes,
                 expected_cell_bytes=base.cell.total_bytes, value=lp.value, low=lp.value, high=lp.value, explains=True,
                 plan=None, fitted=True)  # fmt: skip


def _headline(model: ModelCheck, c: Comparison | None, causes: list[Cause], fact: ByteFact | None,
              startup: StartupCheck | None, problems: list[str], memory: _LogMemory,
              revealed: tuple[Revealed, ...], complete: bool = True) -> Headline:  # fmt: skip
    """Evidence first: a refusal; then the byte facts (rows of other bytes: another model, or the cause that makes
    them); then the budget; only then fitted knobs. Never a cause the byte facts contradict."""
    if startup is not None:
        return Headline(kind="refused")
    if not complete:
        return Headline(kind="cannot_tell", missing=("the pool lines: the log stops before them",))
    explaining = [x for x in causes if x.explains and not x.contradicted]
    other_model = model.kind == "class_differs"
    if fact is not None and not fact.agrees:
        named = [x for x in explaining if not x.fitted]
        if named:
            return Headline(kind="cause", cause=named[0])
        rows = [x for x in causes if x.bytes_agree and "+" not in x.key]
        if rows:  # the rows are this cause's; the count needs the budget the log does not print
            missing = () if c is None or c.memory_from_log else (
                "the log's memory lines (SGLang: 'Load weight begin' and 'Load weight end') to check the count",
            )  # fmt: skip
            return Headline(kind="cause", cause=rows[0], missing=missing)
        if near_rows(fact.low, fact.high, fact.config) or (c is not None and c.within):
            return Headline(kind="mismatch", missing=(  # the config's rows with a padding: never another model
                f"--model with the server's exact config: the log's {fact.what} is "
                f"{deviation_percent(fact.low, fact.high, fact.config)} off the config's {fact.config:,} {fact.unit},"
                " the same rows with a padding or alignment kvplan does not model, not another model's",
            ))  # fmt: skip
        if other_model or model.kind == "unknown":
            return Headline(kind="model", missing=("--model: the config of the model the server ran",))
        return Headline(kind="mismatch", missing=(ROWS_ADD,))
    if other_model and fact is None:
        return Headline(kind="cannot_tell", missing=(
            f"--model for {model.log_class} (the log's model; the config plans {model.arch_class})",
            "--deploy for its deployment",
        ))  # fmt: skip
    if not problems or set(problems) == {"admission"}:
        return Headline(kind="match")  # an asked request the pool rejects is a runbook check, said after the match
    if set(problems) <= {"memory"} and c is not None and c.within and c.memory_from_log:
        return Headline(kind="memory")  # the rows and the log's budget give the log's pool: the config's memory differs
    if explaining:
        return Headline(kind="cause", cause=explaining[0])
    toward = [r for r in revealed if r.drift and _toward(r, c)]
    if toward:
        return Headline(kind="cause", knob=toward[0].knob)
    if c is not None and not c.within and not c.memory_from_log:
        return Headline(kind="cannot_tell", missing=(
            "the log's memory lines (SGLang: 'Load weight begin' and 'Load weight end'; vLLM: 'Available KV cache "
            "memory')",
        ))  # fmt: skip
    return Headline(kind="mismatch", missing=(MISMATCH_ADD,))


def _toward(r: Revealed, c: Comparison | None) -> bool:
    """Whether the log's value of a knob moves the config's pool towards the log's (a drift that explains at least
    the direction of the gap). A knob whose value takes the pool further away is no cause: a GPTQ Qwen3-30B-A3B
    log of 12,079 tokens with chunked_prefill_size 4096 (kvcache-ai/ktransformers#1928) moved GLM-5.3's planned
    567,616 to 686,464, and was read as that drift."""
    if c is None:
        return True
    # more than half the gap: max_model_len 1,000,000 moved a pool 3.8x off the log's by 0.36 %
    return closes_gap(r.config_pool, r.pool_after, c.logged.value)


def _causes(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool, slack: int,
            revealed: dict[str, object]) -> list[Cause]:  # fmt: skip
    hypotheses = _hypotheses(arch, deps[0], base, revealed) + _version_hypotheses(deps[0], base, revealed)
    tested = [c for h in hypotheses if (c := _test(arch, deps, base, lp, slack, h)) is not None]
    tested = [c for c in tested if c.value != _measure(base, lp) or c.explains]
    if base.engine == "sglang" and "mem_fraction_static" not in revealed:
        mf = _mem_fraction(arch, deps, base, lp)
        if mf is not None:
            tested.append(mf)
    page = _one_page(base, lp)
    if page is not None:
        tested.append(page)
    if not any(c.explains for c in tested):
        for i, a in enumerate(hypotheses):
            for b in hypotheses[i + 1 :]:
                if a.key == b.key or {a.key, b.key} == {"sglang_0_5_9", "indexer_all"}:
                    continue
                c = _test(arch, deps, base, lp, slack, _combine(a, b))
                if c is not None and c.explains:
                    tested.append(c)
    tested.sort(key=lambda c: (not c.explains, "+" in c.key, abs(c.value - lp.value)))
    return tested
