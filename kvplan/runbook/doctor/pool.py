"""The pool the log reports, and the memory figures around it, in bytes."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.runbook.doctor.plans import _plan, _with
from kvplan.runbook.doctor.results import LoggedPool, MemoryTerm
from kvplan.runbook.parse import At, Gib, Run, largest, smallest
from kvplan.units import cdiv

# --------------------------------------------------------------------------- the logged pool


def _logged_pool(run: Run, engine: str) -> LoggedPool | None:
    if engine == "sglang":
        if run.summary is not None:
            s = run.summary
            return LoggedPool(
                value=s.value.max_total_num_tokens,
                unit="tokens",
                source="max_total_num_tokens",
                line=s.line,
                pool_tokens=s.value.max_total_num_tokens,
            )
        if run.kv:
            k = run.kv[0]
            return LoggedPool(value=k.value.tokens, unit="rows", source="KV Cache is allocated #tokens",
                              line=k.line, pool_tokens=None)  # fmt: skip
        if run.total_tokens is not None:
            t = run.total_tokens
            return LoggedPool(value=t.value, unit="tokens", source="max_total_num_tokens (bench_latency)",
                              line=t.line, pool_tokens=t.value)  # fmt: skip
        return None
    if run.override is not None:
        o = run.override
        return LoggedPool(value=o.value.profiled_blocks, unit="blocks", source="Overriding num_gpu_blocks",
                          line=o.line, pool_tokens=None)  # fmt: skip
    if run.v0_blocks is not None:
        b = run.v0_blocks
        return LoggedPool(value=b.value.gpu_blocks, unit="blocks", source=f"# {b.value.device} blocks (vLLM V0)",
                          line=b.line, pool_tokens=None)  # fmt: skip
    if run.kv_cache_size is not None:
        size = run.kv_cache_size
        return LoggedPool(
            value=size.value.tokens,
            unit="tokens",
            source="GPU KV cache size",
            line=size.line,
            pool_tokens=size.value.tokens,
            max_model_len=size.value.max_model_len,
        )
    if run.max_len_error is not None:
        e = run.max_len_error
        return LoggedPool(
            value=e.value.needed.bytes,
            unit="needed",
            source="max seq len error: KV cache is needed",
            line=e.line,
            pool_tokens=None,
            needed=e.value.needed,
        )
    return None


def _measure(p: PoolPlan, lp: LoggedPool) -> int:
    """The plan's figure in the unit of the logged one."""
    if lp.unit == "rows":
        return p.rows
    if lp.unit == "needed":
        return p.extras.get("max_model_len_needed_bytes", 0)
    if p.engine == "vllm":
        n = p.extras.get("num_blocks", p.rows // max(p.page_tokens, 1))
        if lp.unit == "blocks":
            return n
        if p.pools:
            return p.logged_tokens  # a hybrid: the engine rules give 'GPU KV cache size' as that version prints it
        if lp.max_model_len:
            per_request = cdiv(cdiv(lp.max_model_len, p.dcp), p.page_tokens)
            return n * lp.max_model_len // per_request
        return n * p.page_tokens * p.dcp
    return p.logged_tokens


def _measure_plain(p: PoolPlan, lp: LoggedPool | None) -> int:
    return _measure(p, lp) if lp is not None and lp.unit != "needed" else p.logged_tokens


def _within(lp: LoggedPool, values: tuple[int, ...], slack: int) -> bool:
    if lp.unit == "needed":
        assert lp.needed is not None
        return any(lp.needed.covers(v) for v in values)
    return min(values) - slack <= lp.value <= max(values) + slack


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class _LogMemory:
    terms: tuple[MemoryTerm, ...]
    matches: bool | None
    deps: tuple[Deployment, Deployment, Deployment] | None
    """(mid, low, high) deployments carrying the log's memory; None when the log has no memory figures."""
    available_low: int | None = None
    available_high: int | None = None


def _sglang_memory(arch: ModelArch, dep: Deployment, p: PoolPlan, run: Run, notes: list[str]) -> _LogMemory:
    pre_at = smallest(run.load_begin)
    end_at = smallest(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail is not None)
    usage_at = largest(At(e.value.usage, e.line, e.rank) for e in run.load_end if e.value.usage is not None)
    cfg_pre = p.knob("pre_load_free").as_int()
    cfg_w = p.knob("weights_per_gpu").as_int()
    terms: list[MemoryTerm] = []

    def term(name: str, cfg: int, at: At[Gib] | None) -> None:
        terms.append(
            MemoryTerm(
                name=name,
                config_bytes=cfg,
                log=at.value if at else None,
                low_bytes=at.value.low_bytes if at else None,
                high_bytes=at.value.high_bytes if at else None,
                line=at.line if at else None,
                matches=at.value.covers(cfg) if at else None,
            )
        )

    term("pre-load free (Load weight begin avail mem)", cfg_pre, pre_at)
    term("weights per GPU (Load weight end mem usage)", cfg_w, usage_at)
    term("free after weights (Load weight end avail mem)", cfg_pre - cfg_w, end_at)
    if pre_at is None and end_at is None:
        terms.append(MemoryTerm(name="available for the KV pool", config_bytes=p.available_bytes, log=None,
                                low_bytes=None, high_bytes=None, line=None, matches=None))  # fmt: skip
        return _LogMemory(tuple(terms), None, None)
    if pre_at is None:
        notes.append("the log has no 'Load weight begin' line: pre-load free memory is the config's")
    pre_mid = pre_at.value.bytes if pre_at else cfg_pre
    pre_lo = pre_at.value.low_bytes if pre_at else cfg_pre
    pre_hi = pre_at.value.high_bytes if pre_at else cfg_pre
    if end_at is not None:
        free_mid, free_lo, free_hi = end_at.value.bytes, end_at.value.low_bytes, end_at.value.high_bytes
    elif usage_at is not None:
        u = usage_at.value
        free_mid, free_lo, free_hi = pre_mid - u.bytes, pre_lo - u.high_bytes, pre_hi - u.low_bytes
    else:
        notes.append("the log has no 'Load weight end' line: the weights are the config's")
        free_mid, free_lo, free_hi = pre_mid - cfg_w, pre_lo - cfg_w, pre_hi - cfg_w
    mid = _with(dep, {"pre_load_free": pre_mid, "weights_per_gpu": max(pre_mid - free_mid, 0)})
    # the smallest budget: the most pre-load free memory (largest slack) with the least left after the weights
    low = _with(dep, {"pre_load_free": pre_hi, "weights_per_gpu": max(pre_hi - free_lo, 0)})
    high = _with(dep, {"pre_load_free": pre_lo, "weights_per_gpu": max(pre_lo - free_hi, 0)})
    plans = [_plan(arch, d) for d in (mid, low, high)]
    if any(x is None for x in plans):
        return _LogMemory(tuple(terms), None, None)
    _, pl, ph = (x for x in plans if x is not None)
    terms.append(
        MemoryTerm(
            name="available for the KV pool (free after − pre-load × (1 − mem_fraction_static))",
            config_bytes=p.available_bytes,
            log=None,
            low_bytes=pl.available_bytes,
            high_bytes=ph.available_bytes,
            line=None,
            matches=pl.available_bytes <= p.available_bytes <= ph.available_bytes,
        )
    )
    return _LogMemory(tuple(terms), terms[-1].matches, (mid, low, high), pl.available_bytes, ph.available_bytes)


def _vllm_memory(arch: ModelArch, dep: Deployment, p: PoolPlan, run: Run) -> _LogMemory:
    avail_at = smallest(run.available_kv)
    if avail_at is None and run.v0_memory is not None and run.v0_memory.value.kv is not None:
        avail_at = At(run.v0_memory.value.kv, run.v0_memory.line, run.v0_memory.rank)  # V0: kv_cache_size / the rest
    loading_at = largest(run.model_loading)
    terms = [
        MemoryTerm(
            name="weights per GPU (Model loading took)",
            config_bytes=p.knob("weights_per_gpu").as_int(),
            log=loading_at.value if loading_at else None,
            low_bytes=loading_at.value.low_bytes if loading_at else None,
            high_bytes=loading_at.value.high_bytes if loading_at else None,
            line=loading_at.line if loading_at else None,
            matches=loading_at.value.covers(p.knob("weights_per_gpu").as_int()) if loading_at else None,
        )
    ]
    mid_b = lo_b = hi_b = 0
    if avail_at is not None:
        g = avail_at.value
        mid_b, lo_b, hi_b = g.bytes, g.low_bytes, g.high_bytes
        line: int | None = avail_at.line
    elif run.max_len_error is not None:
        # the refusal prints the memory left after the null block: add one block back
        g = run.max_len_error.value.available
        bpb = p.extras.get("bytes_per_block", 0)
        mid_b, lo_b, hi_b = g.bytes + bpb, g.low_bytes + bpb, g.high_bytes + bpb
        line = run.max_len_error.line
    else:
        terms.append(MemoryTerm(name="available KV cache memory", config_bytes=p.available_bytes, log=None,
                                low_bytes=None, high_bytes=None, line=None, matches=None))  # fmt: skip
        return _LogMemory(tuple(terms), None, None)
    terms.append(
        MemoryTerm(
            name="available KV cache memory" + ("" if avail_at else " (from the max seq len error + 1 block)"),
            config_bytes=p.available_bytes,
            log=g if avail_at else None,
            low_bytes=lo_b,
            high_bytes=hi_b,
            line=line,
            matches=lo_b <= p.available_bytes <= hi_b,
        )
    )
    # a budget the log prints means the server loaded its weights: where kvplan's estimate would not load (the
    # config's bf16 weights of a quantized checkpoint), the count is checked on the budget alone (with a fixed
    # budget the weights enter vLLM's plan only through that load check)
    loaded = {} if p.loads_weights or avail_at is None else {"weights_per_gpu": 0}
    deps = (
        _with(dep, {"kv_cache_memory": mid_b, **loaded}),
        _with(dep, {"kv_cache_memory": max(lo_b, 1), **loaded}),
        _with(dep, {"kv_cache_memory": max(hi_b, 1), **loaded}),
    )
    return _LogMemory(tuple(terms), terms[-1].matches, deps, lo_b, hi_b)
