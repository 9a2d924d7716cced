"""SGLang: deployment -> pool plan, as SGLang 0.5.23 computes it; other versions by the rules in force then
(kvplan/versions.py: every release from 0.4.0 to 0.5.23, the rows below 0.5.9 read from the release wheels).

Source facts: shared/reference/sglang-0.5.23.md §1-2, §5, §8-10 and docs/engines.md. In short, on one GPU:

    cell      = mla_row × layers + indexer_row × full_indexer_layers × dcp  (+ draft terms with MTP)
              = kv_heads_per_rank × (head_dim + v_head_dim) × dtype bytes × layers   (MHA / GQA: MHATokenToKVPool)
    available = int((free_after_weights − pre_load_free × (1 − mem_fraction_static)) × 2^30)   [GiB floats]
    rows S    = available // cell // page × page
    logged max_total_num_tokens = S × dcp
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import kvplan.engines.sglang_defaults as sglang_defaults
from kvplan import record
from kvplan.engines.common import (
    Cell,
    Knob,
    PoolPlan,
    Segment,
    Term,
    check_gpu_memory,
    given,
    memory_map,
    resolve,
    weights_knob,
)
from kvplan.engines.sglang_layout import kv_layout, page_knob
from kvplan.engines.sglang_requests import SPEC_MAX_RUNNING_REQUESTS, Requests, requests
from kvplan.engines.sglang_reserve import capacity_defaults, default_mem_fraction, prefill_graph_batch_sizes
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer
from kvplan.units import GiB, MiB
from kvplan.versions import rules_note, sglang_rules

if TYPE_CHECKING:
    from kvplan.engines.hybrid_steps import HybridSteps  # a type only: the chain loads no hybrid module

DEFAULT_RUNTIME_OVERHEAD = 1 * GiB
"""CUDA context + NCCL / custom all-reduce buffers taken before SGLang's memory baseline (assumed;
real logs show `Load weight begin. avail mem=` 1-2 GiB under the NVML total; `kvplan probe` measures it)."""


_capacity_defaults = capacity_defaults
"""The name tests and older callers import (kvplan.engines.sglang_reserve.capacity_defaults)."""
__all__ = ["DEFAULT_RUNTIME_OVERHEAD", "SPEC_MAX_RUNNING_REQUESTS", "plan_pools", "prefill_graph_batch_sizes"]


def plan_pools(arch: ModelArch, dep: Deployment, hybrid: HybridSteps | None) -> PoolPlan:
    """The memory chain and the token pool; ``hybrid`` (a hybrid model's full-attention layers as ``arch``) adds
    SGLang's hybrid steps: the Mamba state pool taken out of the budget first, the SWA pool sized beside the full
    pool, running requests capped by the state slots (kvplan.engines.sglang_hybrid, each step cited there).

    The steps follow the chain the plan prints: defaults (version, layout, page) -> cell -> budget -> rows -> what
    is allocated -> requests (context length, running requests) -> the chain's terms."""
    notes: list[str] = []
    dep = _version_checks(arch, dep, notes)
    dtype, backend, layout, knobs = kv_layout(arch, dep, dep.engine_version)
    attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
    _check_dcp(arch, dep)
    page_k = page_knob(arch, dep, backend)
    cell = _cell(arch, dep, layout, dtype, attn_tp, notes)
    budget = _budget(arch, dep, hybrid, attn_tp)
    page = page_k.as_int()
    rows = _rows(dep, hybrid, budget, cell, dtype, attn_tp, page)
    alloc = _allocated(arch, dep, hybrid, cell, rows, budget.state_slots, dtype, attn_tp, page)
    req = requests(arch, dep, hybrid, rows.rows, rows.logged, rows.startup_error, budget.state_slots, page, notes)
    if rows.capped:
        notes.append(f"--max-total-tokens {dep.max_total_tokens} caps the profiled pool")
    knobs += _knobs(dep, page_k, budget, req)
    return PoolPlan(
        engine="sglang",
        engine_version=dep.engine_version,
        arch=arch,
        deployment=dep,
        knobs=tuple(knobs),
        mla_layout=layout,
        mla_bytes_per_layer=cell.cell_row,
        main_layers=arch.num_layers,
        indexer_bytes_per_layer=cell.idx_row,
        indexer_layers=cell.indexer_layers,
        indexer_rule=cell.indexer_rule,
        draft_layers=cell.draft_layers,
        dcp=dep.dcp,
        cell=cell.cell,
        page_tokens=page,
        chain=_chain(arch, dep, budget, cell, rows, page),
        available_bytes=budget.available,
        rows=rows.rows,
        usable_pages=rows.rows // page,
        logged_tokens=rows.logged,
        context_len=req.context_len,
        max_running_requests=req.mrr,
        allocated_bytes=alloc.total,
        memory_map=_memory_map(dep, budget, alloc),
        startup_error=req.startup_error,
        loads_weights=budget.load_error is None,
        notes=tuple(notes),
        kv_dtype=dtype,
        attn_tp=attn_tp,
        extras=_extras(budget, alloc, req, rows, hybrid),
    )


def _knobs(dep: Deployment, page_k: Knob, b: _Budget, req: Requests) -> list[Knob]:
    """The knobs the chain resolved after the layout's, in the order the plan prints them."""
    return [
        page_k,
        b.chunk,
        Knob("cuda_graph_max_bs", b.max_bs, "set" if dep.cuda_graph_max_bs else "default: by GPU memory and tp"),
        b.mfs,
        b.overhead,
        b.pre_load_free,
        b.weights,
        req.context,
        req.running,
        given(dep, "dcp", dep.dcp, "1, no decode context parallelism"),
        given(dep, "speculative_num_draft_tokens", dep.speculative_num_draft_tokens, "0, no speculative decoding"),
    ]


# ---- defaults: the version's refusals, decode context parallel, the page


def _version_checks(arch: ModelArch, dep: Deployment, notes: list[str]) -> Deployment:
    """The version's DSA refusals and overrides (the deployment as the engine adjusts it); the rules' own note."""
    version = dep.engine_version
    rules = sglang_rules(version)
    if (said := rules_note("sglang", version)) is not None:
        notes.append(said)
    if arch.is_dsa and not rules.dsa:
        raise PlanError(
            f"SGLang {version} has no DSA (NSA) attention: DeepSeek-V3.2 needs 0.5.3 or later, GLM-5 (GlmMoeDsa) "
            "0.5.8.post1 or later"
        )
    if arch.is_dsa and rules.dsa_archs and arch.architecture not in rules.dsa_archs:
        raise PlanError(
            f"SGLang {version} serves DSA (NSA) only for {', '.join(rules.dsa_archs)} (is_deepseek_nsa of "
            f"{rules.label}) and has no {arch.architecture} model: its DSA pool came with the 0.5.8.post1 code line "
            "(the dated images tagged v0.5.8.post1 serve GLM-5) and 0.5.9"
        )
    if arch.is_dsa and rules.dsa_forces_dp_attention and dep.dp_attention != dep.tp:
        # server_args._handle_model_specific_adjustments: enable_dp_attention = True, dp_size = tp_size
        notes.append(
            f"SGLang {rules.label} turns on DP attention for NSA models: dp_attention {dep.dp_attention} -> {dep.tp}"
        )
        dep = replace(dep, dp_attention=dep.tp)
    return dep


def _check_dcp(arch: ModelArch, dep: Deployment) -> None:
    """SGLang's refusals of decode context parallel (it shards an MLA latent; DSA DCP needs kpool 1, top-k 1)."""
    dcp, version = dep.dcp, dep.engine_version
    rules = sglang_rules(version)
    if dcp > 1 and not arch.is_mla:
        raise PlanError(f"SGLang's decode context parallel shards an MLA latent: dcp {dcp} does not apply to "
                        f"a full-attention ({arch.kind_label}) model; use dcp 1")  # fmt: skip
    if not rules.dcp and dcp > 1:
        raise PlanError(f"SGLang {version} has no decode context parallel ({rules.label}): use dcp 1")
    if dcp > 1 and arch.is_dsa and arch.index_kpool > 1:
        raise PlanError(f"SGLang rejects --dcp-size {dcp} with index_kpool {arch.index_kpool} (DSA DCP needs 1)")
    if dcp > 1 and arch.is_dsa and dep.speculative_eagle_topk not in (None, 1):
        raise PlanError(
            f"SGLang rejects --dcp-size {dcp} with speculative_eagle_topk {dep.speculative_eagle_topk} "
            "(DSA DCP needs 1)"
        )


# ---- cell: bytes per pool row


@record
class _CellRows:
    """One pool row's bytes as SGLang budgets them, and the row figures the allocation uses."""

    cell: Cell
    mla_row: int
    """The row the pool allocates per layer (MLA layout or K + V)."""
    cell_row: int
    """The row the budget charges per layer (0.5.3-0.5.9: the raw MLA row whatever is allocated)."""
    idx_row: int
    indexer_layers: int
    indexer_rule: str
    draft_layers: int


def _cell(
    arch: ModelArch, dep: Deployment, layout: MlaLayout | None, dtype: str, attn_tp: int, notes: list[str]
) -> _CellRows:
    """``get_cell_size_per_token``: main rows × layers + indexer K × indexer layers × dcp (+ the draft's)."""
    rules = sglang_rules(dep.engine_version)
    dcp = dep.dcp if rules.dcp else 1
    mla_row = arch.attention.row_bytes(attn_tp, dtype, layout)
    if rules.cell_raw_mla_row and layout is not None:
        # 0.5.9 charged (kv_lora_rank + rope) × kv_size whatever the allocated row, and the indexer on all layers
        cell_row = (arch.kv_lora_rank + arch.qk_rope_head_dim) * (1 if dtype.startswith("fp8") else 2)
        if cell_row != mla_row:
            notes.append(
                f"SGLang 0.5.9 budgets {cell_row} B/layer while the pool allocates {mla_row} B/layer rows: "
                "the pool over-commits memory"
            )
        indexer_layers = arch.num_layers if arch.is_dsa and rules.indexer_all_layers else arch.full_indexer_layers
        rule = f"{rules.label}: indexer on every layer" if rules.indexer_all_layers else arch.indexer_rule.value
    else:
        cell_row, indexer_layers, rule = mla_row, arch.full_indexer_layers, arch.indexer_rule.value
    idx_row = indexer_bytes_per_token_layer(arch.index_head_dim, arch.index_kpool) if arch.is_dsa else 0
    main = cell_row * arch.num_layers
    if arch.is_dsa and not rules.dsa_indexer_in_budget:
        notes.append(
            f"SGLang {rules.label} leaves the indexer K ({idx_row} B × {indexer_layers} layers per token) out of the "
            "KV budget and allocates it on top: the pool over-commits memory (fixed by sgl-project/sglang#11309)"
        )
    draft_layers = arch.num_mtp_layers if dep.mtp else 0
    cell = Cell(
        main_bytes=main,
        indexer_bytes=idx_row * (indexer_layers if rules.dsa_indexer_in_budget else 0) * dcp,
        draft_main_bytes=main * draft_layers // arch.num_layers * dcp if draft_layers else 0,
        draft_indexer_bytes=idx_row * draft_layers * dcp if draft_layers else 0,
    )
    return _CellRows(cell, mla_row, cell_row, idx_row, indexer_layers, rule, draft_layers)


# ---- budget: memory before and after the weights, the memory fraction, what is left for the KV pool


@record
class _Budget:
    """The memory chain up to the KV budget (``_profile_available_bytes``) and the knobs it resolved."""

    overhead: Knob
    pre_load_free: Knob
    weights: Knob
    chunk: Knob
    max_bs: int
    mfs: Knob
    reserved_mib: int
    slack_bytes: int
    available: int
    state_slots: int
    load_error: str | None
    startup_error: str | None

    @property
    def pre(self) -> int:
        return self.pre_load_free.as_int()


def _budget(arch: ModelArch, dep: Deployment, hybrid: HybridSteps | None, attn_tp: int) -> _Budget:
    """free after weights − pre-load free × (1 − mem_fraction_static), in GiB floats as SGLang computes it; a
    hybrid's state pool comes out of it before the token pool is sized."""
    overhead_k = resolve(dep, "runtime_overhead", DEFAULT_RUNTIME_OVERHEAD, "assumed CUDA context + NCCL")
    pre_k = resolve(dep, "pre_load_free", dep.gpu.cuda_total_bytes - overhead_k.as_int(),
                    "CUDA total of the GPU − runtime_overhead")  # fmt: skip
    pre = pre_k.as_int()
    w_k = weights_knob(arch, dep, with_mtp=dep.mtp)
    weights = w_k.as_int()
    # checked before any arithmetic uses them
    load_error = check_gpu_memory(dep, weights=weights, free_before_load=pre, free_label="pre-load free memory")
    chunk_k, max_bs, mfs_k, reserved_mib = _mem_fraction(arch, dep)
    mfs = mfs_k.as_float()
    slack_gib = pre / GiB * (1 - mfs)
    rest_gib = (pre - weights) / GiB - slack_gib
    state_slots, state_error = 0, None
    if hybrid is not None and load_error is None:
        # _profile_available_bytes: the Mamba state pool comes out of rest_memory before the KV pool is sized
        rest_gib, state_slots, state_error = hybrid.take_state(rest_gib, attn_tp)
    available = int(rest_gib * GiB)
    startup_error = load_error
    if rest_gib <= 0 or available <= 0 or load_error is not None or state_error is not None:
        startup_error = (
            load_error
            or state_error
            or (f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs}")
        )
        available = 0
    return _Budget(overhead_k, pre_k, w_k, chunk_k, max_bs, mfs_k, reserved_mib, int(slack_gib * GiB), available,
                   state_slots, load_error, startup_error)  # fmt: skip


def _mem_fraction(arch: ModelArch, dep: Deployment) -> tuple[Knob, int, Knob, int]:
    """chunked_prefill_size, the decode CUDA-graph max_bs, mem_fraction_static and the MiB its heuristic reserved."""
    rules = sglang_rules(dep.engine_version)
    gpu_mem_mib = dep.gpu.nvml_total_bytes // MiB
    chunk_default, bs_default = capacity_defaults(gpu_mem_mib, dep.tp, rules.capacity)
    chunk_k = resolve(dep, "chunked_prefill_size", chunk_default, f"{gpu_mem_mib:,} MiB GPU")
    max_bs = dep.cuda_graph_max_bs or bs_default
    if dep.max_running_requests is not None and dep.cuda_graph_max_bs is None:
        max_bs = min(max_bs, dep.max_running_requests)
    mfs_default, mfs_why, reserved_mib = default_mem_fraction(
        dep, chunk=chunk_k.as_int(), max_bs=max_bs, version=dep.engine_version, mla=arch.is_mla
    )
    mfs_k = resolve(dep, "mem_fraction_static", *sglang_defaults.for_vlm(arch, mfs_default, mfs_why))
    if arch.is_dsa and rules.dsa_mem_fraction is not None:
        # 0.5.3 server_args: "Setting mem fraction static to 0.8 for DeepSeek NSA." (over any --mem-fraction-static)
        mfs_k = Knob("mem_fraction_static", rules.dsa_mem_fraction, f"forced by SGLang {rules.label} for NSA models")
    return chunk_k, max_bs, mfs_k, reserved_mib


# ---- rows: the token pool (a hybrid's SWA pool beside it), capped by --max-total-tokens


@record
class _Rows:
    rows: int
    swa_rows: int
    capped: bool
    logged: int
    startup_error: str | None


def _rows(
    dep: Deployment, hybrid: HybridSteps | None, budget: _Budget, cell: _CellRows, dtype: str, attn_tp: int, page: int
) -> _Rows:
    """rows = available // cell // page × page (hybrids: their configurator's sizes); logged = rows × dcp."""
    total = cell.cell.total_bytes
    swa_rows = 0
    if hybrid is not None:
        rows, swa_rows = hybrid.pool_tokens(budget.available, total, dtype, attn_tp, page)
    else:
        rows = budget.available // total // page * page if total else 0
    capped = dep.max_total_tokens is not None and dep.max_total_tokens < rows
    if dep.max_total_tokens is not None and capped:
        rows = dep.max_total_tokens // page * page
        if hybrid is not None:  # calculate_pool_sizes_from_max_tokens: the SWA pool follows the capped full pool
            swa_rows = hybrid.swa_tokens_for(rows, page)
    error = budget.startup_error
    if rows == 0 and error is None:
        error = "the KV budget holds less than one page: SGLang cannot build a pool"
    if hybrid is not None and error is None:
        error = hybrid.check_swa_pool(swa_rows, page)
    return _Rows(rows, swa_rows, capped, rows * dep.dcp, error)


# ---- what is really allocated (padding rows and pages are outside cell_size)


@record
class _Allocated:
    index_buf_size: int
    index_pages: int
    mla: int
    indexer: int
    draft: int
    swa: int
    state: int

    @property
    def total(self) -> int:
        return self.mla + self.indexer + self.draft + self.swa + self.state


def _allocated(
    arch: ModelArch,
    dep: Deployment,
    hybrid: HybridSteps | None,
    cell: _CellRows,
    r: _Rows,
    state_slots: int,
    dtype: str,
    attn_tp: int,
    page: int,
) -> _Allocated:
    """The pools' tensors: page + rows MLA rows, the indexer's index_buf_size pages, the draft's, the hybrids'."""
    rows, dcp = r.rows, dep.dcp
    index_buf_size = (rows + page) * dcp - page if rows else 0
    index_pages = (index_buf_size + page + 1) // page if rows else 0
    index_page_bytes = (
        page // arch.index_kpool * (arch.index_head_dim + arch.index_head_dim // 128 * 4) if arch.is_dsa else 0
    )
    draft = 0
    if cell.draft_layers and rows:
        d_size, d_page = rows * dcp, page * dcp
        d_pages = (d_size + d_page + 1) // d_page
        draft = (
            d_size + d_page
        ) * cell.mla_row * cell.draft_layers + d_pages * d_page * cell.idx_row * cell.draft_layers
    # hybrids: SWAKVPool's SWA buffers (swa_rows + page rows) and MambaPool's (max_mamba_cache_size + 1) slots
    swa = hybrid.swa_alloc_bytes(r.swa_rows, dtype, attn_tp, page) if hybrid is not None and r.swa_rows else 0
    state = hybrid.state_alloc_bytes(state_slots, attn_tp) if hybrid is not None and state_slots else 0
    return _Allocated(
        index_buf_size=index_buf_size,
        index_pages=index_pages,
        mla=(rows + page) * cell.mla_row * arch.num_layers if rows else 0,
        indexer=index_pages * index_page_bytes * cell.indexer_layers,
        draft=draft,
        swa=swa,
        state=state,
    )


# ---- the chain the plan prints, the memory map, the extras


def _chain(arch: ModelArch, dep: Deployment, b: _Budget, cell: _CellRows, r: _Rows, page: int) -> tuple[Term, ...]:
    weights = b.weights.as_int()
    return (
        Term(dep.gpu.total_label, dep.gpu.nvml_total_bytes, f"{dep.gpu.name}, catalog"),
        Term("CUDA-visible total", dep.gpu.cuda_total_bytes, "NVML total − driver reserve"),
        Term("pre-load free", b.pre, b.pre_load_free.origin),
        Term("weights per GPU", weights, b.weights.origin),
        Term("free after weights", b.pre - weights, "pre-load free − weights"),
        Term(
            "slack (non-KV reserve)",
            b.slack_bytes,
            f"pre-load free × (1 − mem_fraction_static {b.mfs.as_float()}); holds req_to_token, CUDA graphs"
            + (", indexer logits" if arch.has_indexer else ""),
        ),
        Term("available for the KV pool", b.available, "free after weights − slack"),
        Term("cell", cell.cell.total_bytes, "bytes per pool row"),
        Term("pool rows per GPU", None, f"{r.rows:,} = available // cell // {page} × {page}"),
        Term("logged max_total_num_tokens", None, f"{r.logged:,} = rows × dcp {dep.dcp}"),
    )


def _memory_map(dep: Deployment, b: _Budget, a: _Allocated) -> tuple[Segment, ...]:
    return memory_map(
        nvml_total=dep.gpu.nvml_total_bytes,
        outside=("driver+context", dep.gpu.nvml_total_bytes - b.pre),
        weights=b.weights.as_int(),
        main=a.mla + a.swa + a.state,
        indexer=a.indexer,
        draft=a.draft,
        available=b.available + a.state,
    )


def _extras(b: _Budget, a: _Allocated, req: Requests, r: _Rows, hybrid: HybridSteps | None) -> dict[str, int]:
    extras = {
        "mem_fraction_reserved_mib": b.reserved_mib,
        "index_buf_size": a.index_buf_size,
        "index_pages_per_layer": a.index_pages,
        "mla_alloc_bytes": a.mla,
        "indexer_alloc_bytes": a.indexer,
        "draft_alloc_bytes": a.draft,
        "req_to_token_bytes": req.req_to_token_bytes,
        "slack_bytes": b.slack_bytes,
    }
    if hybrid is not None:
        extras |= {"swa_tokens": r.swa_rows, "swa_alloc_bytes": a.swa, "max_mamba_cache_size": b.state_slots,
                   "mamba_alloc_bytes": a.state}  # fmt: skip
    return extras
