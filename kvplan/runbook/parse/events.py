"""Records -> events: each line's pattern matched and its fact built, with the phase each kind belongs to."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.runbook.failures import SG_FAILED, SG_PROFILED, VL_FAILED, failure_message
from kvplan.runbook.long_context import read as read_long_context
from kvplan.runbook.parse.patterns import (
    _LOAD_AVAIL,
    _LOAD_DTYPE,
    _LOAD_QUANT,
    _LOAD_TYPE,
    _LOAD_USAGE,
    _SG_ARGS,
    _SG_BACKENDS,
    _SG_BASELINE,
    _SG_ERROR,
    _SG_KV,
    _SG_KV_DTYPE,
    _SG_LOAD_BEGIN,
    _SG_LOAD_END,
    _SG_MAMBA,
    _SG_NEGATIVE,
    _SG_PAGE,
    _SG_POOL_END,
    _SG_SUMMARY,
    _SG_SWA_POOL,
    _SG_SWA_SIZES,
    _SG_TOTAL,
    _V0_ROW_FIELD,
    _VL_ARCH,
    _VL_AVAILABLE,
    _VL_BANNER,
    _VL_BLOCK,
    _VL_CONCURRENCY,
    _VL_DCP,
    _VL_ENGINE,
    _VL_FORMAT,
    _VL_HYBRID_BLOCK,
    _VL_KV_SIZE,
    _VL_LOADING,
    _VL_MAMBA_PADDING,
    _VL_MAX_LEN,
    _VL_MAXLEN_ERROR,
    _VL_NO_MEMORY,
    _VL_NON_DEFAULT,
    _VL_OVERRIDE,
    _VL_V0_BLOCKS,
    _VL_V0_BUDGET,
    _VL_V0_DEVICE,
    _VL_V0_FIELD,
    _VL_V0_MAXLEN,
    _VL_V0_PROFILE,
    _VL_V0_ROW,
    _VL_V0_TERMS,
    _VL_VERSION,
)
from kvplan.runbook.parse.records import _dict_pairs, _Record, kv_pairs
from kvplan.runbook.parse.values import (
    Args,
    Concurrency,
    Gib,
    KvAlloc,
    KvCacheSize,
    LoadEnd,
    MambaAlloc,
    MaxLenError,
    Override,
    Summary,
    SwaPool,
    V0Blocks,
    V0MaxLenError,
    V0Memory,
)

CONFIG = "config"
LOAD = "load"
POOL = "pool"
_PHASE = {
    "args": CONFIG,
    "version": CONFIG,
    "engine_config": CONFIG,
    "cli_args": CONFIG,
    "baseline": LOAD,
    "load_begin": LOAD,
    "load_end": LOAD,
    "model_loading": LOAD,
    "kv": POOL,
    "pool_end": POOL,
    "summary": POOL,
    "available": POOL,
    "kv_size": POOL,
    "concurrency": POOL,
    "override": POOL,
    "dcp": POOL,
    "maxlen_error": POOL,
    "error": POOL,
    "kv_sizes": POOL,
    "v0_blocks": POOL,
    "v0_profile": POOL,
    "v0_budget": POOL,
    "v0_terms": POOL,
    "v0_maxlen_error": POOL,
    "negative_profile": POOL,
    "v0_row": POOL,
    "mamba": POOL,
    "total_tokens": POOL,
    "swa_sizes": POOL,
    "swa_pool": POOL,
    "hybrid_block": CONFIG,
    "mamba_padding": CONFIG,
    "long_context": CONFIG,
    "page": CONFIG,
    "dsa_dtype": CONFIG,
    "dsa_backends": CONFIG,
}
_RESTART_ON_REPEAT = {"args", "version", "engine_config", "cli_args", "load_begin", "load_end", "model_loading",
                      "summary", "available", "kv_size", "override", "pool_end", "v0_blocks", "v0_profile",
                      "v0_budget", "v0_terms"}  # fmt: skip
_SAME_AGAIN = {"kv_size", "available"}
"""vLLM's pool lines repeated with the same figure and no load line between: one start printed twice."""
_NEUTRAL = {"profiling_override"}
"""Kinds that never begin a new start (a line printed inside another phase)."""
_QUOTES = "'\"`‘“«"


@dataclass(frozen=True)
class _Event:
    kind: str
    engine: str
    pos: int
    line: int
    rank: str | None
    value: object


def _g(text: str) -> Gib:
    return Gib.parse(text)


def _tok(text: str) -> int:
    return int(text.replace(",", ""))


def _events(rec: _Record) -> list[_Event]:
    t = rec.text
    out: list[_Event] = []

    def add(kind: str, engine: str, m: re.Match[str], value: object) -> None:
        if m.start() > 0 and t[m.start() - 1] in _QUOTES:
            return  # a line quoted inside another one (a note, an issue title, a header): not an event
        out.append(_Event(kind, engine, m.start(), rec.line, rec.rank, value))

    sg, vl = "sglang", "vllm"
    for m in _SG_ARGS.finditer(t):
        add("args", sg, m, Args(kv_pairs(t, m.end())))
    for m in _SG_BASELINE.finditer(t):
        add("baseline", sg, m, _g(m.group(1)))
    for m in _SG_LOAD_BEGIN.finditer(t):
        add("load_begin", sg, m, _g(m.group(1)))
    for m in _SG_LOAD_END.finditer(t):
        body = m.group(1)
        avail = _LOAD_AVAIL.search(body)
        usage = _LOAD_USAGE.search(body)
        cls = _LOAD_TYPE.search(body)
        dtype = _LOAD_DTYPE.search(body)
        quant = _LOAD_QUANT.search(body)
        add(
            "load_end",
            sg,
            m,
            LoadEnd(
                avail=_g(avail.group(1)) if avail else None,
                usage=_g(usage.group(1)) if usage else None,
                model_class=cls.group(1) if cls else None,
                dtype=dtype.group(1) if dtype else None,
                quant=quant.group(1) if quant else None,
            ),
        )
    for m in _SG_KV.finditer(t):
        kv, k, v = m.group(3), m.group(4), m.group(5)
        alloc = KvAlloc(
            tokens=int(m.group("tokens") or 0),
            dtype=m.group("dtype"),
            kv=_g(kv) if kv else None,
            k=_g(k) if k else None,
            v=_g(v) if v else None,
        )
        add("kv" if m.group("tokens") else "kv_sizes", sg, m, alloc)
    for m in _SG_POOL_END.finditer(t):
        add("pool_end", sg, m, _g(m.group(1)))
    for m in _SG_SUMMARY.finditer(t):
        add(
            "summary",
            sg,
            m,
            Summary(
                max_total_num_tokens=int(m.group(1)),
                chunked_prefill_size=int(m.group(2)) if m.group(2) is not None else None,
                max_prefill_tokens=int(m.group(3)),
                max_running_requests=int(m.group(4)),
                context_len=int(m.group(5)),
                available_gpu_mem=_g(m.group(6)) if m.group(6) else None,
            ),
        )
    for m in _SG_PAGE.finditer(t):
        add("page", sg, m, int(m.group(1)))
    for m in _SG_KV_DTYPE.finditer(t):
        add("dsa_dtype", sg, m, m.group(1))
    for m in _SG_BACKENDS.finditer(t):
        add("dsa_backends", sg, m, (m.group(1), m.group(2)))
    for m in _SG_ERROR.finditer(t):
        add("error", sg, m, m.group(0))
    for m in SG_PROFILED.finditer(t):
        if int(m.group(2)) <= 0:  # no pool at all: the start fails right after (a pool outcome, not a cut log)
            add("negative_profile", sg, m, m.group(0))
    for m in SG_FAILED.finditer(t):
        add("error", sg, m, failure_message(sg, m.group(0)))
    for m in VL_FAILED.finditer(t):
        add("error", vl, m, failure_message(vl, m.group(0)))
    for m, kind, engine, value in read_long_context(t):
        add(kind, engine, m, value)
    for m in _SG_NEGATIVE.finditer(t):
        add("negative_profile", sg, m, m.group(0))
    for m in _SG_TOTAL.finditer(t):
        add("total_tokens", sg, m, int(m.group(1)))
    for m in _SG_MAMBA.finditer(t):
        add("mamba", sg, m, MambaAlloc(int(m.group(1)), _g(m.group(2)), _g(m.group(3))))
    for m in _SG_SWA_SIZES.finditer(t):
        add("swa_sizes", sg, m, SwaPool(int(m.group(1)), int(m.group(2))))
    for m in _SG_SWA_POOL.finditer(t):
        add("swa_pool", sg, m, SwaPool(int(m.group(3)), int(m.group(2)), _g(m.group(1))))

    for m in _VL_VERSION.finditer(t):
        add("version", vl, m, m.group(1))
    for m in _VL_BANNER.finditer(t):
        add("version", vl, m, m.group(1))
    for m in _VL_ENGINE.finditer(t):
        gen = m.group("gen") or "V0"  # "Initializing an LLM engine (v0.6.4.post1)": V0 before 0.9 named itself
        add("engine_config", vl, m, (m.group("v"), Args(kv_pairs(m.group("cfg"))), gen))
    m_nd = _VL_NON_DEFAULT.search(t)
    if m_nd is not None:
        close = t.rfind("}")
        if close >= m_nd.end():
            add("cli_args", vl, m_nd, Args(_dict_pairs(t[m_nd.end() - 1 : close + 1])))
    for m in _VL_BLOCK.finditer(t):
        add("block", vl, m, int(m.group(1)))
    for m in _VL_FORMAT.finditer(t):
        add("format", vl, m, m.group(1))
    for m in _VL_LOADING.finditer(t):
        add("model_loading", vl, m, _g(m.group(1)))
    for m in _VL_AVAILABLE.finditer(t):
        if m.group(1):
            add("error", vl, m, f"Available KV cache memory: -{m.group(2)} GiB (the weights and activations left none)")
        else:
            add("available", vl, m, _g(m.group(2)))
    for m in _VL_OVERRIDE.finditer(t):
        o = Override(int(m.group(1)), int(m.group(2)))
        add("profiling_override" if o.profiled_blocks == 0 else "override", vl, m, o)
    for m in _VL_DCP.finditer(t):
        add("dcp", vl, m, int(m.group(1)))
    for m in _VL_KV_SIZE.finditer(t):
        add(
            "kv_size",
            vl,
            m,
            KvCacheSize(
                tokens=_tok(m.group(1)),
                max_model_len=_tok(m.group(2)) if m.group(2) else None,
                concurrency=m.group(3),
            ),
        )
    for m in _VL_CONCURRENCY.finditer(t):
        add("concurrency", vl, m, Concurrency(_tok(m.group(1)), m.group(2)))
    for m in _VL_MAX_LEN.finditer(t):
        add("max_len", vl, m, int(m.group(1)))
    for m in _VL_ARCH.finditer(t):
        add("architecture", vl, m, m.group(1))
    for m in _VL_MAXLEN_ERROR.finditer(t):
        add(
            "maxlen_error",
            vl,
            m,
            MaxLenError(
                max_model_len=int(m.group(1)),
                needed=_g(m.group(2)),
                available=_g(m.group(3).lstrip("-")),
                estimated_max_len=_tok(m.group(4)) if m.group(4) else None,
            ),
        )
    for m in _VL_HYBRID_BLOCK.finditer(t):
        add("hybrid_block", vl, m, int(m.group(1)))
    for m in _VL_MAMBA_PADDING.finditer(t):
        add("mamba_padding", vl, m, m.group(1))
    for m in _VL_NO_MEMORY.finditer(t):
        add("error", vl, m, m.group(0))
    for m in _VL_V0_BLOCKS.finditer(t):
        word = _VL_V0_DEVICE.search(t, max(m.start() - 16, 0), m.start())
        add("v0_blocks", vl, m, V0Blocks(int(m.group(1)), int(m.group(2)), word.group(1) if word else "GPU"))
    for m in _VL_V0_PROFILE.finditer(t):
        add("v0_profile", vl, m, _v0_profile(t, m.end()))
    for m in _VL_V0_BUDGET.finditer(t):
        add("v0_budget", vl, m, V0Memory(total=_g(m.group(1)), utilization=m.group(2)))
    for m in _VL_V0_TERMS.finditer(t):
        kv_text = ("-" if m.group(4) else "") + m.group(5)
        add("v0_terms", vl, m, V0Memory(weights=_g(m.group(1)), non_torch=_g(m.group(2)), peak=_g(m.group(3)),
                                         kv=None if m.group(4) else _g(kv_text)))  # fmt: skip
        if m.group(4):
            add("error", vl, m, f"the rest of the memory reserved for KV Cache is {kv_text} GiB")
    for m in _VL_V0_ROW.finditer(t):
        key = _V0_ROW_FIELD[m.group(1)]
        g = _g(m.group(2))
        row = {
            "utilization": V0Memory(utilization=m.group(2)),
            "total": V0Memory(total=g),
            "weights": V0Memory(weights=g),
            "non_torch": V0Memory(non_torch=g),
            "peak": V0Memory(peak=g),
        }.get(key, V0Memory(kv=g))
        add("v0_row", vl, m, row)
    for m in _VL_V0_MAXLEN.finditer(t):
        add("v0_maxlen_error", vl, m, V0MaxLenError(int(m.group(1)), int(m.group(2))))
    out.sort(key=lambda e: e.pos)
    return out


def _v0_profile(t: str, start: int) -> V0Memory:
    """The ``key=value[GiB]`` fields after ``Memory profiling results: `` (up to 4 KiB of them)."""
    fields = {m.group(1): m.group(2) for m in _VL_V0_FIELD.finditer(t, start, min(len(t), start + 4096))}

    def gib(key: str) -> Gib | None:
        v = fields.get(key)
        return _g(v) if v is not None else None

    return V0Memory(
        total=gib("total_gpu_memory"),
        utilization=fields.get("gpu_memory_utilization"),
        peak=gib("peak_torch_memory"),
        non_torch=gib("non_torch_memory"),
        kv=gib("kv_cache_size"),
    )
