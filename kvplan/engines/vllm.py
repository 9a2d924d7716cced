"""vLLM: deployment -> pool plan, as vLLM 0.33.0 computes it; V1 releases from 0.9 by the rules in force then
(kvplan/versions.py: the CUDA-graph estimate joined the budget in 0.21; V0 is recognised, not modelled).
"""

from __future__ import annotations

import math
from dataclasses import replace

import kvplan.engines.vllm_hybrid as vllm_hybrid
import kvplan.engines.vllm_knobs as vllm_knobs
from kvplan.engines.backends import check_backend, check_serves, platform_label
from kvplan.engines.common import (
    Cell,
    Knob,
    Pool,
    PoolPlan,
    Term,
    check_gpu_memory,
    given,
    memory_map,
    resolve,
    weights_knob,
)
from kvplan.engines.context import derived_why, long_context_note
from kvplan.engines.vllm_profile import ProfilePeak, profile_peak
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention, kv_dtype_bytes
from kvplan.models.deploy import AUTO_FIT, Deployment, Gpu
from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer
from kvplan.units import GiB, MiB, cdiv, gib
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, parse_version, rules_note, vllm_rules

DEFAULT_NON_KV_OTHER = 6_070 * MiB
"""Peak activations + non-torch memory + the CUDA-graph estimate, beyond the weights and the DSA buffers, at the
one published GLM-5.3 figure (vllm-project/recipes PR #893: 94.46 GiB weights leave 25.94 GiB of KV per rank on
8×H200 TP8 at max_model_len 1,048,576; tests/unit/test_vllm.py derives it). The default non_kv_other is the
profile model of kvplan.engines.vllm_profile (+ DSA_CALIBRATION_BYTES for DSA models, which lands this figure
at that point); this constant stays the default only for a config without hidden / vocab size. Override with
--set non_kv_other=...GiB."""

DEFAULT_CUDAGRAPH_ESTIMATE = 1_618 * MiB
"""The part of DEFAULT_NON_KV_OTHER kvplan assumes is vLLM's profiled CUDA-graph estimate (ASSUMPTION: the
GLM-5.3 calibration point does not print it). 1.58 GiB = 1,618 MiB is the 'Estimated CUDA graph memory: 1.58 GiB
total' of a public DeepSeek-V4-Flash (sparse MLA + MTP) vLLM 0.25.0 start-up log (TP2, PIECEWISE=51, FULL=35
capture sizes); small dense models print 0.13-0.52 GiB (noonghunna/club-3090#127 and #104, gpustack/runner#251,
Qwen3-8B on vLLM 0.21.0 in LMCache/LMCache#3430), a Qwen3.5 GGUF 1.62 GiB (vllm-project/vllm#39559): no public log
of the GLM-5.3 recipe deployment prints it, so it stays assumed. vLLM subtracts it from the KV budget only from
0.21 on and never with --enforce-eager (cudagraph_mode NONE): kvplan adds it to the default non_kv_other then."""

DSA_CALIBRATION_BYTES = -1_733_892_014
"""CALIBRATED, negative: what the GLM-5.3 recipe point leaves after the profile model and the assumed graph estimate.
At vllm-project/recipes PR #893 (8×H200 TP8, max_model_len 1M, max_num_batched_tokens 8,192, max_num_seqs 1,024)
the non-KV memory besides the weights and the DSA buffers is DEFAULT_NON_KV_OTHER = 6,070 MiB; the profile model
gives torch peak 4,072,132,608 B (sampler 1,024 × 154,880 × 14 B + top-k/top-p buffer 132 × 154,880 × 4 B +
hidden states kept (8,192 + 2,048) × 6,144 × 2 B + MoE workspace 8,192 × 8 × (6,144 + 6,144) × 2 B + 32 MiB
cuBLAS) + non-torch 2,330,019,758 B (TP4's 2.17 GiB, assumed at TP8) and the graph estimate 1,696,595,968 B
(1,618 MiB): 8,098,748,334 B, 1,733,892,014 B (1.61 GiB) more than the recipe leaves. Which term over-counts
there is not known: the FP8 MoE kernel's workspace (DeepGEMM, not the bf16 TritonExperts read from 0.19.0), the
TP8 non-torch growth (extrapolated from TP4), or a graph estimate below the assumed 1.58 GiB. Applied to DSA
models only, so that the recipe figure is reproduced (tests/unit/test_vllm.py::test_recipe_893_calibration)."""

INDEXER_PREFILL_ENTRIES_PER_TOKEN = 576 * 2 // 132
"""vLLM sizes the indexer prefill gather buffer to fit FlashMLA-sparse's workspace: 8 entries per token × factor."""


def indexer_layer_flags(arch: ModelArch) -> tuple[bool, ...]:
    """vLLM's own rule: ``index_topk_pattern``, else freq with an offset that defaults to 2.

    vLLM never reads ``indexer_types``; MTP layers always get an indexer.
    """
    if not arch.is_dsa:
        return ()
    if vllm_hybrid.is_glm5_next(arch):  # an Indexer on every MLA layer (models/glm5next/common/attention.py)
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


def dsa_buffers(arch: ModelArch, *, mnbt: int, max_num_seqs: int, spec: int, max_model_len: int,
                indexer_layers: int) -> dict[str, int]:  # fmt: skip
    """Persistent DSA buffers vLLM builds during model construction (non-KV memory)."""
    if not arch.is_dsa:
        return {}
    topk = mnbt * arch.index_topk * 4
    rows = min(mnbt, max_num_seqs * (1 + spec))
    per_layer = (rows + 1) * arch.index_topk * 4 + (rows + 1) * 4
    factor = 5 if max_model_len <= 256 * 1024 else 2
    idx_row = indexer_bytes_per_token_layer(arch.index_head_dim, arch.index_kpool)
    prefill = max_model_len * INDEXER_PREFILL_ENTRIES_PER_TOKEN * factor * idx_row
    return {
        "topk_indices_buffer_bytes": topk * (2 if spec else 1),
        "physical_topk_bytes": per_layer * indexer_layers,
        "indexer_prefill_buffer_bytes": prefill,
    }


def _default_backend(arch: ModelArch, gpu: Gpu, dtype: str) -> str:
    """The backend vLLM's priority list picks (``platforms/cuda.py`` / ``platforms/rocm.py``)."""
    fp8 = dtype not in ("auto", "bf16", "bfloat16")
    if gpu.vendor == "amd":
        return "ROCM_AITER_MLA_SPARSE" if arch.is_dsa else "ROCM_AITER_MLA"
    sm = gpu.sm
    if not arch.is_dsa:  # FLASHINFER_MLA is SM10x only, FLASHMLA / FLASH_ATTN_MLA SM9x: SM8x and SM12x take TRITON_MLA
        if sm // 10 == 10:
            return "FLASHINFER_MLA"
        return ("FLASHMLA" if fp8 else "FLASH_ATTN_MLA") if sm // 10 == 9 else "TRITON_MLA"
    if sm >= 100:
        return "FLASHINFER_MLA_SPARSE" if fp8 and dtype != "fp8_ds_mla" else "FLASHMLA_SPARSE"
    # SM90: FLASH_ATTN_MLA_SPARSE first, but it rejects a quantized cache
    return "FLASHMLA_SPARSE" if fp8 else "FLASH_ATTN_MLA_SPARSE"


BLOCK_BY_BACKEND = {"FLASHMLA": 64, "FLASHINFER_MLA": 32, "CUTLASS_MLA": 128, "ROCM_AITER_MLA": 1}
"""The smallest kernel block size each backend lists (``get_supported_kernel_block_sizes``), chosen by
``Platform.update_block_size_for_backend`` when --block-size is not given; every other backend takes the
``CacheConfig.DEFAULT_BLOCK_SIZE`` 16 (FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLASH_ATTN_MLA, TRITON_MLA)."""


def _mha_backend(gpu: Gpu) -> str:
    """``platforms/cuda.py _get_backend_priorities``, non-MLA: FLASHINFER first on SM10x, else FLASH_ATTN."""
    if gpu.vendor == "amd":
        return "TRITON_ATTN"
    if gpu.sm // 10 == 10:
        return "FLASHINFER"
    return "FLASH_ATTN" if gpu.sm >= 80 else "TRITON_ATTN"


def _mha_layout(dep: Deployment) -> tuple[str, list[Knob]]:
    """kv dtype and backend of a full-attention model: (dtype, knobs)."""
    gpu = dep.gpu
    check_serves("vllm", dep.engine_version, gpu, dsa=False, mha=True)
    dtype, dtype_why = vllm_knobs.kv_dtype(dep)
    if dtype == "fp8_ds_mla":
        raise PlanError("kv_cache_dtype fp8_ds_mla is FlashMLA's MLA row format: a full-attention model takes "
                        "auto, bf16, fp16, fp8, fp8_e4m3 or fp8_e5m2")  # fmt: skip
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: this model has full attention (MHA / GQA)")
    knobs = [Knob("kv_cache_dtype", dtype, dtype_why)]
    backend = dep.attention_backend or _mha_backend(gpu)
    check_backend("vllm", dep.engine_version, gpu, backend, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    where = platform_label(gpu)
    knobs.append(Knob("attention_backend", backend, "set" if dep.attention_backend else f"default: on {where}"))
    return dtype, knobs


def _layout(arch: ModelArch, dep: Deployment) -> tuple[MlaLayout, list[Knob]]:
    gpu, sm = dep.gpu, dep.gpu.sm
    where = platform_label(gpu)
    check_serves("vllm", dep.engine_version, gpu, dsa=arch.is_dsa)
    dtype = dep.kv_cache_dtype
    knobs: list[Knob] = []
    if dtype == "auto":
        glm = arch.architecture.startswith("GlmMoeDsa")
        dtype = "fp8_e4m3" if glm and gpu.vendor == "nvidia" and sm // 10 == 10 else "auto"
        why = "GlmMoeDsa on SM10x sets fp8_e4m3" if dtype != "auto" else f"auto = bf16 on {where}"
        knobs.append(Knob("kv_cache_dtype", dtype, f"default: {why}"))
    else:
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    fp8 = dtype not in ("auto", "bf16", "bfloat16")
    backend = dep.attention_backend or _default_backend(arch, gpu, dtype)
    (used,) = check_backend("vllm", dep.engine_version, gpu, backend, dsa=arch.is_dsa, fp8=fp8)
    if dtype == "fp8_ds_mla" and used.raw_fp8:
        raise PlanError(
            f"kv_cache_dtype fp8_ds_mla is FlashMLA's format: {backend} on {where} stores raw fp8 rows; "
            "use FLASHMLA_SPARSE or kv_cache_dtype fp8"
        )
    knobs.append(Knob("attention_backend", backend, "set" if dep.attention_backend else f"default: {dtype} on {where}"))
    if dep.mla_layout:
        layout = MlaLayout(dep.mla_layout)
        knobs.append(Knob("mla_layout", layout.value, "set"))
        return layout, knobs
    if not fp8:
        layout = MlaLayout.BF16
    elif not arch.is_dsa or used.raw_fp8:
        layout = MlaLayout.FP8_RAW
    else:  # FLASHMLA_SPARSE: _canonicalize_sparse_mla_kv_cache_dtype rewrites fp8 to fp8_ds_mla
        layout = MlaLayout.FP8_DS_MLA
    knobs.append(Knob("mla_layout", layout.value, f"default: {backend} with {dtype}"))
    return layout, knobs


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
def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    rules = vllm_rules(dep.engine_version)  # a V0 version (0.6-0.8) is planned by kvplan.engines.vllm_v0
    att = arch.attention
    if dep.dtype in ("float", "float32") and (arch.is_mla or vllm_hybrid.is_v4(arch)):
        raise PlanError("--dtype float32 is planned for full-attention models only (an MLA cache's rows are not)")
    unified = vllm_knobs.unified_to_full(arch, dep)  # --disable-hybrid-kv-cache-manager: one full-attention group
    attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
    layout: MlaLayout | None
    if vllm_hybrid.is_v4(arch):  # fp8_ds_mla on FLASHMLA_SPARSE_DSV4 (kvplan/engines/vllm_hybrid.py)
        layout = None
        dtype, knobs = vllm_hybrid.v4_layout(arch, dep)
    elif vllm_hybrid.is_glm5_next(arch):  # FLASHINFER_MLA_SPARSE_SM90 raw rows (kvplan/engines/vllm_hybrid.py)
        layout, knobs = vllm_hybrid.glm5_next_layout(arch, dep)
        dtype = str(knobs[0].value)
    elif isinstance(att, FullAttention):
        layout = None
        dtype, knobs = _mha_layout(dep)
    else:
        layout, knobs = _layout(arch, dep)
        dtype = str(knobs[0].value)
    backend = str(next(k.value for k in knobs if k.name == "attention_backend"))
    notes: list[str] = []
    if (said := rules_note("vllm", dep.engine_version)) is not None:
        notes.append(said)
    if unified:
        notes.append(vllm_knobs.UNIFIED_NOTE)
    dcp = dep.dcp
    if arch.is_dsa:
        block_default, block_why = 64, "the DSA backends accept 64"
    else:
        block_default = BLOCK_BY_BACKEND.get(backend, 16)
        block_why = f"{backend}: smallest kernel block size" if backend in BLOCK_BY_BACKEND else "DEFAULT_BLOCK_SIZE"
    page_k = resolve(dep, "page_size", block_default, block_why)
    block = page_k.as_int()
    if arch.is_dsa and dep.gpu.vendor == "nvidia" and block % 64:
        raise PlanError(f"block_size {block}: the DeepSeek-V3.2 indexer backend supports multiples of 64 on CUDA")

    mtp_layers = arch.num_mtp_layers if dep.mtp else 0
    flags = indexer_layer_flags(arch)
    indexer_layers = sum(flags) + (mtp_layers if arch.is_dsa else 0)
    if isinstance(att, FullAttention):
        # FullAttentionSpec: num_kv_heads (max(1, total // tp)) × (head_size + head_size_v) × dtype size
        mla_row = att.kv_heads_per_rank(attn_tp) * (att.head_dim + att.v_head_dim) * kv_dtype_bytes(dtype)
    else:
        assert layout is not None
        mla_row = layout.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)
    idx_row = indexer_bytes_per_token_layer(arch.index_head_dim, arch.index_kpool) if arch.is_dsa else 0
    cell = Cell(
        main_bytes=vllm_knobs.per_layer_bytes(arch, attn_tp, dtype) or mla_row * arch.num_layers,
        indexer_bytes=idx_row * sum(flags),
        draft_main_bytes=mla_row * mtp_layers,
        draft_indexer_bytes=idx_row * mtp_layers if arch.is_dsa else 0,
    )
    bytes_per_block = block * cell.total_bytes
    if arch.indexer_rule.value == "indexer_types" and sum(flags) != arch.full_indexer_layers:
        notes.append(
            f"vLLM reads index_topk_freq/offset, not indexer_types: {sum(flags)} indexer layers "
            f"where indexer_types lists {arch.full_indexer_layers}"
        )

    mnbt_default, seqs_default = _defaults_by_memory(dep)
    ctx_k = resolve(dep, "context_length", arch.max_position_embeddings, derived_why(arch, dep))
    if dep.context_length == AUTO_FIT:  # fitted below; everything sized before the KV config sees the derived length
        ctx_k = Knob("context_length", arch.max_position_embeddings, f"default: {derived_why(arch, dep)}")
    max_model_len = ctx_k.as_int()
    seqs_k = resolve(dep, "max_running_requests", seqs_default, "max_num_seqs by device memory")
    max_num_seqs = seqs_k.as_int()
    mnbt_k = resolve(
        dep,
        "max_num_batched_tokens",
        min(mnbt_default, max_num_seqs * max_model_len),
        "vllm serve default by device memory",
    )
    mnbt = mnbt_k.as_int()
    hybrid = None
    if arch.is_hybrid and not unified:  # one shared block pool, several KV cache groups (vllm_hybrid.py)
        hybrid = vllm_hybrid.plan_blocks(
            arch,
            replace(dep, kv_cache_dtype=dtype) if isinstance(att, FullAttention) else dep,
            attn_bytes_per_token=mla_row,
            block_knob=page_k,
            min_kernel_block=BLOCK_BY_BACKEND.get(backend, 16),
            attn_tp=attn_tp,
            mnbt=mnbt,
            max_model_len=max_model_len,
        )
        page_k, block = hybrid.block_knob, hybrid.block
        # one pool row = one token of one block: the page of every layer of the widest group
        cell = Cell(main_bytes=hybrid.bytes_per_block // block, indexer_bytes=0)
        bytes_per_block = hybrid.bytes_per_block
        notes += hybrid.notes
    util_k = resolve(dep, "gpu_memory_utilization", rules.default_utilization, rules.utilization_cite)
    util = util_k.as_float()
    w_k = weights_knob(arch, dep, with_mtp=dep.mtp)
    weights = w_k.as_int()
    graphs = rules.cudagraph_in_budget and not dep.disable_cuda_graph
    why_no_graphs = (
        "--enforce-eager: no CUDA graphs"
        if dep.disable_cuda_graph
        else f"vLLM {dep.engine_version} keeps CUDA graphs out of the KV budget (before 0.21)"
    )
    peak = (
        profile_peak(
            arch.activation,
            gpu=dep.gpu,
            tp=dep.tp,
            ep=dep.ep,
            max_num_batched_tokens=mnbt,
            max_num_seqs=max_num_seqs,
            version=parse_version(dep.engine_version),
            samples=arch.pp_stage is None or arch.pp_stage.last,
        )
        if arch.activation is not None
        else None
    )
    other_k, other_terms = _non_kv_other(arch, dep, peak, graphs=graphs, why_no_graphs=why_no_graphs)
    other = other_k.as_int()
    buffers = dsa_buffers(
        arch,
        mnbt=mnbt,
        max_num_seqs=max_num_seqs,
        spec=dep.speculative_num_draft_tokens,
        max_model_len=max_model_len,
        indexer_layers=indexer_layers,
    )
    total = dep.gpu.cuda_total_bytes
    load_error = check_gpu_memory(dep, weights=weights, free_before_load=total, free_label="CUDA total")
    requested = math.ceil(total * util)
    non_kv = weights + sum(buffers.values()) + other
    if dep.kv_cache_memory is not None:
        available = dep.kv_cache_memory
        avail_detail = "--kv-cache-memory-bytes (gpu_memory_utilization ignored)"
    else:
        available = requested - non_kv
        avail_detail = "requested − non-KV"
    startup_error = load_error
    if available <= 0 or load_error is not None:
        startup_error = load_error or (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        )
        available = 0
    num_blocks = available // bytes_per_block if bytes_per_block else 0
    if dep.max_total_tokens is not None:
        num_blocks = min(num_blocks, cdiv(dep.max_total_tokens, block))
    num_blocks, sized = vllm_knobs.override_blocks(dep, num_blocks, bytes_per_block, available)
    check = sized - bytes_per_block  # the null block is reserved before the check (get_kv_cache_configs)
    if dep.context_length == AUTO_FIT:  # --max-model-len -1: the longest length the pool holds
        longest = (
            hybrid.estimated_max_len(check, max_model_len)
            if hybrid
            else max_len_fitting(check, bytes_per_block, block, dcp)
        )
        fit = vllm_knobs.auto_fit(max_model_len, longest, check)
        max_model_len, ctx_k = fit.max_model_len, fit.knob
        startup_error = startup_error or fit.error
    per_rank_len = cdiv(max_model_len, dcp)
    # _max_memory_usage_bytes_from_groups: bytes_per_block × the blocks of one max-length request (every group)
    request_blocks = hybrid.blocks_per_request(max_model_len) if hybrid else cdiv(per_rank_len, block)
    needed = bytes_per_block * request_blocks
    if startup_error is None and needed > check:
        est = (
            hybrid.estimated_max_len(check, max_model_len)
            if hybrid
            else max_len_fitting(check, bytes_per_block, block, dcp)
        )
        startup_error = (
            "To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({gib(needed, 'vllm')} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({gib(check, 'vllm')} GiB). Based on the available memory, the "
            f"estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` "
            "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when "
            "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
            "for more details."
        )
    if max_model_len > arch.max_position_embeddings and dep.allow_long_context:
        notes.append(long_context_note(arch, dep, max_model_len))
    elif max_model_len > arch.max_position_embeddings:
        # config/model.py: refused before any memory is profiled (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)
        startup_error = (
            f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
            f"(max_position_embeddings={arch.max_position_embeddings} in model's config.json). "
            "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
        )
    rows = num_blocks * block
    logged = rows * dcp
    pools: tuple[Pool, ...] = ()
    if hybrid is not None:
        # the 'GPU KV cache size' vLLM logs for a hybrid: int(num_blocks / blocks per request × max_model_len)
        # (num_blocks // groups × block before 0.20.1)
        logged = hybrid.kv_cache_size_tokens(num_blocks, max_model_len, dep.engine_version) if num_blocks else 0
        pools = (Pool("vLLM block pool", "block", block, max(num_blocks - 1, 0), bytes_per_block, hybrid.demands),)
    knobs += [
        page_k,
        given(dep, "dcp", dcp, "1, no decode context parallelism"),
        util_k,
        w_k,
        other_k,
        ctx_k,
        seqs_k,
        mnbt_k,
        given(dep, "speculative_num_draft_tokens", dep.speculative_num_draft_tokens, "0, no speculative decoding"),
        *vllm_knobs.shown(dep),
    ]
    allocated = num_blocks * bytes_per_block
    chain = (
        Term(dep.gpu.total_label, dep.gpu.nvml_total_bytes, f"{dep.gpu.name}, catalog"),
        Term("CUDA total (torch)", total, "what vLLM's memory snapshot reads"),
        Term("requested", requested, f"ceil(CUDA total × gpu_memory_utilization {util})"),
        Term("weights per GPU", weights, w_k.origin),
        *(Term(k.removesuffix("_bytes").replace("_", " "), v, "DSA buffer, non-KV") for k, v in buffers.items()),
        *other_terms,
        Term("available KV cache memory", available, avail_detail),
        *(() if hybrid else (Term("bytes per block", bytes_per_block, f"{block} × {cell.total_bytes:,} B"),)),
        *(
            (
                Term("KV cache groups", None, "; ".join(hybrid.describe())),
                Term(
                    "bytes per block",
                    bytes_per_block,
                    hybrid.block_detail(),
                ),
            )
            if hybrid
            else ()
        ),
        Term(
            "num_blocks",
            None,
            f"{num_blocks:,} = "
            + ("num_gpu_blocks_override" if dep.num_gpu_blocks_override else "available // bytes_per_block")
            + " (block 0 is the null block)",
        ),
        Term(
            "GPU KV cache size",
            None,
            f"{logged:,} tokens = "
            + (
                f"int(num_blocks / {request_blocks:,} blocks per request × {max_model_len:,})"
                if parse_version(dep.engine_version) >= TOKENS_FROM_CONCURRENCY_SINCE
                else f"num_blocks // {hybrid.num_groups} groups × {block}"
            )
            + f"; Maximum concurrency for {max_model_len:,} tokens per request: "
            f"{num_blocks / request_blocks:.2f}x (num_blocks / blocks per request)",
        )
        if hybrid
        else Term("pool tokens per GPU", None, f"{logged:,} = num_blocks × {block} × dcp {dcp}"),
    )
    return PoolPlan(
        engine="vllm",
        engine_version=dep.engine_version,
        arch=arch,
        deployment=dep,
        knobs=tuple(knobs),
        mla_layout=layout,
        mla_bytes_per_layer=mla_row,
        main_layers=hybrid.group_size if hybrid else arch.num_layers,
        indexer_bytes_per_layer=idx_row,
        indexer_layers=sum(flags),
        indexer_rule="vLLM: index_topk_pattern or index_topk_freq/offset",
        draft_layers=mtp_layers,
        dcp=dcp,
        cell=cell,
        page_tokens=block,
        chain=chain,
        available_bytes=available,
        rows=rows,
        usable_pages=max(num_blocks - 1, 0),
        logged_tokens=logged,
        context_len=max_model_len,
        max_running_requests=max_num_seqs,
        allocated_bytes=allocated,
        memory_map=memory_map(
            nvml_total=dep.gpu.nvml_total_bytes,
            outside=("driver", dep.gpu.nvml_total_bytes - total),
            weights=weights,
            main=rows * cell.main_bytes,
            indexer=rows * cell.indexer_bytes,
            draft=rows * (cell.draft_main_bytes + cell.draft_indexer_bytes),
            available=available,
        ),
        startup_error=startup_error,
        loads_weights=load_error is None,
        notes=tuple(notes),
        kv_dtype=dtype,
        attn_tp=attn_tp,
        pools=pools,
        extras={
            "num_blocks": num_blocks,
            "bytes_per_block": bytes_per_block,
            "requested_bytes": requested,
            "non_kv_bytes": non_kv,
            "max_num_batched_tokens": mnbt,
            "max_model_len_needed_bytes": needed,
            **(
                {
                    "blocks_per_request": request_blocks,
                    "block_size": block,
                    "page_bytes": hybrid.page_bytes,
                    "kv_cache_groups": hybrid.num_groups,
                    "group_size": hybrid.group_size,
                    "state_bytes": hybrid.state_bytes,
                }
                if hybrid
                else {}
            ),
            **buffers,
        },
    )


def _non_kv_other(
    arch: ModelArch, dep: Deployment, peak: ProfilePeak | None, *, graphs: bool, why_no_graphs: str
) -> tuple[Knob, tuple[Term, ...]]:
    """non_kv_other (vLLM's non-KV memory besides the weights and the DSA buffers) and its chain terms.

    Set: the user's figure, one term. Default: the profiling run's torch peak + non-torch growth
    (kvplan.engines.vllm_profile), + the CUDA-graph estimate where vLLM budgets it (ASSUMED 1,618 MiB), + for a
    DSA model the GLM-5.3 calibration term (DSA_CALIBRATION_BYTES). A config without hidden / vocab size keeps
    the single GLM-5.3-calibrated constant.
    """
    label = "activations + non-torch + CUDA graphs" if graphs else f"activations + non-torch ({why_no_graphs})"
    graph = DEFAULT_CUDAGRAPH_ESTIMATE if graphs else 0
    if dep.non_kv_other is not None:
        k = Knob("non_kv_other", dep.non_kv_other, "set")
        return k, (Term(label, k.as_int(), "set"),)
    if peak is None:
        why = "calibrated on vllm-project/recipes PR #893 (the config gives no hidden / vocab size)"
        if not graphs:
            why += f" less the assumed CUDA-graph estimate {DEFAULT_CUDAGRAPH_ESTIMATE // MiB:,} MiB ({why_no_graphs})"
        k = Knob("non_kv_other", DEFAULT_NON_KV_OTHER - DEFAULT_CUDAGRAPH_ESTIMATE + graph, f"default: {why}")
        return k, (Term(label, k.as_int(), k.origin),)
    dsa = DSA_CALIBRATION_BYTES if arch.is_dsa else 0
    terms = [
        Term("torch peak (profiling run)", peak.torch_peak_bytes, peak.summary().split("; non-torch")[0]),
        Term("non-torch growth", peak.non_torch_bytes, f"NCCL, cuBLAS, CUDA context: {peak.non_torch_origin}"),
    ]
    if graphs:
        terms.append(Term("CUDA-graph estimate", graph, _graph_estimate_source(arch)))
    else:
        short = "--enforce-eager" if dep.disable_cuda_graph else "before 0.21"
        terms.append(Term(f"no CUDA-graph estimate ({short})", 0, why_no_graphs))
    if dsa:
        terms.append(
            Term("DSA calibration", dsa, "CALIBRATED: what the GLM-5.3 recipe point (PR #893) leaves after the terms")
        )
    parts = (
        ("calibrated on vllm-project/recipes PR #893 (DSA): " if dsa else "")
        + "profile run"
        + (" + CUDA-graph estimate (ASSUMED)" if graphs else "")
        + (" + DSA calibration term" if dsa else "")
    )
    k = Knob("non_kv_other", peak.total_bytes + graph + dsa, f"default: {parts}: {peak.summary()}")
    return k, tuple(terms)


def _graph_estimate_source(arch: ModelArch) -> str:
    """Where the assumed CUDA-graph figure comes from, said for the model planned: vLLM measures the estimate at
    start-up by capturing sample graphs (gpu_model_runner.py profile_cudagraph_memory, 'Estimated CUDA graph
    memory: ... GiB total'), so no config gives it; the one public figure kvplan holds is DeepSeek-V4-Flash's."""
    if arch.architecture.startswith("DeepseekV4"):
        return "ASSUMED: DeepSeek-V4-Flash vLLM 0.25.0 log (DEFAULT_CUDAGRAPH_ESTIMATE)"
    return (
        f"ASSUMED, one figure for every model (vLLM measures it at start-up): {DEFAULT_CUDAGRAPH_ESTIMATE // MiB:,} MiB"
        "; public logs of other models print 0.13-1.62 GiB"
    )


def max_len_fitting(check_bytes: int, bytes_per_block: int, block: int, dcp: int) -> int:
    """The largest max_model_len whose blocks fit in ``check_bytes`` (vLLM's estimate)."""
    if check_bytes < bytes_per_block or bytes_per_block == 0:
        return 0
    return check_bytes // bytes_per_block * block * dcp
