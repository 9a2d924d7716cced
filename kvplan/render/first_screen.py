"""The first screen: the verdict in tokens, the binding check, the engine's own summary lines
and the smallest fix, in the first 15 lines at 80 columns; the detail sections follow.

The summary lines are worded here in each engine's own format (kvplan.engines.log_summary holds the figures and
the source of every format): SGLang prints plain ints, vLLM V1 thousands separators and "%.2fx".
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kvplan.engines.band import pool_band
from kvplan.engines.common import PoolPlan
from kvplan.engines.log_summary import EngineSummary, SglangSummary, VllmSummary, engine_summary
from kvplan.plan.admit import LOGGED_POOL, Admission, Check, dp_ranks
from kvplan.render import Section, gib
from kvplan.render.band_text import gate_band, with_band

if TYPE_CHECKING:  # only fit, gate and doctor import these (kvplan admit stays light)
    from kvplan.plan.fit import Outcome
    from kvplan.plan.gate import GateResult, RequirementCheck
    from kvplan.runbook.doctor import Diagnosis
    from kvplan.runbook.parse import Run

UNPREDICTED = "?"
"""A field of a log line kvplan does not predict (SGLang's available_gpu_mem is measured after the pool)."""


def log_lines(s: EngineSummary) -> tuple[str, ...]:
    """The lines, character for character as the engine formats them (but for UNPREDICTED fields)."""
    if isinstance(s, SglangSummary):
        parts = [f"max_total_num_tokens={s.max_total_num_tokens}"]
        if s.chunked_prefill_size is not None:
            parts.append(f"chunked_prefill_size={s.chunked_prefill_size}")
        parts += [
            f"max_prefill_tokens={s.max_prefill_tokens}",
            f"max_running_requests={s.max_running_requests}",
            f"context_len={s.context_len}",
        ]
        if s.available_mem:
            parts.append(f"available_gpu_mem={UNPREDICTED} GB")
        return (", ".join(parts),)
    num, den = s.concurrency_num_den
    concurrency = num / den if den else 0.0
    if isinstance(s, VllmSummary):
        size = f"GPU KV cache size: {s.kv_cache_tokens:,} tokens"
        conc = f"Maximum concurrency for {s.max_model_len:,} tokens per request: {concurrency:.2f}x"
        return (f"{size}, {conc}",) if s.one_line else (size, conc)
    blocks = f"# {s.device} blocks: {s.gpu_blocks}, # CPU blocks: {s.cpu_blocks}"
    if not s.concurrency:
        return (blocks,)
    return blocks, f"Maximum concurrency for {s.max_model_len} tokens per request: {concurrency:.2f}x"


def _summary(p: PoolPlan) -> tuple[EngineSummary | None, str]:
    """The figures, or why there are none: a pool given by --pool-tokens is a log's, and so are its lines."""
    if LOGGED_POOL in p.extras:
        return None, "its lines are in the log whose pool --pool-tokens gave"
    return engine_summary(p), "nothing: it stops at start-up before its summary"


def engine_section(p: PoolPlan) -> Section:
    """'SGLang 0.5.23 would log:' and the lines (none where the engine stops before them)."""
    s, why = _summary(p)
    if s is None:
        return Section(f"{p.semantics} would log:", ((why,),))
    return Section(f"{p.semantics} would log:", tuple((line,) for line in log_lines(s)))


def engine_data(p: PoolPlan) -> dict[str, Any]:
    """The same lines for JSON, with their figures as raw ints (``engine_log``)."""
    s, _ = _summary(p)
    if s is None:
        return {"engine": p.engine, "engine_version": p.engine_version, "lines": [], "figures": None}
    return {"engine": p.engine, "engine_version": p.engine_version, "lines": list(log_lines(s)), "figures": asdict(s)}


def _needed(a: Admission) -> str:
    """'1,048,576 tokens needed', or '4 × 262,144 = 1,048,576 tokens needed on one DP rank'."""
    k, total = a.per_rank, a.request.total_tokens
    rank = " on one DP rank" if dp_ranks(a.plan) > 1 else ""
    return f"{k * total:,} tokens needed{rank}" if k == 1 else f"{k} × {total:,} = {k * total:,} tokens needed{rank}"


def _holds(a: Admission) -> str:
    """What the pool holds, in tokens (a hybrid's pools: how many such requests, and the longest one)."""
    if a.plan.pools:
        return f"the pools hold {a.max_concurrent:,} such request(s), one of at most {a.largest_ctx:,} tokens"
    return f"the pool holds {a.usable_tokens:,}"


def tokens_clause(a: Admission) -> str:
    """'1,048,576 tokens needed, the pool holds 567,616' (or the context length, where that is what binds)."""
    b = a.binding
    if not a.admitted and b.name == "context length":
        return f"a context length of {b.need:,} tokens needed, the deployment runs {b.have:,}"
    return f"{_needed(a)}, {_holds(a)}"


def requirement_rows(checks: tuple[RequirementCheck, ...]) -> tuple[tuple[str, str], ...]:
    """One row per requirement (fit, gate): ok or FAIL, in tokens."""
    rows = []
    for c in checks:
        a = c.admission
        state = "ok" if a.admitted else f"FAIL ({a.binding.name})"
        more = f"; {a.max_concurrent:,} fit at once" if c.concurrency else ""
        clause = tokens_clause(a)
        if a.pool_source == "planned":  # a planned pool says its band; a logged one is exact
            clause = with_band(clause, pool_band(a.plan), a.usable_tokens)
        rows.append((c.label, f"{state}: {clause}{more}"))
    return tuple(rows)


def verdict(a: Admission, est: str) -> str:
    """The verdict in tokens: what the request needs against what the pool holds; pages come second."""
    r, b = a.request, a.binding
    if a.admitted:
        pool = f"the pool holds {a.usable_tokens:,} tokens"
        held = f"{a.max_concurrent:,} such fit at once" if a.plan.pools else pool
        return f"ADMITTED{est}: {r.concurrent} × {r.total_tokens:,}-token request(s) fit; {held}; tightest: {b.name}"
    if b.name == "engine starts":  # its whole message is the line above (render.startup_line): the first clause
        return f"REJECTED{est}: the engine does not start — {first_clause(b.detail)}"
    if b.name in ("context length", "pool pages") or b.name.startswith("pool: "):
        return f"REJECTED{est}: {tokens_clause(a)}"
    if b.name == "running requests":
        return f"REJECTED{est}: {b.need:,} requests at once, {b.detail} is {b.have:,}"
    if b.unit == "bytes":
        return f"REJECTED{est} by {b.name}: needs {gib(b.need)}, has {gib(b.have)}"
    return f"REJECTED{est} by {b.name}: needs {b.need:,} {b.unit}, has {b.have:,}"


def first_clause(message: str) -> str:
    """An engine's message up to its first sentence end (vLLM's refusal runs to seven lines at 80 columns)."""
    head, dot, _ = message.partition(". ")
    return head + dot.strip() if dot else message


def check_text(c: Check) -> str:
    """'pool pages: needs 16,384 pages, has 8,869 (1 × 16,384 pages of 64 tokens)'."""
    if not c.unit:
        return f"{c.name}: {'ok' if c.ok else 'refused (the message above)'}"
    need, have = (gib(c.need), gib(c.have)) if c.unit == "bytes" else (f"{c.need:,} {c.unit}", f"{c.have:,}")
    return f"{c.name}: needs {need}, has {have} ({c.detail})"


def fix_text(a: Admission) -> str:
    """The smallest change that admits the request, re-planned; or why there is none."""
    if a.remedies:
        m = a.remedies[0]
        return f"{m.flags} (the pool then holds {m.pool_tokens:,} tokens)"
    if a.fewer_at_once is not None:
        return f"-n {a.fewer_at_once}: {a.fewer_at_once:,} of the {a.request.concurrent:,} fit at once"
    return "none found among the knobs kvplan re-plans"


def admit_screen(a: Admission) -> tuple[Section, ...]:
    """The admit first screen after the verdict: binding check and fix, then the engine's lines."""
    p = a.plan
    rows = [("binding check" if not a.admitted else "tightest check", check_text(a.binding))]
    if not a.admitted:
        rows.append(("smallest fix", fix_text(a)))
    return Section("", tuple(rows), ("", "")), engine_section(p)


def fit_screen(o: Outcome, binds: str, fix: str | None) -> tuple[Section, ...]:
    """The fit first screen after the verdict: the chosen (or closest) candidate's requirements in tokens, what
    binds, the fix when nothing fits, and the engine's lines for that candidate."""
    rows = [*requirement_rows(o.checks), ("binds", binds)]
    if fix:
        rows.append(("smallest fix", fix))
    return (Section("", tuple(rows), ("", "")), *((engine_section(o.plan),) if o.plan is not None else ()))


def _gate_fix(r: GateResult) -> str | None:
    """What to do about the first failed rule of a config (the gate's rules: kvplan.plan.gate.check)."""
    failed = next((x for x in r.rules if not x.ok), None)
    if failed is None:
        return None
    if failed.name == "engine starts":
        return "the engine refuses the config: see its message above"
    if failed.name.startswith("capacity drop"):
        return f"undo the change, or, if the drop is meant, kvplan lock {r.config}"
    c = next((c for c in r.checks if c.label == failed.name), None)
    ctx = f" --ctx {c.admission.request.ctx_tokens}" if c is not None else ""
    n = f" -n {c.admission.request.concurrent}" if c is not None and c.concurrency else ""
    return f"kvplan admit --deploy {r.config}{ctx}{n} re-plans the smallest changes that admit it"


def gate_screen(results: tuple[GateResult, ...]) -> tuple[Section, ...]:
    """The gate first screen after the verdict: the first failing config's first failed rule in tokens and its
    fix (a passing gate: the first config's pool and requirements), then the lines its engine would log now."""
    r = next((x for x in results if not x.ok), results[0] if results else None)
    if r is None:
        return ()
    failed = next((x for x in r.rules if not x.ok), None)
    if failed is None:
        pool = f"{r.after.pool_tokens:,} tokens" + (f" {gate_band(r)}" if gate_band(r) else "") + _was(r)
        rows = [(f"{r.config}: pool", pool), *requirement_rows(r.checks)]
    else:
        c = next((c for c in r.checks if c.label == failed.name), None)
        if c is not None:
            more = f"; {c.admission.max_concurrent:,} fit at once" if c.concurrency else ""
            text = f"{failed.name}: {tokens_clause(c.admission)}{more}"
        else:
            text = f"{failed.name}: {first_clause(failed.detail)}"
        rows = [("binding check", f"{r.config}: {text}"), ("smallest fix", _gate_fix(r) or "")]
    out = [Section("", tuple(rows), ("", ""))]
    if r.plan is not None:
        s = engine_section(r.plan)
        out.append(Section(f"{r.config}: {s.title}", s.rows, s.headers))
    return tuple(out)


def _was(r: GateResult) -> str:
    return f" (locked: {r.before.pool_tokens:,})" if r.before is not None else ""


def _logged_lines(run: Run) -> list[tuple[int, str]]:
    """The summary lines the log itself printed, re-worded from what was read in the engine's own format
    (SGLang's plain ints; vLLM V1's thousands separators; V0's unformatted max_model_len)."""
    out: list[tuple[int, str]] = []
    if run.summary is not None:
        s = run.summary.value
        parts = [f"max_total_num_tokens={s.max_total_num_tokens}"]
        if s.chunked_prefill_size is not None:
            parts.append(f"chunked_prefill_size={s.chunked_prefill_size}")
        parts += [
            f"max_prefill_tokens={s.max_prefill_tokens}",
            f"max_running_requests={s.max_running_requests}",
            f"context_len={s.context_len}",
        ]
        if s.available_gpu_mem is not None:
            parts.append(f"available_gpu_mem={s.available_gpu_mem.text} GB")
        out.append((run.summary.line, ", ".join(parts)))
    if run.v0_blocks is not None:
        b = run.v0_blocks.value
        out.append((run.v0_blocks.line, f"# {b.device} blocks: {b.gpu_blocks}, # CPU blocks: {b.cpu_blocks}"))
    if run.kv_cache_size is not None:
        k = run.kv_cache_size.value
        text = f"GPU KV cache size: {k.tokens:,} tokens"
        if k.max_model_len is not None and k.concurrency is not None:
            text += f", Maximum concurrency for {k.max_model_len:,} tokens per request: {k.concurrency}x"
        out.append((run.kv_cache_size.line, text))
    if run.concurrency is not None:
        c = run.concurrency.value
        length = f"{c.max_model_len}" if run.v0_blocks is not None else f"{c.max_model_len:,}"
        out.append((run.concurrency.line, f"Maximum concurrency for {length} tokens per request: {c.concurrency}x"))
    return out


def doctor_screen(d: Diagnosis) -> tuple[Section, ...]:
    """The doctor first screen after the headline: the pool, config against log, in tokens; the fix (the first
    cause that explains the log, re-planned); the log's own summary lines beside the ones the config implies."""
    rows: list[tuple[str, str]] = []
    c = d.comparison
    if c is not None and c.logged.unit == "tokens":
        rows.append(("pool", f"the config plans {c.config:,} tokens, the log has {c.logged.value:,}"))
    fix = _doctor_fix(d)
    if fix:
        rows.append(("the fix", fix))
    lines: list[tuple[str, ...]] = [(f"log line {n}: {text}",) for n, text in _logged_lines(d.run)]
    if d.config is not None:
        s = engine_summary(d.config)
        lines += [(f"plan: {text}",) for text in (log_lines(s) if s is not None else ("nothing (no start)",))]
    out = [Section("", tuple(rows), ("", ""))] if rows else []
    if lines:
        what = f"{d.config.semantics}: its summary lines" if d.config is not None else "The engine's summary lines"
        out.append(Section(f"{what}, the log's and the plan's", tuple(lines)))
    return tuple(out)


def doctor_data(d: Diagnosis) -> dict[str, Any]:
    """The same lines for JSON (``engine_log``): the log's with their line numbers, the config plan's."""
    return {
        "log": [{"line": n, "text": text} for n, text in _logged_lines(d.run)],
        "plan": engine_data(d.config) if d.config is not None else None,
    }


def _doctor_fix(d: Diagnosis) -> str | None:
    """The change that makes the config the server the log shows: the cause's, or the knob the log prints."""
    h, st = d.headline, d.startup
    if h.kind == "refused" and st is not None and st.estimated_max_len:
        # vLLM's own estimate in its refusal (_check_enough_kv_cache_memory): the longest max_model_len that fits
        return f"--set context_length={st.estimated_max_len} (vLLM's estimate in its refusal, line {st.line})"
    if h.cause is not None and h.cause.change:
        return f"{h.cause.change} (re-planned: it explains the log)"
    r = next((r for r in d.revealed if r.knob == h.knob and r.differs), None) if h.knob else None
    if r is None:
        return None
    return f"--set {r.knob}={r.value} (what the server ran, line {r.line})"
