"""The start-up check: whether the plan refuses the start the way the log did, and the pool it implies."""

from __future__ import annotations

from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm import max_len_fitting
from kvplan.runbook.doctor.causes import _implied
from kvplan.runbook.doctor.pool import _LogMemory
from kvplan.runbook.doctor.results import Comparison, Implied, StartupCheck
from kvplan.runbook.parse import At, Run, smallest
from kvplan.runbook.verdict import (
    refusal_figures_agree,
)


def _refuses_at(best: PoolPlan, max_model_len: int) -> bool:
    """Whether the plan refuses the start the way the log did: at the log's max seq len. A plan of another length
    refusing (GLM-5.3's 1,048,576 against a Qwen1.5-7B log refused at 32,768, QwenLM/Qwen3#16) predicts nothing."""
    if best.startup_error is None:
        return False
    refusal = best.startup_refusal  # the plan's max-seq-len refusal as figures; any other error refuses at any length
    return refusal is None or refusal.max_model_len == max_model_len


def _startup(run: Run, best: PoolPlan, memory: _LogMemory) -> StartupCheck | None:
    if run.max_len_error is not None:
        e = run.max_len_error
        bpb = best.extras.get("bytes_per_block", 0)
        lo = hi = None
        # a uniform model's blocks only: a hybrid's request takes blocks of several groups (max_len_fitting is the
        # uniform bisection; it put DeepSeek-V4-Flash's 13,528 at 1,490,432)
        if memory.available_low is not None and memory.available_high is not None and bpb and not best.pools:
            lo = max_len_fitting(memory.available_low - bpb, bpb, best.page_tokens, best.dcp)
            hi = max_len_fitting(memory.available_high - bpb, bpb, best.page_tokens, best.dcp)
        planned = best.extras.get("max_model_len_needed_bytes")
        return StartupCheck(
            message="vLLM refused to start: one request of max_model_len does not fit in the KV cache",
            line=e.line,
            max_model_len=e.value.max_model_len,
            needed=e.value.needed,
            available=e.value.available,
            estimated_max_len=e.value.estimated_max_len,
            predicted=_refuses_at(best, e.value.max_model_len)
            and refusal_figures_agree(e.value.needed, planned, e.value.estimated_max_len, lo, hi),
            planned_refuses=_refuses_at(best, e.value.max_model_len),
            planned_needed_bytes=planned,
            planned_estimate_low=lo,
            planned_estimate_high=hi,
        )
    if run.v0_max_len_error is not None:
        v0 = run.v0_max_len_error
        return StartupCheck(
            message=(
                f"vLLM V0 refused to start: max seq len {v0.value.max_model_len:,} tokens is more than the "
                f"{v0.value.kv_tokens:,} tokens the KV cache holds"
            ),
            line=v0.line,
            max_model_len=v0.value.max_model_len,
            needed=None,
            available=None,
            estimated_max_len=v0.value.kv_tokens,
            predicted=_refuses_at(best, v0.value.max_model_len),
            planned_needed_bytes=None,
            planned_estimate_low=None,
            planned_estimate_high=None,
        )
    if run.negative_profile is not None and not run.errors:
        n = run.negative_profile
        return StartupCheck(message=f"SGLang: {n.value} (the weights left no room for the KV cache)", line=n.line,
                            max_model_len=None, needed=None, available=None, estimated_max_len=None,
                            predicted=best.startup_error is not None, planned_needed_bytes=None,
                            planned_estimate_low=None, planned_estimate_high=None)  # fmt: skip
    if run.errors:
        err = run.errors[0]
        return StartupCheck(
            message=err.value,
            line=err.line,
            max_model_len=None,
            needed=None,
            available=None,
            estimated_max_len=None,
            predicted=best.startup_error is not None,
            planned_needed_bytes=None,
            planned_estimate_low=None,
            planned_estimate_high=None,
        )
    return None


def _implied_from(run: Run, best: PoolPlan, c: Comparison, engine: str) -> Implied | None:
    if c.available_low is None or c.available_high is None:
        return None
    lp = c.logged
    if engine == "sglang":
        rows = run.kv[0].value.tokens if run.kv else lp.value // max(best.dcp, 1)
        how = "available (from the log's memory) / #tokens"
    else:
        if lp.unit not in ("tokens", "blocks"):
            return None
        blocks = lp.value if lp.unit == "blocks" else lp.value // (best.page_tokens * best.dcp)
        rows = blocks * best.page_tokens
        how = "Available KV cache memory / (GPU KV cache size / dcp)"
    if rows <= 0:
        return None
    return _implied(c.available_low, c.available_high, rows, best.page_tokens, best.arch, best.dcp, how)


def _mha_implied(run: Run) -> Implied | None:
    """For a K/V (MHA/GQA) pool kvplan cannot plan: the bytes per token its own KV line implies."""
    k = run.kv[0].value
    if k.k is None or k.v is None or k.tokens <= 0:
        return None
    rows = k.tokens + 1  # SGLang allocates size + page_size rows; page 1 for these models
    low = (k.k.low_bytes + k.v.low_bytes) // rows
    high = (k.k.high_bytes + k.v.high_bytes) // rows
    return Implied(low=low, high=high, rows=k.tokens, how="(K size + V size) / (#tokens + 1 padding row)")


def mha_self_check(run: Run) -> tuple[int, int] | None:
    """The KV budget the log's own memory figures give (free after − pre-load × (1 − mfs)), as a byte range."""
    pre = smallest(run.load_begin)
    end = smallest(At(e.value.avail, e.line) for e in run.load_end if e.value.avail is not None)
    mfs = run.args.value.number("mem_fraction_static") if run.args is not None else None
    if pre is None or end is None or mfs is None:
        return None
    whole, _, frac = mfs.partition(".")
    den = 10 ** len(frac)
    num = int(whole) * den + int(frac or "0")
    slack_lo = pre.value.low_bytes * (den - num) // den
    slack_hi = pre.value.high_bytes * (den - num) // den
    return end.value.low_bytes - slack_hi, end.value.high_bytes - slack_lo
