"""What the diagnosis concludes from its comparisons: whether the bytes agree, which causes survive, the
logged cap, the headline."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_hybrid_log import blocks_for_logged_tokens
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.runbook.doctor.causes import (
    _allocated_for_rows,
    _combine,
    _hypotheses,
    _mem_fraction,
    _one_page,
    _test,
    _version_hypotheses,
)
from kvplan.runbook.doctor.pool import _LogMemory, _measure
from kvplan.runbook.doctor.results import (
    ByteFact,
    Cause,
    Comparison,
    Headline,
    LoggedPool,
    ModelCheck,
    Revealed,
    StartupCheck,
)
from kvplan.runbook.parse import Run
from kvplan.runbook.verdict import (
    MISMATCH_ADD,
    ROWS_ADD,
    closes_gap,
    deviation_percent,
    near_rows,
)

# --------------------------------------------------------------------------- the diagnosis


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
    if c is not None and c.in_band and (not problems or set(problems) == {"admission"}):
        return Headline(kind="band")  # outside the point, inside the band of a config-alone plan: no cause fitted
    if not problems or set(problems) == {"admission"}:
        return Headline(kind="match")  # an asked request the pool rejects is a runbook check, said after the match
    if set(problems) <= {"memory"} and c is not None and c.within and c.memory_from_log:
        return Headline(kind="memory")  # the rows and the log's budget give the log's pool: the config's memory differs
    if explaining:
        return Headline(kind="cause", cause=explaining[0])
    toward = [r for r in revealed if r.drift and _toward(r, c)]
    if toward:
        return Headline(kind="cause", knob=toward[0].knob)
    if c is None:  # no pool read from the log: nothing to hold a knob or a mismatch against
        return Headline(kind="cannot_tell", missing=(
            "the pool line (SGLang: 'KV Cache is allocated'; vLLM: 'GPU KV cache size', V0: '# GPU blocks')",
        ))  # fmt: skip
    if not c.within and not c.memory_from_log:
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
    if c is None:  # no logged pool: a knob's drift explains no gap
        return False
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
