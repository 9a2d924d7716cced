"""The first screen (issue 29 item 3): the verdict in tokens, the binding check, the engine's own summary lines
and the smallest fix, in the first 15 lines at 80 columns; the detail sections follow.

The summary lines are worded here in each engine's own format (kvplan.engines.log_summary holds the figures and
the source of every format): SGLang prints plain ints, vLLM V1 thousands separators and "%.2fx".
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.engines.log_summary import EngineSummary, SglangSummary, VllmSummary, engine_summary
from kvplan.plan.admit import Admission, Check, dp_ranks
from kvplan.render import Section, gib

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


def engine_section(p: PoolPlan) -> Section:
    """'SGLang 0.5.23 would log:' and the lines (none where the engine stops before them)."""
    s = engine_summary(p)
    if s is None:
        return Section(f"{p.semantics} would log:", (("nothing: it stops at start-up before its summary",),))
    return Section(f"{p.semantics} would log:", tuple((line,) for line in log_lines(s)))


def engine_data(p: PoolPlan) -> dict[str, Any]:
    """The same lines for JSON, with their figures as raw ints (``engine_log``)."""
    s = engine_summary(p)
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


def verdict(a: Admission, est: str) -> str:
    """The verdict in tokens: what the request needs against what the pool holds; pages come second."""
    r, b = a.request, a.binding
    if a.admitted:
        pool = f"the pool holds {a.usable_tokens:,} tokens"
        held = f"{a.max_concurrent:,} such fit at once" if a.plan.pools else pool
        return f"ADMITTED{est}: {r.concurrent} × {r.total_tokens:,}-token request(s) fit; {held}; tightest: {b.name}"
    if b.name == "engine starts":  # its whole message is the line above (render.startup_line): the first clause
        return f"REJECTED{est}: the engine does not start — {first_clause(b.detail)}"
    if b.name == "context length":
        return f"REJECTED{est}: {r.total_tokens:,} tokens needed, the context length is {b.have:,}"
    if b.name == "pool pages" or b.name.startswith("pool: "):
        return f"REJECTED{est}: {_needed(a)}, {_holds(a)}"
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
