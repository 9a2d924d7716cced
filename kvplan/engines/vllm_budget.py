"""vLLM V1's KV budget on one GPU: ceil(CUDA total × gpu_memory_utilization) less the weights, the DSA buffers and
the profiling run's non-KV memory (``gpu_worker.py determine_available_memory``), the 'budget' step of
kvplan.engines.vllm.plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.common import Knob, Term, check_gpu_memory, resolve, weights_knob
from kvplan.engines.vllm_dsv4_memory import v4_gather_workspace_bytes, v4_load_buffers
from kvplan.engines.vllm_families import family_of
from kvplan.engines.vllm_profile import TRITON_TOPK_TOPP_SINCE, ProfilePeak, profile_peak
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.formats import indexer_bytes_per_token_layer
from kvplan.units import MiB
from kvplan.versions import VllmRules, parse_version

DEFAULT_NON_KV_OTHER = 6_070 * MiB
"""Peak activations + non-torch memory + the CUDA-graph estimate, beyond the weights and the DSA buffers, at the
one published GLM-5.3 figure (vllm-project/recipes PR #893: 94.46 GiB weights leave 25.94 GiB of KV per rank on
8×H200 TP8 at max_model_len 1,048,576; tests/engines/test_vllm.py derives it). The default non_kv_other is the
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
models only, so that the recipe figure is reproduced (tests/engines/test_vllm.py::test_recipe_893_calibration)."""

INDEXER_PREFILL_ENTRIES_PER_TOKEN = 576 * 2 // 132
"""vLLM sizes the indexer prefill gather buffer to fit FlashMLA-sparse's workspace: 8 entries per token × factor."""


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


@dataclass(frozen=True)
class Budget:
    """The KV budget of one GPU (``determine_available_memory``) and the non-KV memory it leaves out."""

    util_k: Knob
    w_k: Knob
    other_k: Knob
    other_terms: tuple[Term, ...]
    buffers: dict[str, int]
    total: int
    requested: int
    non_kv: int
    available: int
    avail_detail: str
    load_error: str | None
    error: str | None


NO_MEMORY = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
)
"""check_enough_kv_cache_memory's refusal of a KV budget of 0 B or less (after the null block: kvplan.engines.vllm)."""


def budget(
    arch: ModelArch,
    dep: Deployment,
    rules: VllmRules,
    *,
    mnbt: int,
    max_num_seqs: int,
    max_model_len: int,
    indexer_layers: int,
) -> Budget:
    """``determine_available_memory``: the requested share of the GPU less the non-KV memory of the profiling run."""
    util_k = resolve(dep, "gpu_memory_utilization", rules.default_utilization, rules.utilization_cite)
    w_k = _with_v4_load_buffers(arch, weights_knob(arch, dep, with_mtp=dep.mtp), mnbt)
    weights = w_k.as_int()
    graphs = rules.cudagraph_in_budget and not dep.disable_cuda_graph
    why_no_graphs = (
        "--enforce-eager: no CUDA graphs"
        if dep.disable_cuda_graph
        else f"vLLM {dep.engine_version} keeps CUDA graphs out of the KV budget (before 0.21)"
    )
    if dep.flashinfer_sampler and parse_version(dep.engine_version) >= TRITON_TOPK_TOPP_SINCE:
        raise InputError(
            f"flashinfer_sampler true: kvplan models vLLM {dep.engine_version}'s sampler as its Triton top-k/top-p "
            "kernel (from 0.17.0); FlashInfer sampling beside it is not read from the source, so it is not planned"
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
            attention_workspace_bytes=v4_gather_workspace_bytes(arch, mnbt=mnbt, max_model_len=max_model_len),
            across_nodes=dep.tp > dep.gpus_per_node,
            flashinfer_sampler=dep.flashinfer_sampler,
        )
        if arch.activation is not None
        else None
    )
    other_k, other_terms = _non_kv_other(arch, dep, peak, graphs=graphs, why_no_graphs=why_no_graphs)
    buffers = dsa_buffers(arch, mnbt=mnbt, max_num_seqs=max_num_seqs, spec=dep.speculative_num_draft_tokens,
                          max_model_len=max_model_len, indexer_layers=indexer_layers)  # fmt: skip
    total = dep.gpu.cuda_total_bytes
    load_error = check_gpu_memory(dep, weights=weights, free_before_load=total, free_label="CUDA total")
    requested = math.ceil(total * util_k.as_float())
    non_kv = weights + sum(buffers.values()) + other_k.as_int()
    if dep.kv_cache_memory is not None:
        available, avail_detail = dep.kv_cache_memory, "--kv-cache-memory-bytes (gpu_memory_utilization ignored)"
    else:
        available, avail_detail = requested - non_kv, "requested − non-KV"
    error = load_error
    if available <= 0 or load_error is not None:
        error = load_error or NO_MEMORY
        available = 0
    return Budget(util_k, w_k, other_k, other_terms, buffers, total, requested, non_kv, available, avail_detail,
                   load_error, error)  # fmt: skip


def _with_v4_load_buffers(arch: ModelArch, w_k: Knob, mnbt: int) -> Knob:
    """Estimated weights of a DeepSeek-V4 model plus the buffers its model code builds while loading
    (kvplan.engines.vllm_dsv4_memory), so the figure is vLLM's "Model loading took"; a set or measured figure is
    that line already."""
    if not w_k.origin.startswith("default: estimated"):
        return w_k
    bufs = v4_load_buffers(arch, mnbt=mnbt, last_stage=arch.pp_stage is None or arch.pp_stage.last)
    if not bufs:
        return w_k
    said = " + ".join(f"{k.removeprefix('v4_').removesuffix('_bytes')} {v:,} B" for k, v in bufs.items())
    why = f"{w_k.origin}; + DeepSeek-V4 load buffers (vLLM deepseek_v4.py DeepseekV4Model.__init__): {said}"
    return Knob("weights_per_gpu", w_k.as_int() + sum(bufs.values()), why)


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
    if said := family_of(arch).graph_estimate_source:
        return said
    return (
        f"ASSUMED, one figure for every model (vLLM measures it at start-up): {DEFAULT_CUDAGRAPH_ESTIMATE // MiB:,} MiB"
        "; public logs of other models print 0.13-1.62 GiB"
    )
