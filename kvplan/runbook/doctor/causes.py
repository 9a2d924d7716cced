"""Known causes of a pool gap, each tested against the logged pool; the model and other checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer
from kvplan.runbook.doctor.plans import _plan, _with
from kvplan.runbook.doctor.pool import _measure, _within
from kvplan.runbook.doctor.results import CLASS_ALIASES, Cause, DecodeRead, Implied, LoggedPool, ModelCheck
from kvplan.runbook.parse import Run
from kvplan.search import smallest_true
from kvplan.units import GiB, cdiv
from kvplan.versions import SGLANG as SGLANG_ROWS
from kvplan.versions import VLLM as VLLM_ROWS
from kvplan.versions import parse_version, rules_for, sglang_rules

# --------------------------------------------------------------------------- causes


@dataclass(frozen=True)
class _Hypothesis:
    key: str
    name: str
    change: str
    arch: ModelArch | None
    changes: tuple[tuple[str, Any], ...]


def _hypotheses(arch: ModelArch, dep: Deployment, p: PoolPlan, revealed: dict[str, object]) -> list[_Hypothesis]:
    out: list[_Hypothesis] = []
    n = arch.num_layers
    sglang = dep.engine == "sglang"
    as_0_5_9 = sglang and sglang_rules(dep.engine_version).indexer_all_layers  # any 0.5.9.x (versions.py)
    if sglang and arch.is_dsa and not as_0_5_9 and dep.dcp == 1:
        row = arch.kv_lora_rank + arch.qk_rope_head_dim
        out.append(
            _Hypothesis(
                "sglang_0_5_9",
                f"indexer on all {n} layers and {row} B × kv size per MLA layer (SGLang 0.5.9 semantics)",
                "--set engine_version=0.5.9",
                None,
                (("engine_version", "0.5.9"),),
            )
        )
    if arch.is_dsa and p.indexer_layers < n:
        all_full = replace(
            arch, indexer_full=(True,) * n, index_topk_freq=1, index_topk_pattern=None, index_skip_topk_offset=None
        )
        why = "shared-layer elision off (HiSparse, NPU PD/HiCache, external KV linker)" if sglang else "freq 1"
        out.append(
            _Hypothesis(
                "indexer_all",
                f"indexer on all {n} layers instead of {p.indexer_layers} ({why})",
                "model: every layer 'full'",
                all_full,
                (),
            )
        )
    if "dcp" not in revealed and not as_0_5_9:
        for d in range(1, dep.tp + 1):
            if dep.tp % d == 0 and d != dep.dcp:
                out.append(_Hypothesis("dcp", f"dcp {d} instead of {dep.dcp}", f"--set dcp={d}", None, (("dcp", d),)))
    if not arch.is_mla and "kv_cache_dtype" not in revealed:  # full attention: K/V in the other element size
        other = "auto" if p.is_fp8 else ("fp8_e4m3" if sglang else "fp8")
        out.append(
            _Hypothesis(
                "kv_dtype",
                f"{'bf16' if other == 'auto' else 'fp8'} K/V instead of {p.kv_format}",
                f"--set kv_cache_dtype={other}",
                None,
                (("kv_cache_dtype", other),),
            )
        )
    out += _layout_hypotheses(arch, p, revealed, sglang)
    out += _mtp_hypotheses(arch, dep, revealed)
    if not sglang and "page_size" not in revealed:
        for block in (16, 32, 64, 128):
            if block != p.page_tokens:
                out.append(_Hypothesis("block_size", f"block size {block} instead of {p.page_tokens}",
                                       f"--set page_size={block}", None, (("page_size", block),)))  # fmt: skip
    return out


def _layout_hypotheses(arch: ModelArch, p: PoolPlan, revealed: dict[str, object], sglang: bool) -> list[_Hypothesis]:
    """MLA rows in each other layout the engine has (bf16, fp8_ds_mla, raw fp8), within the dtype the log shows."""
    if "mla_layout" in revealed or p.mla_layout is None:
        return []
    out: list[_Hypothesis] = []
    current = p.mla_layout
    shown = str(revealed.get("kv_cache_dtype", "")).lower()
    family = "bf16" if shown in ("bfloat16", "bf16") else "fp8" if shown.startswith("fp8") else ""
    for layout in MlaLayout:
        if layout is p.mla_layout or (family and (layout is MlaLayout.BF16) != (family == "bf16")):
            continue
        size = layout.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)
        if sglang:
            dtype = "bfloat16" if layout is MlaLayout.BF16 else "fp8_e4m3"
        else:
            dtype = "auto" if layout is MlaLayout.BF16 else "fp8"
        out.append(
            _Hypothesis(
                "layout",
                f"{layout.value} rows ({size} B/layer) instead of {current.value} "
                f"({current.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)} B/layer)",
                f"--set kv_cache_dtype={dtype} --set mla_layout={layout.value}",
                None,
                (("kv_cache_dtype", dtype), ("mla_layout", layout.value)),
            )
        )
    return out


def _mtp_hypotheses(arch: ModelArch, dep: Deployment, revealed: dict[str, object]) -> list[_Hypothesis]:
    """An MTP draft pool the config has and the server did not, or the other way round."""
    if not arch.num_mtp_layers or "speculative_num_draft_tokens" in revealed:
        return []
    if dep.mtp:
        return [_Hypothesis("mtp", "no MTP draft pool", "--set speculative_num_draft_tokens=0", None,
                            (("speculative_num_draft_tokens", 0),))]  # fmt: skip
    return [
        _Hypothesis(
            "mtp",
            f"an MTP draft pool ({arch.num_mtp_layers} NextN layer) in every row",
            "--set speculative_num_draft_tokens=4",
            None,
            (("speculative_num_draft_tokens", 4),),
        )
    ]


def _version_hypotheses(dep: Deployment, p: PoolPlan, revealed: dict[str, object]) -> list[_Hypothesis]:
    """The engine's other version rows (kvplan/versions.py), when the log does not print its version:
    each row's own accounting (budget cell, what the 'KV size' holds, defaults) is a known cause."""
    if "engine_version" in revealed:
        return []
    rows = SGLANG_ROWS if dep.engine == "sglang" else VLLM_ROWS
    current = rules_for(dep.engine, dep.engine_version)
    out = []
    for row in rows:
        if not row.modelled or not row.reference[:1].isdigit() or row.label == current.label:
            continue
        if dep.engine == "sglang" and row.reference == "0.5.9" and p.arch.is_dsa:
            continue  # the indexer-on-all-layers hypothesis is this row
        engine = "SGLang" if dep.engine == "sglang" else "vLLM"
        out.append(_Hypothesis("version", f"the rules of {engine} {row.label} (the log prints no version)",
                               f"--set engine_version={row.reference}", None,
                               (("engine_version", row.reference),)))  # fmt: skip
    return out


def _range_plans(arch: ModelArch, deps: tuple[Deployment, ...], h: _Hypothesis | None) -> tuple[PoolPlan, ...] | None:
    a = h.arch if h is not None and h.arch is not None else arch
    changes = dict(h.changes) if h is not None else {}
    plans = []
    for d in deps:
        p = _plan(a, _with(d, changes))
        if p is None:
            return None
        plans.append(p)
    return tuple(plans)


def _combine(a: _Hypothesis, b: _Hypothesis) -> _Hypothesis:
    return _Hypothesis(
        f"{a.key}+{b.key}",
        f"{a.name}, and {b.name}",
        f"{a.change} {b.change}",
        a.arch or b.arch,
        a.changes + b.changes,
    )


def _test(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool, slack: int,
          h: _Hypothesis) -> Cause | None:  # fmt: skip
    plans = _range_plans(arch, deps, h)
    if plans is None:
        return None
    values = tuple(_measure(p, lp) for p in plans)
    return Cause(
        key=h.key,
        name=h.name,
        change=h.change,
        cell_bytes=plans[0].cell.total_bytes,
        expected_cell_bytes=base.cell.total_bytes,
        value=values[0],
        low=min(values),
        high=max(values),
        explains=_within(lp, values, slack),
        plan=plans[0],
    )


def _mem_fraction(arch: ModelArch, deps: tuple[Deployment, ...], base: PoolPlan, lp: LoggedPool) -> Cause | None:
    """SGLang: the memory fractions (in 0.001 steps) whose pool holds the logged count, when the log hides it."""
    if lp.unit not in ("tokens", "rows"):
        return None

    def measure(m: int, which: int) -> int | None:
        p = _plan(arch, _with(deps[which], {"mem_fraction_static": m / 1000}))
        return None if p is None or p.startup_error else _measure(p, lp)

    lo_m = smallest_true(300, 990, lambda m: (measure(m, 2) or 0) >= lp.value)  # the high-memory plan reaches it
    if lo_m is None:
        return None
    above = smallest_true(lo_m, 990, lambda m: (measure(m, 1) or 0) > lp.value)  # the low-memory plan passes it
    hi_m = 990 if above is None else above - 1
    if hi_m < lo_m:
        return None
    cur = base.knob("mem_fraction_static").as_float()
    plan = _plan(arch, _with(deps[0], {"mem_fraction_static": lo_m / 1000}))
    span = f"{lo_m / 1000:.3f}" if lo_m == hi_m else f"{lo_m / 1000:.3f}-{hi_m / 1000:.3f}"
    return Cause(
        key="mem_fraction",
        name=f"mem_fraction_static {span} instead of {cur}",
        change=f"--set mem_fraction_static={lo_m / 1000:.3f}",
        cell_bytes=base.cell.total_bytes,
        expected_cell_bytes=base.cell.total_bytes,
        value=lp.value,
        low=lp.value,
        high=lp.value,
        explains=True,
        fitted=True,
        plan=plan,
    )


def _one_page(base: PoolPlan, lp: LoggedPool) -> Cause | None:
    """The logged count is exactly one page (SGLang) or block (vLLM) away from the plan's."""
    if lp.unit not in ("tokens", "rows"):
        return None
    expected = _measure(base, lp)
    page = base.page_tokens if lp.unit == "rows" else base.logical_page_tokens
    if abs(lp.value - expected) != page:
        return None
    side = "more" if lp.value > expected else "fewer"
    name = (
        f"one block {side}: vLLM's null block (block 0 is counted in 'GPU KV cache size' but no request can use it)"
        if base.engine == "vllm"
        else f"one page {side}: SGLang's padding page (rows + {base.page_tokens} per layer are allocated; "
        "'#tokens' counts the rest)"
    )
    return Cause(key="page", name=name, change="", cell_bytes=base.cell.total_bytes,
                 expected_cell_bytes=base.cell.total_bytes, value=lp.value, low=lp.value, high=lp.value,
                 explains=True, plan=None)  # fmt: skip


# --------------------------------------------------------------------------- other checks


def _model_check(arch: ModelArch, run: Run) -> ModelCheck:
    if any(k.value.mha for k in run.kv) and arch.is_mla:  # a K/V pool in the log, an MLA model in the config
        kind = "mha"
    elif run.model_class is None:
        kind = "unknown"
    elif run.model_class != arch.architecture and run.model_class not in CLASS_ALIASES.get(arch.architecture, ()):
        kind = "class_differs"
    else:
        kind = "ok"
    return ModelCheck(kind=kind, log_class=run.model_class, arch_class=arch.architecture, model_path=run.model_path)


def _allocated_for_rows(arch: ModelArch, dep: Deployment, rows: int) -> int | None:
    """SGLang's pool tensors for exactly ``rows`` rows: the engine's own arithmetic, with a budget large enough
    and ``max_total_tokens`` pinning the row count."""
    big = _with(
        dep,
        {"pre_load_free": 64 * GiB + 4 * rows * 200_000, "weights_per_gpu": 1, "mem_fraction_static": 0.9,
         "max_total_tokens": rows},
    )  # fmt: skip
    p = _plan(arch, big)
    if p is None or p.rows != rows:
        return None
    return p.allocated_bytes - _index_outside_kv_size(p, rows)


KV_SIZE_WITH_INDEX = (0, 5, 4)
"""SGLang prints the index-K buffers in 'KV size' from sgl-project/sglang#11309 (0.5.4) on; before it the figure was
the MLA rows alone (the PR: 'KV size including index is actually 65.49 GB' where main printed 54.52 GB;
tests/data/logs/field/sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log)."""


def _index_outside_kv_size(p: PoolPlan, rows: int) -> int:
    """The index-K bytes of ``rows`` rows that the engine's 'KV size' leaves out (SGLang before 0.5.4)."""
    if p.engine != "sglang" or not p.indexer_layers or parse_version(p.engine_version) >= KV_SIZE_WITH_INDEX:
        return 0
    return (rows + p.page_tokens) * p.indexer_bytes_per_layer * p.indexer_layers


def _implied(lo_avail: int, hi_avail: int, rows: int, page: int, arch: ModelArch, dcp: int, how: str) -> Implied:
    """rows = available // cell // page × page, so available / (rows + page) < cell <= available / rows."""
    low = lo_avail // (rows + page) + 1
    high = hi_avail // rows
    shapes: list[str] = []
    att = arch.attention.heads(1)
    if att is not None:  # n layers × kv heads per rank × (head_dim + v_head_dim) × 2 or 1 B
        for per in range(1, att.num_kv_heads + 1):
            for b, dtype in ((2, "bf16"), (1, "fp8")):
                total = arch.num_layers * per * (att.head_dim + att.v_head_dim) * b
                if low <= total <= high:
                    shapes.append(
                        f"{arch.num_layers} layers × {per} kv heads × ({att.head_dim} + {att.v_head_dim}) × {b} B"
                        f" ({dtype})"
                    )
        return Implied(low=low, high=high, rows=rows, how=how, shapes=tuple(shapes[:6]))
    rank, rope = 512, 64
    for layout in MlaLayout:
        size = layout.bytes_per_token_layer(rank, rope)
        for n in range(1, 257):
            if low <= n * size <= high:
                shapes.append(f"{n} MLA layers × {size} B ({layout.value}, kv_lora_rank 512 + rope 64)")
        if arch.is_dsa:
            idx = indexer_bytes_per_token_layer(arch.index_head_dim or 128, arch.index_kpool) * dcp
            for k in sorted({arch.full_indexer_layers, arch.num_layers}):
                total = arch.num_layers * size + k * idx
                if low <= total <= high:
                    shapes.append(f"{arch.num_layers} × {size} B ({layout.value}) + {k} indexer layers × {idx} B")
    return Implied(low=low, high=high, rows=rows, how=how, shapes=tuple(shapes[:6]))


def _decode(best: PoolPlan, ctx: int, weights: int, source: str) -> DecodeRead | None:
    arch = best.arch
    if not arch.is_dsa:
        return None
    bw = best.deployment.gpu.hbm_bandwidth_bytes_per_s
    per_token = best.indexer_bytes_per_layer * best.indexer_layers
    indexer = ctx * per_token
    sparse = min(arch.index_topk, ctx) * best.mla_bytes_per_layer * best.main_layers // best.dcp
    return DecodeRead(
        ctx_tokens=ctx,
        indexer_bytes_per_token=per_token,
        indexer_read_bytes=indexer,
        sparse_read_bytes=sparse,
        weights_bytes=weights,
        hbm_bytes_per_s=bw,
        indexer_us=indexer * 1_000_000 // bw if bw else 0,
        weights_us=weights * 1_000_000 // bw if bw else 0,
        crossover_ctx=weights // per_token if per_token else 0,
        batch_equal=cdiv(weights, indexer) if indexer else 0,
        weights_source=source,
    )
