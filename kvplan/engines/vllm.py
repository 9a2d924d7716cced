"""vLLM: deployment -> pool plan, as vLLM 0.33.0 computes it; V1 releases from 0.9 by the rules in force then
(kvplan/versions.py: the CUDA-graph estimate joined the budget in 0.21; V0 is recognised, not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import kvplan.engines.vllm_budget as vllm_budget
import kvplan.engines.vllm_hybrid as vllm_hybrid
import kvplan.engines.vllm_knobs as vllm_knobs
from kvplan.engines.common import (
    Cell,
    Knob,
    Pool,
    PoolPlan,
    StartupRefusal,
    Term,
    given,
    memory_map,
    resolve,
)
from kvplan.engines.context import derived_why, long_context_note
from kvplan.engines.vllm_blocks import HybridBlocks
from kvplan.engines.vllm_budget import DEFAULT_CUDAGRAPH_ESTIMATE as DEFAULT_CUDAGRAPH_ESTIMATE
from kvplan.engines.vllm_budget import DEFAULT_NON_KV_OTHER as DEFAULT_NON_KV_OTHER
from kvplan.engines.vllm_budget import DSA_CALIBRATION_BYTES as DSA_CALIBRATION_BYTES
from kvplan.engines.vllm_budget import Budget
from kvplan.engines.vllm_budget import dsa_buffers as dsa_buffers
from kvplan.engines.vllm_defaults import BLOCK_BY_BACKEND, Layout, block_knob, resolve_layout
from kvplan.engines.vllm_glm5_next import is_glm5_next
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import AUTO_FIT, Deployment
from kvplan.models.formats import indexer_bytes_per_token_layer
from kvplan.units import GiB, cdiv, gib
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, parse_version, rules_note, vllm_rules


def indexer_layer_flags(arch: ModelArch) -> tuple[bool, ...]:
    """vLLM's own rule: ``index_topk_pattern``, else freq with an offset that defaults to 2.

    vLLM never reads ``indexer_types``; MTP layers always get an indexer.
    """
    if not arch.is_dsa:
        return ()
    if is_glm5_next(arch):  # an Indexer on every MLA layer (models/glm5next/common/attention.py)
        return tuple(layer.indexer is not None for layer in arch.layers)
    stage = arch.pp_stage  # a stage's layers keep their model index
    layers = range(stage.start, stage.end) if stage is not None else range(arch.num_layers)
    if arch.index_topk_pattern is not None:
        pattern = arch.index_topk_pattern if stage is None else arch.index_topk_pattern[stage.start : stage.end]
        return tuple(c == "F" for c in pattern)
    offset = 2 if arch.index_skip_topk_offset is None else arch.index_skip_topk_offset
    freq = arch.index_topk_freq
    return tuple(max(i - offset + 1, 0) % freq == 0 for i in layers)


def _defaults_by_memory(dep: Deployment) -> tuple[int, int]:
    """(max_num_batched_tokens under `vllm serve`, max_num_seqs) by device memory (arg_utils)."""
    gib = dep.gpu.cuda_total_bytes / GiB
    if gib >= 160:
        return 16384, 1024
    if gib >= 70 and "A100" not in dep.gpu.name and "GB10" not in dep.gpu.name:
        return 8192, 1024
    return 2048, 256


VLM_PROFILE_NOTE = (  # a VLM's plan: what its non-KV estimate leaves out
    "the vision encoder is not in the non-KV estimate: vLLM's profile run also runs the tower on dummy images (the "
    "encoder budget), and its activations come off the KV memory; --language-model-only or --limit-mm-per-prompt "
    "with 0 images removes them, or set non_kv_other from the log's 'Available KV cache memory'"
)


# The V1 chain, on one GPU:
#
# Source facts: shared/reference/vllm-0.33.0.md §1-4, §6-8. In short, on one GPU:
#
#     bytes_per_block = block × (mla_row × mla_layers + indexer_row × indexer_layers)   (one uniform group)
#     full attention  : page = block × kv_heads_per_rank × (head_size + head_size_v) × dtype bytes per layer
#     available       = ceil(cuda_total × gpu_memory_utilization) − non_kv − cudagraph_estimate
#                       (no cudagraph_estimate before 0.21 or with --enforce-eager)
#     non_kv          = weights + DSA buffers + torch peak + non-torch growth of the profiling run
#                       (kvplan/engines/vllm_profile.py; + DSA_CALIBRATION_BYTES for a DSA model)
#     num_blocks      = available // bytes_per_block;  block 0 is the null block
#     startup check   : bytes_per_block × cdiv(cdiv(max_model_len, dcp), block) <= available − bytes_per_block
#
# A hybrid model (sliding window, linear-attention state) keeps this budget; its groups, block and pool are
# kvplan/engines/vllm_hybrid.py: ``PoolPlan.pools`` holds the one shared block pool with a Demand per KV cache group,
# ``rows`` = num_blocks × block, ``usable_pages`` = num_blocks − 1 (blocks, every group drawing from them),
# ``logged_tokens`` = the 'GPU KV cache size' vLLM logs (int(max_concurrency × max_model_len) from 0.20.1), and the
# startup check counts the blocks of every group.
#
# ``plan`` runs the chain as vLLM does (``get_kv_cache_groups`` → ``_uniform_spec / _uniform_page_size`` →
# ``get_num_blocks`` → ``check_enough_kv_cache_memory``), one step per term group the plan prints: defaults
# (kvplan.engines.vllm_defaults) → cell (``_uniform_spec``) → scheduler → hybrid groups → budget → blocks and
# startup checks → chain.
def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    rules = vllm_rules(dep.engine_version)  # a V0 version (0.6-0.8) is planned by kvplan.engines.vllm_v0
    if dep.dtype in ("float", "float32") and (arch.is_mla or vllm_hybrid.is_v4(arch)):
        raise PlanError("--dtype float32 is planned for full-attention models only (an MLA cache's rows are not)")
    unified = vllm_knobs.unified_to_full(arch, dep)  # --disable-hybrid-kv-cache-manager: one full-attention group
    attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
    lay = resolve_layout(arch, dep)
    notes: list[str] = []
    if (said := rules_note("vllm", dep.engine_version)) is not None:
        notes.append(said)
    if unified:
        notes.append(vllm_knobs.UNIFIED_NOTE)
    spec = _uniform_spec(arch, dep, lay, attn_tp)
    notes += spec.notes
    sched = _scheduler(arch, dep)
    hybrid = None
    if arch.is_hybrid and not unified:  # one shared block pool, several KV cache groups (vllm_hybrid.py)
        hybrid = _hybrid_groups(arch, dep, lay, spec, attn_tp, sched)
        spec = replace(spec, block_knob=hybrid.block_knob, cell=_hybrid_cell(hybrid), hybrid=hybrid)
        notes += hybrid.notes
    budget = vllm_budget.budget(
        arch,
        dep,
        rules,
        mnbt=sched.mnbt_k.as_int(),
        max_num_seqs=sched.seqs_k.as_int(),
        max_model_len=sched.max_model_len,
        indexer_layers=spec.indexer_layers,
    )
    pool = _size_pool(arch, dep, spec, sched, budget)
    notes += pool.notes
    if arch.vision_tower and budget.other_k.defaulted:
        notes.append(VLM_PROFILE_NOTE)
    knobs = (
        *lay.knobs,
        spec.block_knob,
        given(dep, "dcp", dep.dcp, "1, no decode context parallelism"),
        budget.util_k,
        budget.w_k,
        budget.other_k,
        pool.ctx_k,
        sched.seqs_k,
        sched.mnbt_k,
        given(dep, "speculative_num_draft_tokens", dep.speculative_num_draft_tokens, "0, no speculative decoding"),
        *vllm_knobs.shown(dep),
    )
    return _pool_plan(arch, dep, lay, spec, sched, budget, pool, knobs, tuple(notes), attn_tp)


@dataclass(frozen=True)
class _Spec:
    """One block's layout (``_uniform_spec`` / ``_uniform_page_size``; a hybrid's groups replace it)."""

    block_knob: Knob
    mla_row: int
    """Main KV bytes of one token in one layer on one rank (MLA row, or K + V of the kv heads per rank)."""
    idx_row: int
    flags: tuple[bool, ...]
    mtp_layers: int
    indexer_layers: int
    """Indexer layers with the MTP layers, which always get one (the DSA buffers' count)."""
    cell: Cell
    notes: tuple[str, ...]
    hybrid: HybridBlocks | None = None

    @property
    def block(self) -> int:
        return self.block_knob.as_int()

    @property
    def bytes_per_block(self) -> int:
        return self.hybrid.bytes_per_block if self.hybrid else self.block * self.cell.total_bytes


def _uniform_spec(arch: ModelArch, dep: Deployment, lay: Layout, attn_tp: int) -> _Spec:
    """The block and the per-token row of every layer: ``FullAttentionSpec`` / ``MLAAttentionSpec`` pages and the
    DSA indexer's, in one ``UniformTypeKVCacheSpecs`` group."""
    page_k = block_knob(arch, dep, lay.backend)
    mtp_layers = arch.num_mtp_layers if dep.mtp else 0
    flags = indexer_layer_flags(arch)
    # FullAttentionSpec: num_kv_heads (max(1, total // tp)) × (head_size + head_size_v) × dtype size; MLA: the layout
    mla_row = arch.attention.row_bytes(attn_tp, lay.dtype, lay.mla_layout)
    idx_row = indexer_bytes_per_token_layer(arch.index_head_dim, arch.index_kpool) if arch.is_dsa else 0
    cell = Cell(
        main_bytes=vllm_knobs.per_layer_bytes(arch, attn_tp, lay.dtype) or mla_row * arch.num_layers,
        indexer_bytes=idx_row * sum(flags),
        draft_main_bytes=mla_row * mtp_layers,
        draft_indexer_bytes=idx_row * mtp_layers if arch.is_dsa else 0,
    )
    notes: tuple[str, ...] = ()
    if arch.indexer_rule.value == "indexer_types" and sum(flags) != arch.full_indexer_layers:
        notes = (
            f"vLLM reads index_topk_freq/offset, not indexer_types: {sum(flags)} indexer layers "
            f"where indexer_types lists {arch.full_indexer_layers}",
        )
    indexer_layers = sum(flags) + (mtp_layers if arch.is_dsa else 0)
    return _Spec(page_k, mla_row, idx_row, flags, mtp_layers, indexer_layers, cell, notes)


@dataclass(frozen=True)
class _Scheduler:
    """max_model_len, max_num_seqs and max_num_batched_tokens as ``EngineArgs`` defaults them."""

    ctx_k: Knob
    seqs_k: Knob
    mnbt_k: Knob

    @property
    def max_model_len(self) -> int:
        return self.ctx_k.as_int()


def _scheduler(arch: ModelArch, dep: Deployment) -> _Scheduler:
    mnbt_default, seqs_default = _defaults_by_memory(dep)
    ctx_k = resolve(dep, "context_length", arch.max_position_embeddings, derived_why(arch, dep))
    if dep.context_length == AUTO_FIT:  # fitted below; everything sized before the KV config sees the derived length
        ctx_k = Knob("context_length", arch.max_position_embeddings, f"default: {derived_why(arch, dep)}")
    seqs_k = resolve(dep, "max_running_requests", seqs_default, "max_num_seqs by device memory")
    mnbt_k = resolve(
        dep,
        "max_num_batched_tokens",
        min(mnbt_default, seqs_k.as_int() * ctx_k.as_int()),
        "vllm serve default by device memory",
    )
    return _Scheduler(ctx_k, seqs_k, mnbt_k)


def _hybrid_groups(
    arch: ModelArch, dep: Deployment, lay: Layout, spec: _Spec, attn_tp: int, sched: _Scheduler
) -> HybridBlocks:
    """``get_kv_cache_groups`` of a hybrid model: its KV cache groups and their block (kvplan.engines.vllm_hybrid)."""
    return vllm_hybrid.plan_blocks(
        arch,
        dep if arch.is_mla else replace(dep, kv_cache_dtype=lay.dtype),
        attn_bytes_per_token=spec.mla_row,
        block_knob=spec.block_knob,
        min_kernel_block=BLOCK_BY_BACKEND.get(lay.backend, 16),
        attn_tp=attn_tp,
        mnbt=sched.mnbt_k.as_int(),
        max_model_len=sched.max_model_len,
    )


def _hybrid_cell(hybrid: HybridBlocks) -> Cell:
    """One pool row = one token of one block: the page of every layer of the widest group."""
    return Cell(main_bytes=hybrid.bytes_per_block // hybrid.block, indexer_bytes=0)


@dataclass(frozen=True)
class _Pool:
    """num_blocks and the start-up checks on them (``get_num_blocks``, ``check_enough_kv_cache_memory``)."""

    num_blocks: int
    ctx_k: Knob
    request_blocks: int
    needed: int
    startup_error: str | None
    refusal: StartupRefusal | None
    notes: tuple[str, ...]

    @property
    def max_model_len(self) -> int:
        return self.ctx_k.as_int()


def _size_pool(arch: ModelArch, dep: Deployment, spec: _Spec, sched: _Scheduler, budget: Budget) -> _Pool:
    hybrid, block, bytes_per_block = spec.hybrid, spec.block, spec.bytes_per_block
    num_blocks = budget.available // bytes_per_block if bytes_per_block else 0
    if dep.max_total_tokens is not None:
        num_blocks = min(num_blocks, cdiv(dep.max_total_tokens, block))
    num_blocks, sized = vllm_knobs.override_blocks(dep, num_blocks, bytes_per_block, budget.available)
    check = sized - bytes_per_block  # the null block is reserved before the check (get_kv_cache_configs)

    def longest(cap: int) -> int:  # _estimate_max_model_len_from_groups
        if hybrid:
            return hybrid.estimated_max_len(check, cap)
        return max_len_fitting(check, bytes_per_block, block, dep.dcp)

    ctx_k, startup_error = sched.ctx_k, budget.error
    if dep.context_length == AUTO_FIT:  # --max-model-len -1: the longest length the pool holds
        fit = vllm_knobs.auto_fit(sched.max_model_len, longest(sched.max_model_len), check)
        ctx_k, startup_error = fit.knob, startup_error or fit.error
    if startup_error is None and check <= 0:  # the budget less the null block: nothing for a request's blocks
        startup_error = vllm_budget.NO_MEMORY
    max_model_len = ctx_k.as_int()
    # _max_memory_usage_bytes_from_groups: bytes_per_block × the blocks of one max-length request (every group)
    request_blocks = hybrid.blocks_per_request(max_model_len) if hybrid else cdiv(cdiv(max_model_len, dep.dcp), block)
    needed = bytes_per_block * request_blocks
    refusal = None
    if startup_error is None and needed > check:
        refusal = max_len_refusal(max_model_len, needed, check, longest(max_model_len))
        startup_error = refusal.text
    notes: tuple[str, ...] = ()
    if max_model_len > arch.max_position_embeddings and dep.allow_long_context:
        notes = (long_context_note(arch, dep, max_model_len),)
    elif max_model_len > arch.max_position_embeddings:
        # config/model.py: refused before any memory is profiled (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)
        refusal, startup_error = (
            None,
            (
                f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
                f"(max_position_embeddings={arch.max_position_embeddings} in model's config.json). "
                "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
            ),
        )
    return _Pool(num_blocks, ctx_k, request_blocks, needed, startup_error, refusal, notes)


def max_len_refusal(max_model_len: int, needed: int, check: int, estimate: int) -> StartupRefusal:
    """``check_enough_kv_cache_memory``: one request of max_model_len does not fit, in vLLM's own words."""
    text = (
        "To serve at least one request with the model's max seq len "
        f"({max_model_len}), ({gib(needed, 'vllm')} GiB KV cache is needed, which is larger than the "
        f"available KV cache memory ({gib(check, 'vllm')} GiB). "
        + (f"Based on the available memory, the estimated maximum model length is {estimate}. " if estimate > 0 else "")
        + "Try increasing `gpu_memory_utilization` "
        "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when "
        "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
        "for more details."
    )
    return StartupRefusal(text=text, max_model_len=max_model_len, needed_bytes=needed, available_bytes=check)


def _logged_tokens(dep: Deployment, spec: _Spec, pool: _Pool) -> int:
    """The pool tokens vLLM logs: num_blocks × block × dcp; a hybrid's 'GPU KV cache size' is
    int(num_blocks / blocks per request × max_model_len) (num_blocks // groups × block before 0.20.1)."""
    if spec.hybrid is None:
        return pool.num_blocks * spec.block * dep.dcp
    if not pool.num_blocks:
        return 0
    return spec.hybrid.kv_cache_size_tokens(pool.num_blocks, pool.max_model_len, dep.engine_version)


def _chain(dep: Deployment, spec: _Spec, budget: Budget, pool: _Pool, logged: int) -> tuple[Term, ...]:
    """The memory chain of one GPU as the plan prints it, from the catalog total to the tokens vLLM logs."""
    hybrid, block, num_blocks = spec.hybrid, spec.block, pool.num_blocks
    sizing = "num_gpu_blocks_override" if dep.num_gpu_blocks_override else "available // bytes_per_block"
    blocks_terms = (
        (
            Term("KV cache groups", None, "; ".join(hybrid.describe())),
            Term("bytes per block", spec.bytes_per_block, hybrid.block_detail()),
        )
        if hybrid
        else (Term("bytes per block", spec.bytes_per_block, f"{block} × {spec.cell.total_bytes:,} B"),)
    )
    return (
        Term(dep.gpu.total_label, dep.gpu.nvml_total_bytes, f"{dep.gpu.name}, catalog"),
        Term("CUDA total (torch)", budget.total, "what vLLM's memory snapshot reads"),
        Term("requested", budget.requested, f"ceil(CUDA total × gpu_memory_utilization {budget.util_k.as_float()})"),
        Term("weights per GPU", budget.w_k.as_int(), budget.w_k.origin),
        *(Term(k.removesuffix("_bytes").replace("_", " "), v, "DSA buffer, non-KV") for k, v in budget.buffers.items()),
        *budget.other_terms,
        Term("available KV cache memory", budget.available, budget.avail_detail),
        *blocks_terms,
        Term("num_blocks", None, f"{num_blocks:,} = {sizing} (block 0 is the null block)"),
        _size_term(dep, spec, pool, logged),
    )


def _size_term(dep: Deployment, spec: _Spec, pool: _Pool, logged: int) -> Term:
    """The pool tokens per GPU, or a hybrid's 'GPU KV cache size' line with its maximum concurrency."""
    hybrid, max_model_len, request_blocks = spec.hybrid, pool.max_model_len, pool.request_blocks
    if hybrid is None:
        return Term("pool tokens per GPU", None, f"{logged:,} = num_blocks × {spec.block} × dcp {dep.dcp}")
    how = (
        f"int(num_blocks / {request_blocks:,} blocks per request × {max_model_len:,})"
        if parse_version(dep.engine_version) >= TOKENS_FROM_CONCURRENCY_SINCE
        else f"num_blocks // {hybrid.num_groups} groups × {spec.block}"
    )
    return Term(
        "GPU KV cache size",
        None,
        f"{logged:,} tokens = {how}; Maximum concurrency for {max_model_len:,} tokens per request: "
        f"{pool.num_blocks / request_blocks:.2f}x (num_blocks / blocks per request)",
    )


def _pool_plan(arch: ModelArch, dep: Deployment, lay: Layout, spec: _Spec, sched: _Scheduler, budget: Budget,
               pool: _Pool, knobs: tuple[Knob, ...], notes: tuple[str, ...], attn_tp: int) -> PoolPlan:  # fmt: skip
    hybrid, block, num_blocks, cell = spec.hybrid, spec.block, pool.num_blocks, spec.cell
    rows = num_blocks * block
    logged = _logged_tokens(dep, spec, pool)
    pools: tuple[Pool, ...] = ()
    if hybrid is not None:
        pools = (Pool("vLLM block pool", "block", block, max(num_blocks - 1, 0), spec.bytes_per_block, hybrid.demands),)
    available = budget.available
    return PoolPlan(
        engine="vllm",
        engine_version=dep.engine_version,
        arch=arch,
        deployment=dep,
        knobs=knobs,
        mla_layout=lay.mla_layout,
        mla_bytes_per_layer=spec.mla_row,
        main_layers=hybrid.group_size if hybrid else arch.num_layers,
        indexer_bytes_per_layer=spec.idx_row,
        indexer_layers=sum(spec.flags),
        indexer_rule="vLLM: index_topk_pattern or index_topk_freq/offset",
        draft_layers=spec.mtp_layers,
        dcp=dep.dcp,
        cell=cell,
        page_tokens=block,
        chain=_chain(dep, spec, budget, pool, logged),
        available_bytes=available,
        rows=rows,
        usable_pages=max(num_blocks - 1, 0),
        logged_tokens=logged,
        context_len=pool.max_model_len,
        max_running_requests=sched.seqs_k.as_int(),
        allocated_bytes=num_blocks * spec.bytes_per_block,
        memory_map=memory_map(
            nvml_total=dep.gpu.nvml_total_bytes,
            outside=("driver", dep.gpu.nvml_total_bytes - budget.total),
            weights=budget.w_k.as_int(),
            main=rows * cell.main_bytes,
            indexer=rows * cell.indexer_bytes,
            draft=rows * (cell.draft_main_bytes + cell.draft_indexer_bytes),
            available=available,
        ),
        startup_error=pool.startup_error,
        startup_refusal=pool.refusal,
        loads_weights=budget.load_error is None,
        notes=notes,
        kv_dtype=lay.dtype,
        attn_tp=attn_tp,
        pools=pools,
        extras=_extras(spec, sched, budget, pool),
    )


def _extras(spec: _Spec, sched: _Scheduler, budget: Budget, pool: _Pool) -> dict[str, int]:
    hybrid = spec.hybrid
    return {
        "num_blocks": pool.num_blocks,
        "bytes_per_block": spec.bytes_per_block,
        "requested_bytes": budget.requested,
        "non_kv_bytes": budget.non_kv,
        "max_num_batched_tokens": sched.mnbt_k.as_int(),
        "max_model_len_needed_bytes": pool.needed,
        **(
            {
                "blocks_per_request": pool.request_blocks,
                "block_size": spec.block,
                "page_bytes": hybrid.page_bytes,
                "kv_cache_groups": hybrid.num_groups,
                "group_size": hybrid.group_size,
                "state_bytes": hybrid.state_bytes,
            }
            if hybrid
            else {}
        ),
        **budget.buffers,
    }


def max_len_fitting(check_bytes: int, bytes_per_block: int, block: int, dcp: int) -> int:
    """The largest max_model_len whose blocks fit in ``check_bytes`` (vLLM's estimate)."""
    if check_bytes < bytes_per_block or bytes_per_block == 0:
        return 0
    return check_bytes // bytes_per_block * block * dcp
