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
from kvplan.engines.backends import Backend, check_backend, check_serves, dsa_fp8_layout, platform_label
from kvplan.engines.common import (
    Cell,
    Knob,
    PoolPlan,
    Term,
    check_gpu_memory,
    given,
    memory_map,
    resolve,
    weights_knob,
)
from kvplan.engines.context import long_context_note
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention
from kvplan.models.deploy import Deployment, Gpu
from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer
from kvplan.units import GiB, MiB
from kvplan.versions import parse_version, rules_note, sglang_rules

if TYPE_CHECKING:
    from kvplan.engines.hybrid_steps import HybridSteps  # a type only: the chain loads no hybrid module

DEFAULT_RUNTIME_OVERHEAD = 1 * GiB
"""CUDA context + NCCL / custom all-reduce buffers taken before SGLang's memory baseline (assumed;
real logs show `Load weight begin. avail mem=` 1-2 GiB under the NVML total; `kvplan probe` measures it)."""


def _capacity_defaults(gpu_mem_mib: int, tp: int, capacity: str = "0.5.10") -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda-graph max_bs) by GPU memory, as the version's rules say (``capacity``)."""
    gi = 1024
    if capacity == "0.4.0":  # ServerArgs 0.4.0-0.4.6 (sgl-project/sglang#2268)
        return (2048 if gpu_mem_mib < 25_000 else 8192), 160
    if capacity == "0.4.7":
        if gpu_mem_mib > 180_000:
            return 16384, 160
        return (2048 if gpu_mem_mib < 25_000 else 8192), 160
    if capacity == "0.4.8":
        if gpu_mem_mib < 35 * gi:
            return 2048, (8 if tp < 4 else 80)
        return (8192 if gpu_mem_mib < 160 * gi else 16384), 160
    if gpu_mem_mib < 20 * gi:
        return 2048, 8
    if gpu_mem_mib < 35 * gi:
        if capacity in ("0.5.3", "0.5.5"):  # _handle_gpu_memory_settings of 0.5.3-0.5.9
            return 2048, (16 if capacity == "0.5.3" else 24) if tp < 4 else 80
        return 4096, 48 if tp < 4 else 160
    if gpu_mem_mib < 60 * gi:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_mib < 90 * gi:
        return 8192, 256 if tp < 4 else 512
    if gpu_mem_mib < 160 * gi:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def prefill_graph_batch_sizes(max_bs: int) -> tuple[int, ...]:
    """``cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes``: the prefill capture sizes up to ``max_bs``.

    >>> len(prefill_graph_batch_sizes(8192))   # 8 + 14 + 8 + 8 + 12 + 8
    58
    """
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_bs + 1, 512))
    )
    return tuple(x for x in sizes if x <= max_bs)


MEM_FRACTION_BY_TP = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
"""SGLang 0.4.0-0.4.7 ``ServerArgs.__post_init__``: mem_fraction_static by tp_size (the first row whose tp is <= tp)."""


def _mem_fraction_by_tp(tp: int, label: str = "SGLang 0.4.0-0.4.5 table by tp") -> tuple[float, str, int]:
    """The 0.4.0-0.4.5 default: a fixed table by tp, no reserve arithmetic (reserved MiB reported as 0)."""
    at, mfs = next((t, f) for t, f in MEM_FRACTION_BY_TP if tp >= t)
    return mfs, f"{label}: tp {tp} >= {at} -> {mfs}", 0


def _mem_fraction_0_4(dep: Deployment, kind: str, gpu_mem: int) -> tuple[float, str, int]:
    """The 0.4.6 and 0.4.7 defaults (``ServerArgs.__post_init__``); gpu_mem is the nvidia-smi total in MiB."""
    if kind == "by_tp_0.4.6":
        if gpu_mem <= 81920:
            return _mem_fraction_by_tp(dep.tp, f"SGLang 0.4.6, {gpu_mem:,} MiB <= 81,920: table by tp")
        mfs = (gpu_mem - 1024 * 13) / gpu_mem
        return mfs, f"SGLang 0.4.6: ({gpu_mem:,} − 13,312 MiB) / {gpu_mem:,} MiB (unrounded)", 13 * 1024
    ps = dep.tp * dep.pp
    if gpu_mem <= 81920:
        base, why, _ = _mem_fraction_by_tp(ps, f"SGLang 0.4.7, {gpu_mem:,} MiB <= 81,920: table by tp × pp")
    else:
        base, why = 0.88, f"SGLang 0.4.7: {gpu_mem:,} MiB > 81,920 -> 0.88"
    if gpu_mem > 180 * 1000 and dep.gpu.vendor == "nvidia":
        return 0.79, f"SGLang 0.4.7: {gpu_mem:,} MiB > 180,000 on CUDA -> 0.79", 0
    if gpu_mem > 96 * 1024:
        reserve = 1024 * (20 if dep.mtp else 18)
        relaxed = base + 48 * 1024 * (1 - base) / gpu_mem
        capped = (gpu_mem - reserve) / gpu_mem
        why = (
            f"SGLang 0.4.7: min({base} + 49,152 × (1 − {base}) / {gpu_mem:,}, ({gpu_mem:,} − {reserve:,}) / "
            f"{gpu_mem:,}) MiB"
        )
        return min(relaxed, capped), why, reserve
    if dep.mtp:
        return base * 0.95, why + " × 0.95 (EAGLE)", 0
    return base, why, 0


def _mem_fraction_gpu_class(dep: Deployment, gpu_mem: int, mtp_mib: int) -> tuple[float, str, int]:
    """0.4.8-0.5.2 (sgl-project/sglang#7054): reserved memory by GPU class, + EAGLE, + 4 GiB with dp attention."""
    ps = dep.tp * dep.pp
    gi = 1024
    if gpu_mem < 35 * gi:
        reserved, part = (2.8 + ps / 10) * gi, f"(2.8 + tp×pp {ps} / 10) × 1024"
    elif gpu_mem < 90 * gi:
        reserved, part = (9.5 + ps / 2) * gi, f"(9.5 + tp×pp {ps} / 2) × 1024"
    elif gpu_mem < 160 * gi:
        reserved, part = (12 + ps / 2) * gi, f"(12 + tp×pp {ps} / 2) × 1024"
    else:
        reserved, part = 32.0 * gi, "32 × 1024"
    parts = [part]
    if dep.mtp:
        reserved += mtp_mib
        parts.append(f"EAGLE/MTP {mtp_mib}")
    if dep.dp_attention > 1:
        reserved += 4 * gi
        parts.append("dp attention 4096")
    mfs = round((gpu_mem - reserved) / gpu_mem, 3)
    why = f"round(({gpu_mem:,} MiB − {reserved:,g} MiB reserved) / {gpu_mem:,} MiB, 3); reserved = " + " + ".join(parts)
    return mfs, why, int(reserved)


def default_mem_fraction(
    dep: Deployment, *, chunk: int, max_bs: int, version: str, mla: bool = True
) -> tuple[float, str, int]:
    """SGLang's reserve heuristic: (mem_fraction_static, explanation, reserved MiB), as the version's rules say.

    The prefill-graph part (``memory_hook.reserve_for_graph_mb``) is 1.5 × 1024 MiB with an MLA backend, else
    ``len(prefill bs) × 8`` with the prefill graph's max_bs = chunked_prefill_size (capped by max_total_tokens).
    With ``disable_cuda_graph`` neither the decode graph nor the prefill graph is reserved (0.5.10 and later;
    0.5.3-0.5.9 always charged ``max_bs × 2``). Before 0.5.3 the heuristic is a table (``rules.mem_fraction``).
    """
    rules = sglang_rules(version)
    gpu_mem = dep.gpu.nvml_total_bytes // MiB
    if rules.mem_fraction == "by_tp":
        return _mem_fraction_by_tp(dep.tp)
    if rules.mem_fraction in ("by_tp_0.4.6", "by_tp_0.4.7"):
        return _mem_fraction_0_4(dep, rules.mem_fraction, gpu_mem)
    if rules.mem_fraction == "gpu_class":
        return _mem_fraction_gpu_class(dep, gpu_mem, rules.mtp_reserve_mib)
    old = rules.mem_fraction == "reserve_0.5.3"
    decode_graph = not dep.disable_cuda_graph
    parts: list[str] = []
    if old:
        reserved = 512 + max(chunk, 2048) * 1.5 + max_bs * 2 + dep.tp * dep.pp / 8 * 1024
        parts.append(f"512 + max({chunk}, 2048)×1.5 + {max_bs}×2 + tp{dep.tp}×pp{dep.pp}/8×1024")
    else:
        reserved = 512 + max(chunk, 2048) * 1.5 + dep.tp * dep.pp / 8 * 1024
        parts.append(f"512 + max({chunk}, 2048)×1.5 + tp{dep.tp}×pp{dep.pp}/8×1024")
        if decode_graph:
            reserved += max_bs * 2
            parts.append(f"decode graph {max_bs}×2")
    if dep.dp_attention > 1:
        dp_terms = max_bs * dep.dp_attention * 3 + (max_bs * dep.dp_attention * 1.5 if max_bs > 300 else 0)
        reserved += dp_terms
        parts.append(f"dp-attention {dp_terms:g}")
    prefill_graph = decode_graph and dep.dcp == 1 and dep.pp == 1 and rules.prefill_graph
    if prefill_graph and mla:
        reserved += 1536
        parts.append("MLA prefill graph 1536")
    elif prefill_graph:
        graph_bs = chunk if dep.max_total_tokens is None else min(chunk, dep.max_total_tokens)
        n = len(prefill_graph_batch_sizes(graph_bs))
        reserved += n * 8
        parts.append(f"prefill graph {n} sizes × 8")
    elif rules.prefill_graph:
        parts.append("no prefill graph (dcp > 1 or pp > 1 disables it)" if decode_graph else "")
    if gpu_mem > 60 * 1024 and reserved < 10 * 1024:  # the sum above is not the figure when the floor binds
        reserved = 10 * 1024
        parts.append("raised to the 10,240 floor over 60 GiB")
    if rules.mtp_reserve_mib and dep.mtp:
        reserved += rules.mtp_reserve_mib
        parts.append(f"EAGLE/MTP {rules.mtp_reserve_mib}")
    mfs = round((gpu_mem - reserved) / gpu_mem, 3)
    why = f"round(({gpu_mem:,} MiB − {reserved:,g} MiB reserved) / {gpu_mem:,} MiB, 3); reserved = " + " + ".join(
        p for p in parts if p
    )
    return mfs, why, int(reserved)


_MHA_DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
"""--kv-cache-dtype for MHATokenToKVPool (``server_args`` choices auto, bf16, fp16, fp8_e4m3, fp8_e5m2)."""

PAGE_BY_BACKEND = {"trtllm_mha": 64, "flashmla": 64, "cutlass_mla": 128, "trtllm_mla": 64}
"""Backends that force a page size when none is given (docs/engines.md); every other backend keeps 1."""


def _mha_layout(arch: ModelArch, dep: Deployment, version: str) -> tuple[str, str, MlaLayout | None, list[Knob]]:
    """kv dtype and backend of a full-attention model (no MLA row layout)."""
    gpu = dep.gpu
    check_serves("sglang", version, gpu, dsa=False, mha=True)
    knobs: list[Knob] = []
    if dep.kv_cache_dtype == "auto":
        dtype = "bfloat16"
        knobs.append(Knob("kv_cache_dtype", dtype, "default: auto = the model dtype (bf16)"))
    elif dep.kv_cache_dtype in _MHA_DTYPES:
        dtype = _MHA_DTYPES[dep.kv_cache_dtype]
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    else:
        raise PlanError(f"kv_cache_dtype {dep.kv_cache_dtype} is an MLA row format: a full-attention model "
                        f"takes {', '.join(['auto', *_MHA_DTYPES])}")  # fmt: skip
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: this model has full attention (MHA / GQA)")
    if dep.attention_backend:
        backend = dep.attention_backend
        knobs.append(Knob("attention_backend", backend, "set"))
        check_backend("sglang", version, gpu, backend, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    else:
        backend, why = sglang_defaults.mha_backend(arch, dep, sglang_rules(version))
        knobs.append(Knob("attention_backend", backend, f"default: {why}"))
        _check_default(version, gpu, backend, why, dsa=False, fp8=dtype.startswith("fp8"), mha=True)
    return dtype, backend, None, knobs


def _check_default(version: str, gpu: Gpu, backend: str, why: str, **kind: bool) -> tuple[Backend, ...]:
    """The engine's own default, validated like an explicit backend; where the engine picks one that does not
    run here, it does not start, and the message says what it picked and why."""
    try:
        return check_backend("sglang", version, gpu, backend, **kind)
    except PlanError as e:
        raise PlanError(f"the engine does not start: SGLang {version} picks {backend} by default ({why}), {e}") from e


def _layout(arch: ModelArch, dep: Deployment, version: str) -> tuple[str, str, MlaLayout | None, list[Knob]]:
    """kv dtype, backend and MLA row layout, resolved as SGLang does (backends checked per GPU)."""
    knobs: list[Knob] = []
    gpu, sm = dep.gpu, dep.gpu.sm
    if not arch.is_mla:
        return _mha_layout(arch, dep, version)
    check_serves("sglang", version, gpu, dsa=arch.is_dsa)
    requested = dep.kv_cache_dtype
    if requested in ("auto",):
        # torch.cuda.get_device_capability(): major 9 on gfx942 under HIP, so never fp8 there
        dtype = "fp8_e4m3" if arch.is_dsa and gpu.vendor == "nvidia" and sm >= 100 else "bfloat16"
        knobs.append(Knob("kv_cache_dtype", dtype, f"default: auto on {platform_label(gpu)} -> {dtype}"))
    else:
        dtype = "bfloat16" if requested in ("bf16", "bfloat16") else "fp8_e4m3"
        knobs.append(Knob("kv_cache_dtype", dtype, "set"))
    fp8 = dtype == "fp8_e4m3"
    if dep.attention_backend:
        backend = dep.attention_backend
        knobs.append(Knob("attention_backend", backend, "set"))
        used = check_backend("sglang", version, gpu, backend, dsa=arch.is_dsa, fp8=fp8)
    else:
        backend, why = sglang_defaults.mla_backend(arch, dep, sglang_rules(version), dtype)
        knobs.append(Knob("attention_backend", backend, f"default: {why}"))
        used = _check_default(version, gpu, backend, why, dsa=arch.is_dsa, fp8=fp8)
    if dep.mla_layout:
        layout = MlaLayout(dep.mla_layout)
        knobs.append(Knob("mla_layout", layout.value, "set"))
    else:
        if not fp8:
            layout = MlaLayout.BF16
        elif not arch.is_dsa:
            layout = MlaLayout.FP8_RAW
        elif sglang_rules(version).dsa_fp8_row_any_backend:
            layout = MlaLayout.FP8_DS_MLA  # NSATokenToKVPool: 656 B (kv_lora_rank + scales + bf16 rope) on any backend
        else:
            layout = dsa_fp8_layout(used, gpu)
        knobs.append(Knob("mla_layout", layout.value, f"default: {dtype} with {backend}"))
    return dtype, backend, layout, knobs


SPEC_MAX_RUNNING_REQUESTS = 48
"""max_running_requests when speculative decoding (EAGLE, EAGLE3, NEXTN) runs and none is given: SGLang 0.5.23
``arg_groups/speculative_hook.py`` ``_handle_eagle_family`` ("Max running requests is reset to 48 for speculative
decoding."); ``ServerArgs.__post_init__`` from the 0.4.5 wheel (``if self.max_running_requests is None:
self.max_running_requests = 48`` under EAGLE); the 0.4.4 wheel has no such default."""
SPEC_RUNNING_SINCE = (0, 4, 5)


def plan_pools(arch: ModelArch, dep: Deployment, hybrid: HybridSteps | None) -> PoolPlan:
    """The memory chain and the token pool; ``hybrid`` (a hybrid model's full-attention layers as ``arch``) adds
    SGLang's hybrid steps: the Mamba state pool taken out of the budget first, the SWA pool sized beside the full
    pool, running requests capped by the state slots (kvplan.engines.sglang_hybrid, each step cited there)."""
    version = dep.engine_version
    rules = sglang_rules(version)
    notes: list[str] = []
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
    dtype, backend, layout, knobs = _layout(arch, dep, version)
    dcp = dep.dcp
    attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
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

    if arch.is_dsa and dep.gpu.vendor == "nvidia":
        page_default, page_why = 64 * arch.index_kpool, "DSA on CUDA: 64 × index_kpool"
    else:
        page_default = PAGE_BY_BACKEND.get(backend, 1)
        page_why = f"{backend} backend" + (" forces it" if page_default > 1 else " keeps 1")
    page_k = resolve(dep, "page_size", page_default, page_why)
    page = page_k.as_int()
    if arch.is_dsa and dep.gpu.vendor == "nvidia" and page // arch.index_kpool != 64:
        raise PlanError(
            f"DSA requires 64-token physical pages, got page_size={page} with "
            f"index_kpool={arch.index_kpool} (SGLang asserts this at startup)"
        )

    # ---- cell size
    att = arch.attention
    if layout is None and isinstance(att, FullAttention):
        # MHATokenToKVPool: K (head_dim) and V (v_head_dim) for the kv heads of this attention-TP rank
        mla_row = att.bytes_per_token(attn_tp, dtype)
    else:
        assert layout is not None
        mla_row = layout.bytes_per_token_layer(arch.kv_lora_rank, arch.qk_rope_head_dim)
    kv_size = 1 if dtype.startswith("fp8") else 2
    if rules.cell_raw_mla_row and layout is not None:
        # 0.5.9 charged (kv_lora_rank + rope) × kv_size whatever the allocated row, and the indexer on all layers
        cell_row = (arch.kv_lora_rank + arch.qk_rope_head_dim) * kv_size
        if cell_row != mla_row:
            notes.append(
                f"SGLang 0.5.9 budgets {cell_row} B/layer while the pool allocates {mla_row} B/layer rows: "
                "the pool over-commits memory"
            )
        indexer_layers = arch.num_layers if arch.is_dsa and rules.indexer_all_layers else arch.full_indexer_layers
        rule = f"{rules.label}: indexer on every layer" if rules.indexer_all_layers else arch.indexer_rule.value
    else:
        cell_row = mla_row
        indexer_layers = arch.full_indexer_layers
        rule = arch.indexer_rule.value
    idx_row = indexer_bytes_per_token_layer(arch.index_head_dim, arch.index_kpool) if arch.is_dsa else 0
    main = cell_row * arch.num_layers
    budget_indexer_layers = indexer_layers if rules.dsa_indexer_in_budget else 0
    if arch.is_dsa and not rules.dsa_indexer_in_budget:
        notes.append(
            f"SGLang {rules.label} leaves the indexer K ({idx_row} B × {indexer_layers} layers per token) out of the "
            "KV budget and allocates it on top: the pool over-commits memory (fixed by sgl-project/sglang#11309)"
        )
    indexer = idx_row * budget_indexer_layers * (dcp if rules.dcp else 1)
    draft_layers = arch.num_mtp_layers if dep.mtp else 0
    draft_main = draft_idx = 0
    if draft_layers:
        draft_main = main * draft_layers // arch.num_layers * (dcp if rules.dcp else 1)
        draft_idx = idx_row * draft_layers * (dcp if rules.dcp else 1)
    cell = Cell(
        main_bytes=main,
        indexer_bytes=indexer,
        draft_main_bytes=draft_main,
        draft_indexer_bytes=draft_idx,
    )

    # ---- memory before and after the weights (checked before any arithmetic uses them)
    overhead_k = resolve(dep, "runtime_overhead", DEFAULT_RUNTIME_OVERHEAD, "assumed CUDA context + NCCL")
    overhead = overhead_k.as_int()
    pre_k = resolve(
        dep,
        "pre_load_free",
        dep.gpu.cuda_total_bytes - overhead,
        "CUDA total of the GPU − runtime_overhead",
    )
    pre = pre_k.as_int()
    w_k = weights_knob(arch, dep, with_mtp=dep.mtp)
    weights = w_k.as_int()
    load_error = check_gpu_memory(dep, weights=weights, free_before_load=pre, free_label="pre-load free memory")

    # ---- memory fraction
    gpu_mem_mib = dep.gpu.nvml_total_bytes // MiB
    chunk_default, bs_default = _capacity_defaults(gpu_mem_mib, dep.tp, rules.capacity)
    chunk_k = resolve(dep, "chunked_prefill_size", chunk_default, f"{gpu_mem_mib:,} MiB GPU")
    max_bs = dep.cuda_graph_max_bs or bs_default
    if dep.max_running_requests is not None and dep.cuda_graph_max_bs is None:
        max_bs = min(max_bs, dep.max_running_requests)
    mfs_default, mfs_why, reserved_mib = default_mem_fraction(
        dep,
        chunk=chunk_k.as_int(),
        max_bs=max_bs,
        version=version,
        mla=arch.is_mla,
    )
    mfs_k = resolve(dep, "mem_fraction_static", *sglang_defaults.for_vlm(arch, mfs_default, mfs_why))
    if arch.is_dsa and rules.dsa_mem_fraction is not None:
        # 0.5.3 server_args: "Setting mem fraction static to 0.8 for DeepSeek NSA." (over any --mem-fraction-static)
        mfs_k = Knob("mem_fraction_static", rules.dsa_mem_fraction, f"forced by SGLang {rules.label} for NSA models")
    mfs = mfs_k.as_float()

    # ---- available bytes (SGLang computes in GiB floats)
    pre_gib = pre / GiB
    free_after_gib = (pre - weights) / GiB
    slack_gib = pre_gib * (1 - mfs)
    rest_gib = free_after_gib - slack_gib
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

    swa_rows = 0
    if hybrid is not None:
        rows, swa_rows = hybrid.pool_tokens(available, cell.total_bytes, dtype, attn_tp, page)
    else:
        rows = available // cell.total_bytes // page * page if cell.total_bytes else 0
    capped = False
    if dep.max_total_tokens is not None and dep.max_total_tokens < rows:
        rows = dep.max_total_tokens // page * page
        if hybrid is not None:  # calculate_pool_sizes_from_max_tokens: the SWA pool follows the capped full pool
            swa_rows = hybrid.swa_tokens_for(rows, page)
        capped = True
    logged = rows * dcp
    if rows == 0 and startup_error is None:
        startup_error = "the KV budget holds less than one page: SGLang cannot build a pool"
    if hybrid is not None and startup_error is None:
        startup_error = hybrid.check_swa_pool(swa_rows, page)

    # ---- what is really allocated (padding rows and pages are outside cell_size)
    index_buf_size = (rows + page) * dcp - page if rows else 0
    index_pages = (index_buf_size + page + 1) // page if rows else 0
    index_page_bytes = (
        page // arch.index_kpool * (arch.index_head_dim + arch.index_head_dim // 128 * 4) if arch.is_dsa else 0
    )
    mla_alloc = (rows + page) * mla_row * arch.num_layers if rows else 0
    idx_alloc = index_pages * index_page_bytes * indexer_layers
    draft_alloc = 0
    if draft_layers and rows:
        d_size, d_page = rows * dcp, page * dcp
        d_pages = (d_size + d_page + 1) // d_page
        draft_alloc = (d_size + d_page) * mla_row * draft_layers + d_pages * d_page * idx_row * draft_layers
    # hybrids: SWAKVPool's SWA buffers (swa_rows + page rows) and MambaPool's (max_mamba_cache_size + 1) slots
    swa_alloc = hybrid.swa_alloc_bytes(swa_rows, dtype, attn_tp, page) if hybrid is not None and swa_rows else 0
    state_alloc = hybrid.state_alloc_bytes(state_slots, attn_tp) if hybrid is not None and state_slots else 0
    allocated = mla_alloc + idx_alloc + draft_alloc + swa_alloc + state_alloc
    hybrid_extras = {"swa_tokens": swa_rows, "swa_alloc_bytes": swa_alloc, "max_mamba_cache_size": state_slots}
    hybrid_extras["mamba_alloc_bytes"] = state_alloc

    # ---- requests
    ctx_k = resolve(dep, "context_length", arch.max_position_embeddings, "max_position_embeddings")
    context_len = ctx_k.as_int()
    if context_len > arch.max_position_embeddings and dep.allow_long_context:
        notes.append(long_context_note(arch, dep, context_len))
    elif context_len > arch.max_position_embeddings:
        # configs/model_config.py: refused while the model config is built, before any memory is profiled
        startup_error = (
            f"User-specified context_length ({context_len}) is greater than the derived context_length "
            f"({arch.max_position_embeddings}). This may lead to incorrect model outputs or CUDA errors. "
            "To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        )
    estimated = min(max(int(rows / context_len * 512), 2048), 4096)
    state_cap = hybrid.running_cap(state_slots) if hybrid is not None and rows else None
    if dep.max_running_requests is not None:
        mrr = min(max(1, dep.max_running_requests // dep.dp_attention), rows // 2)
        mrr_k = Knob("max_running_requests", mrr, "set")
        if state_cap is not None and state_cap < mrr:
            mrr = state_cap
        elif mrr < dep.max_running_requests // dep.dp_attention:
            notes.append(
                f"max_running_requests was reduced from the requested {dep.max_running_requests} "
                f"to {mrr} (per dp worker) due to the available KV cache capacity"
            )
    elif dep.mtp and hybrid is None and parse_version(version) >= SPEC_RUNNING_SINCE:
        mrr = min(max(1, SPEC_MAX_RUNNING_REQUESTS // dep.dp_attention), rows // 2)
        mrr_k = Knob(
            "max_running_requests",
            mrr,
            f'default: {SPEC_MAX_RUNNING_REQUESTS} with speculative decoding (per dp worker, at most rows // 2): "Max'
            ' running requests is reset to 48 for speculative decoding."',
        )
    else:
        mrr = min(estimated, rows // 2)
        mrr_k = Knob(
            "max_running_requests",
            mrr,
            "default: min(clamp(int(rows / context_len × 512), 2048, 4096), rows // 2)",
        )
        if state_cap is not None and state_cap < mrr:
            mrr = state_cap
    if state_cap is not None and hybrid is not None:
        mrr_k, capped_said, cap_error = hybrid.cap_note(mrr_k, mrr, state_cap, state_slots)
        notes += capped_said
        startup_error = startup_error or cap_error
    draft_tokens = dep.speculative_num_draft_tokens
    extra = 4 + draft_tokens
    if draft_tokens and page > 1:
        extra = max(extra, page * dcp - 1)
    req_to_token = (mrr + 1) * (context_len + extra) * 4
    if logged and logged < context_len:
        notes.append(f"KV pool holds {logged:,} tokens, fewer than --context-length {context_len:,}.")
    if capped:
        notes.append(f"--max-total-tokens {dep.max_total_tokens} caps the profiled pool")

    knobs += [
        page_k,
        chunk_k,
        Knob("cuda_graph_max_bs", max_bs, "set" if dep.cuda_graph_max_bs else "default: by GPU memory and tp"),
        mfs_k,
        overhead_k,
        pre_k,
        w_k,
        ctx_k,
        mrr_k,
        given(dep, "dcp", dcp, "1, no decode context parallelism"),
        given(dep, "speculative_num_draft_tokens", draft_tokens, "0, no speculative decoding"),
    ]
    slack_bytes = int(slack_gib * GiB)
    chain = (
        Term(dep.gpu.total_label, dep.gpu.nvml_total_bytes, f"{dep.gpu.name}, catalog"),
        Term("CUDA-visible total", dep.gpu.cuda_total_bytes, "NVML total − driver reserve"),
        Term("pre-load free", pre, pre_k.origin),
        Term("weights per GPU", weights, w_k.origin),
        Term("free after weights", pre - weights, "pre-load free − weights"),
        Term(
            "slack (non-KV reserve)",
            slack_bytes,
            f"pre-load free × (1 − mem_fraction_static {mfs}); holds req_to_token, CUDA graphs"
            + (", indexer logits" if arch.has_indexer else ""),
        ),
        Term("available for the KV pool", available, "free after weights − slack"),
        Term("cell", cell.total_bytes, "bytes per pool row"),
        Term("pool rows per GPU", None, f"{rows:,} = available // cell // {page} × {page}"),
        Term("logged max_total_num_tokens", None, f"{logged:,} = rows × dcp {dcp}"),
    )
    return PoolPlan(
        engine="sglang",
        engine_version=version,
        arch=arch,
        deployment=dep,
        knobs=tuple(knobs),
        mla_layout=layout,
        mla_bytes_per_layer=cell_row,
        main_layers=arch.num_layers,
        indexer_bytes_per_layer=idx_row,
        indexer_layers=indexer_layers,
        indexer_rule=rule,
        draft_layers=draft_layers,
        dcp=dcp,
        cell=cell,
        page_tokens=page,
        chain=chain,
        available_bytes=available,
        rows=rows,
        usable_pages=rows // page,
        logged_tokens=logged,
        context_len=context_len,
        max_running_requests=mrr,
        allocated_bytes=allocated,
        memory_map=memory_map(
            nvml_total=dep.gpu.nvml_total_bytes,
            outside=("driver+context", dep.gpu.nvml_total_bytes - pre),
            weights=weights,
            main=mla_alloc + swa_alloc + state_alloc,
            indexer=idx_alloc,
            draft=draft_alloc,
            available=available + state_alloc,
        ),
        startup_error=startup_error,
        loads_weights=load_error is None,
        notes=tuple(notes),
        kv_dtype=dtype,
        attn_tp=attn_tp,
        extras={
            "mem_fraction_reserved_mib": reserved_mib,
            "index_buf_size": index_buf_size,
            "index_pages_per_layer": index_pages,
            "mla_alloc_bytes": mla_alloc,
            "indexer_alloc_bytes": idx_alloc,
            "draft_alloc_bytes": draft_alloc,
            "req_to_token_bytes": req_to_token,
            "slack_bytes": slack_bytes,
            **(hybrid_extras if hybrid is not None else {}),
        },
    )
