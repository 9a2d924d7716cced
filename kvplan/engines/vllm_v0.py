"""vLLM V0 (0.6.0-0.8.x): deployment -> pool plan, as ``worker/worker.py determine_num_available_blocks`` sizes it."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import (
    Cell,
    Knob,
    PoolPlan,
    StartupRefusal,
    Term,
    check_gpu_memory,
    memory_map,
    resolve,
    weights_knob,
)
from kvplan.engines.context import derived_why, long_context_note
from kvplan.engines.vllm_profile import CUBLAS_WORKSPACE_BYTES, non_torch_bytes
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import kv_dtype_bytes
from kvplan.models.deploy import Deployment
from kvplan.units import GiB, MiB
from kvplan.versions import VllmRules, rules_note

V0_SCATTER_BYTES_PER_LOGIT = 2 + 4 + 4 + 8 + 1 + 4 + 4 + 1 + 4
"""Live per (prompt, vocab entry) at the scatter that ends ``_apply_top_k_top_p`` (layers/sampler.py, read in the
0.6.4 wheel, the same code to 0.8.5): the model-dtype logits (2), their float32 copy (4), ``logits_sort`` (4),
``logits_idx`` int64 (8), ``top_k_mask`` bool (1), ``probs_sort`` (4), ``probs_sum`` (4), ``top_p_mask`` bool (1)
and the scatter's output (4): 32 B."""

V0_SORT_BYTES_PER_LOGIT = 2 + 4 + 8 + 4 + 8 + 4 + 8
"""Live per (prompt, vocab entry) inside ``logits.sort()`` at the start of ``_apply_top_k_top_p``: the model-dtype
logits (2) and their float32 copy (4) (read), then torch.sort's segmented radix sort, ASSUMED from PyTorch's CUDA
sort (not read): int64 iota indices in (8), the sorted keys and indices out (4 + 8) and the radix sort's alternate
key / value buffers (4 + 8): 38 B. With it the sampler side of vllm-project/vllm#10511's 'vllm serve
meta-llama/Meta-Llama-3-8B' on an H100 (256 prompts × 128,256 vocab, 8,192 tokens) is 1.26 GiB, the logged
'PyTorch activation peak memory 1.26GiB' (32 B alone gives 1.07 GiB)."""

V0_SAMPLER_BYTES_PER_LOGIT = max(V0_SCATTER_BYTES_PER_LOGIT, V0_SORT_BYTES_PER_LOGIT)
"""The V0 Sampler's peak per (prompt, vocab entry): the sort (38 B, partly ASSUMED), above the scatter (32 B)."""

DEFAULT_BLOCK_SIZE = 16
"""CacheConfig block_size on CUDA when --block-size is not given (V0 arg_utils)."""

FORWARD_HIDDEN_TENSORS_V0 = 3
"""[T, hidden] tensors live with a dense MLP's gate_up (2 × I) and act (I) outputs at the V0 forward pass's peak, read
from model_executor/models/llama.py (0.6.4): the layer's input (still held by LlamaModel's loop), the residual and
the post-attention normed hidden states (fused_add_rms_norm works in place): T × (3 × I/tp + 3 × hidden) elements.
vllm-project/vllm#10517's two 0.6.4 starts of Llama-3.1-8B (20,000 and 29,000 tokens, forward-dominated) log 2.07
and 2.99 GiB over the weights; this shape gives 2.09 and 3.02 GiB with the cuBLAS workspace."""

FLASHMLA_BLOCK_SIZE = 64
"""V0 FlashMLA's only block size (0.8.0 on, Hopper)."""

DEFAULT_MAX_NUM_SEQS = 256
"""V0 EngineArgs.max_num_seqs (0.6.0-0.8.5)."""

MOE_CHUNK_TOKENS = 32768
"""envs.VLLM_FUSED_MOE_CHUNK_SIZE default (0.6.0-0.8.5): fused_moe processes at most this many tokens at a time."""

SWAP_SPACE_BYTES = 4 * GiB
"""EngineArgs.swap_space 4 GiB: '# CPU blocks' = swap_space_bytes // block bytes."""

NON_TORCH_TP1_BYTES = 16 * GiB // 100
"""ASSUMED: V0 'non_torch_memory takes 0.16GiB' at TP1 on an H100 (vllm-project/vllm#12126, vLLM 0.7 dev, a
multimodal model; kubernetes-sigs/gateway-api-inference-extension#550, vLLM 0.8.1, shows the same 0.16 GiB).
TP above 1: the V1 0.19.0 H100 figures (kvplan.engines.vllm_profile.non_torch_bytes), not checked on a V0 log."""

CUDA_CONTEXT_BYTES = 500 * MiB
"""ASSUMED: the CUDA context, which only 0.6.4 counts (its non-torch is every non-torch byte on the GPU):
300-500 MiB per process with lazy module loading (shared/reference/peers-models-gpus.md C.5); the upper end."""


def _non_torch(tp: int) -> tuple[int, str]:
    if tp == 1:
        return NON_TORCH_TP1_BYTES, "ASSUMED 0.16 GiB: V0 TP1 H100 logs (vllm-project/vllm#12126)"
    nt, origin = non_torch_bytes(tp)
    return nt, f"ASSUMED from V1: {origin}"


def _mnbt_default(rules: VllmRules, dep: Deployment, max_model_len: int) -> tuple[int, str]:
    """V0 arg_utils + SchedulerConfig: chunked prefill on by default only past 32K tokens (no LoRA, no sliding
    window, no speculation: kvplan plans none), then v0_chunked_tokens; else max(max_model_len, 2048)."""
    if max_model_len > 32768:
        return rules.v0_chunked_tokens, f"chunked prefill (on by default past 32K): {rules.v0_chunked_tokens}"
    return max(max_model_len, 2048), "no chunked prefill (max_model_len <= 32K): max(max_model_len, 2048)"


def _row(arch: ModelArch, dep: Deployment, rules: VllmRules) -> tuple[int, str, int, str]:
    """(bytes per token per layer on one rank, kv dtype, attention tp, what it is)."""
    if arch.is_dsa:
        raise PlanError(
            f"vLLM {dep.engine_version} (V0) does not serve DSA models (DeepSeek-V3.2 / GLM-5 sparse attention came "
            "with the V1 engine): plan it with engine_version 0.9.0 or later"
        )
    dtype = dep.kv_cache_dtype
    if dtype not in ("auto", "bf16", "bfloat16", "fp16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"):
        raise PlanError(f"kv_cache_dtype {dtype}: vLLM V0 takes auto, bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2")
    elem = kv_dtype_bytes(dtype)
    attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
    att = arch.attention
    if not arch.is_mla:  # K + V of the kv heads per rank (cache_engine.py)
        heads = att.kv_heads_per_rank(attn_tp)
        return att.row_bytes(attn_tp, dtype, None), dtype, attn_tp, f"{heads} kv heads per rank"
    if not rules.v0_mla:
        raise PlanError(
            f"vLLM {dep.engine_version} (V0): kvplan has read V0's MLA cache only from 0.7.3 (use_mla is absent from "
            "the 0.7.0 wheel; before it DeepSeek cached full K and V heads); use engine_version 0.7.3 or later"
        )
    latent = arch.kv_lora_rank + arch.qk_rope_head_dim
    if rules.v0_mla == "aligned":
        per_256 = 256 // elem
        latent = -(-latent // per_256) * per_256
    return latent * elem, dtype, attn_tp, f"MLA latent {latent} elements ({rules.v0_mla})"


def moe_buffers(arch: ModelArch, rules: VllmRules, *, tokens: int, tp: int, ep: int) -> int:
    """Bytes of V0 fused_moe's intermediate caches in one forward call (0 for a dense model).

    ``fused_experts_impl`` (read in the 0.6.4, 0.7.3 and 0.8.5 wheels): M = min(tokens, VLLM_FUSED_MOE_CHUNK_SIZE
    32,768) rows, N = 2 × expert width per rank (w1), K = hidden: cache1 M × top_k × N, cache2 M × top_k × N / 2,
    cache3 M × top_k × K; from 0.8.0 cache1 and cache3 share one M × top_k × max(N, K) buffer.
    """
    dims = arch.activation
    if dims is None or not dims.is_moe:
        return 0
    m = min(tokens, MOE_CHUNK_TOKENS)
    n = 2 * (dims.expert_intermediate // (1 if ep > 1 else tp))
    k = dims.hidden_size
    shared = max(n, k) if rules.v0_moe_cache13 else n + k
    return m * dims.experts_per_token * (shared + n // 2) * dims.dtype_bytes


def activation_peak(
    arch: ModelArch, rules: VllmRules, *, tp: int, ep: int, max_num_batched_tokens: int, max_num_seqs: int
) -> tuple[int, str]:
    """(bytes, how) of the V0 profile run's torch peak increase on one GPU; 0 without the model's dimensions.

    ``max(forward pass, sampler + hidden states kept) + cuBLAS workspace``: the forward pass is V0's dense shape
    ``T × (3 × I/tp + 3 × hidden)`` (FORWARD_HIDDEN_TENSORS_V0) plus V0's fused-MoE caches; the sampler side is
    ``prompts × vocab × 38 B`` (V0_SAMPLER_BYTES_PER_LOGIT) + ``(T + prompts) × hidden`` kept.
    """
    dims = arch.activation
    if dims is None:
        return 0, "no hidden / vocab size in the config: profile run not estimated (0 B)"
    t = max_num_batched_tokens
    s = min(max_num_seqs, t)
    d = dims.dtype_bytes
    h = dims.hidden_size
    sampler = s * dims.vocab_size * V0_SAMPLER_BYTES_PER_LOGIT + (t + s) * h * d
    moe = moe_buffers(arch, rules, tokens=t, tp=tp, ep=ep)
    forward = t * (3 * (dims.dense_intermediate // tp) + FORWARD_HIDDEN_TENSORS_V0 * h) * d + moe
    side = "sampler" if sampler >= forward else "forward pass"
    moe_said = f" + fused-MoE caches {moe:,} B" if moe else ""
    how = (
        f"{side}: max(sampler {s:,} prompts × vocab {dims.vocab_size:,} × {V0_SAMPLER_BYTES_PER_LOGIT} B + hidden "
        f"kept (sort working memory ASSUMED), forward {t:,} tokens{moe_said}) "
        f"+ cuBLAS {CUBLAS_WORKSPACE_BYTES // MiB} MiB (FITTED on V1)"
    )
    return max(sampler, forward) + CUBLAS_WORKSPACE_BYTES, how


# The V0 arithmetic, on one GPU:
#
# Read from the vllm 0.6.0, 0.6.2, 0.6.3, 0.6.4, 0.6.5, 0.6.6, 0.7.0, 0.7.3, 0.8.0 and 0.8.5 wheels (the rules
# per sub-range live in kvplan/versions.py, rows 0.6.0-0.6.3 ... 0.8.x). On one GPU:
#
#     block bytes    = layers × block_size × (K + V) × kv_heads_per_rank × head_size × dtype   (cache_engine.py)
#                      MLA (0.7.3+): layers × block_size × (kv_lora_rank + rope) × dtype, no V (0.7.3: rounded up
#                      to 256 B per token)
#     non-KV         = 0.6.0-0.6.3: init free − free after profile_run (weights + the allocator's cache of the run
#                                    + non-torch growth)
#                      0.6.4:       torch allocated peak (weights included) + all non-torch memory (CUDA context too)
#                      0.6.5-0.8.x: weights + torch peak increase + non-torch increase (utils.memory_profiling)
#     num_gpu_blocks = int((total × gpu_memory_utilization − non-KV) // block bytes)     ('# GPU blocks', 0.7+: '# cuda
#                      blocks'); every block is usable (V0 has no null block); CPU blocks = swap_space 4 GiB // block
#
# The profile run (worker/model_runner.py profile_run): max_num_seqs prompts totalling max_num_batched_tokens tokens,
# one sampled token each with top_p 0.99 and top_k vocab − 1, so the V0 Sampler sorts the logits. Its torch peak is
# ``max(forward pass, sampler + hidden states kept) + cuBLAS workspace``: the sampler's bytes per (prompt, vocab
# entry) read from layers/sampler.py ``_apply_top_k_top_p`` with torch.sort's working memory assumed
# (V0_SAMPLER_BYTES_PER_LOGIT), the forward pass's live tensors read from models/llama.py (FORWARD_HIDDEN_TENSORS_V0)
# and fused_moe (moe_buffers), the cuBLAS workspace the V1 profile model's fitted 32 MiB
# (kvplan.engines.vllm_profile). The non-torch figures are assumptions; the plan says each.
def plan(arch: ModelArch, dep: Deployment, rules: VllmRules) -> PoolPlan:
    """The pool V0 builds on each GPU (rules: a V0 row of kvplan.versions.VLLM), step by step as
    ``determine_num_available_blocks`` goes: cell → block → scheduler → budget → blocks → start-up checks."""
    row, dtype, attn_tp, row_what = _row(arch, dep, rules)
    notes: list[str] = []
    if (said := rules_note("vllm", dep.engine_version)) is not None:
        notes.append(said)
    if rules.v1_by_default:
        notes.append(
            f"vLLM {dep.engine_version} starts the V1 engine unless it falls back to V0 (LoRA before 0.8.3, "
            "VLLM_USE_V1=0, ...): planned with V0's arithmetic; for a V1 start use engine_version 0.9.0"
        )
    if dep.dcp != 1:
        raise PlanError(f"dcp {dep.dcp}: vLLM V0 has no decode context parallelism")
    page_k = _block_knob(arch, dep, rules)
    cell = Cell(main_bytes=row * arch.num_layers, indexer_bytes=0)
    block_bytes = page_k.as_int() * cell.total_bytes
    sched = _scheduler(arch, dep, rules)
    budget = _budget(arch, dep, rules, sched)
    num_blocks = _num_blocks(dep, budget, block_bytes, page_k.as_int())
    startup = _startup_checks(arch, dep, budget, num_blocks, page_k.as_int(), sched.ctx_k.as_int())
    notes += startup.notes
    if budget.load_error is not None:
        num_blocks = 0
    knobs = (
        Knob("kv_cache_dtype", dtype, "set" if dtype != "auto" else "default: auto = the model dtype"),
        page_k,
        budget.util_k,
        budget.w_k,
        budget.other_k,
        sched.ctx_k,
        sched.seqs_k,
        sched.mnbt_k,
    )
    sizes = _V0Sizes(row, row_what, page_k.as_int(), block_bytes, cell, num_blocks, attn_tp, dtype)
    return _pool_plan(arch, dep, sizes, sched, budget, startup, knobs, tuple(notes))


def _block_knob(arch: ModelArch, dep: Deployment, rules: VllmRules) -> Knob:
    """--block-size, else 16; FlashMLA on SM 9.x forces 64 over any --block-size (``platforms/cuda.py``)."""
    gpu = dep.gpu
    flashmla = (
        rules.v0_flashmla_block64
        and arch.is_mla
        and gpu.vendor == "nvidia"
        and gpu.sm // 10 == 9
        and dep.attention_backend in (None, "FLASHMLA")
    )
    if flashmla:
        return Knob("page_size", FLASHMLA_BLOCK_SIZE, "default: FlashMLA on SM 9.x forces block_size 64")
    return resolve(dep, "page_size", DEFAULT_BLOCK_SIZE, "CacheConfig block_size 16 on CUDA")


@dataclass(frozen=True)
class _Scheduler:
    ctx_k: Knob
    seqs_k: Knob
    mnbt_k: Knob


def _scheduler(arch: ModelArch, dep: Deployment, rules: VllmRules) -> _Scheduler:
    """max_model_len, max_num_seqs and max_num_batched_tokens as V0's ``EngineArgs`` / ``SchedulerConfig`` take
    them."""
    ctx_k = resolve(dep, "context_length", arch.max_position_embeddings, derived_why(arch, dep))
    seqs_k = resolve(dep, "max_running_requests", DEFAULT_MAX_NUM_SEQS, "V0 EngineArgs max_num_seqs")
    mnbt_default, mnbt_why = _mnbt_default(rules, dep, ctx_k.as_int())
    mnbt_k = resolve(dep, "max_num_batched_tokens", mnbt_default, f"V0 SchedulerConfig, {mnbt_why}")
    return _Scheduler(ctx_k, seqs_k, mnbt_k)


@dataclass(frozen=True)
class _Budget:
    """The V0 KV budget of one GPU: total × gpu_memory_utilization less the non-KV memory the version counts."""

    util_k: Knob
    w_k: Knob
    other_k: Knob
    other_terms: tuple[Term, ...]
    total: int
    requested: float
    non_kv: int
    available: int
    avail_detail: str
    load_error: str | None
    act: int
    nt: int


def _budget(arch: ModelArch, dep: Deployment, rules: VllmRules, sched: _Scheduler) -> _Budget:
    util_k = resolve(dep, "gpu_memory_utilization", rules.default_utilization, rules.utilization_cite)
    util = util_k.as_float()
    w_k = weights_knob(arch, dep, with_mtp=False)
    total = dep.gpu.cuda_total_bytes
    load_error = check_gpu_memory(dep, weights=w_k.as_int(), free_before_load=total, free_label="CUDA total")
    act, act_how = activation_peak(
        arch,
        rules,
        tp=dep.tp,
        ep=dep.ep,
        max_num_batched_tokens=sched.mnbt_k.as_int(),
        max_num_seqs=sched.seqs_k.as_int(),
    )
    nt, nt_how = _non_torch(dep.tp)
    if rules.v0_budget == "torch_peak":
        nt, nt_how = nt + CUDA_CONTEXT_BYTES, f"{nt_how} + CUDA context {CUDA_CONTEXT_BYTES // MiB} MiB (ASSUMED)"
        budget_how = "0.6.4: torch allocated peak (weights + profile run) + every non-torch byte"
    elif rules.v0_budget == "init_free":
        act_how += "; ASSUMED: the allocator keeps the run's peak reserved (no empty_cache before the free-memory read)"
        budget_how = "0.6.0-0.6.3: init free − free after the profile run"
    else:
        budget_how = "memory_profiling: weights + torch peak increase + non-torch increase"
    if dep.non_kv_other is not None:
        other_k = Knob("non_kv_other", dep.non_kv_other, "set")
        other_terms: tuple[Term, ...] = (Term("activations + non-torch", dep.non_kv_other, "set"),)
    else:
        other_k = Knob("non_kv_other", act + nt, f"default: profile run {act_how}; non-torch {nt_how}")
        other_terms = (Term("torch peak (profile run)", act, act_how), Term("non-torch", nt, nt_how))
    non_kv = w_k.as_int() + other_k.as_int()
    requested = total * util
    if dep.kv_cache_memory is not None:
        available, avail_detail = dep.kv_cache_memory, "set (kv_cache_memory)"
    else:
        available = max(int(requested - non_kv), 0)
        avail_detail = f"total × {util} − non-KV ({budget_how})"
    if load_error is not None:
        available = 0
    return _Budget(util_k, w_k, other_k, other_terms, total, requested, non_kv, available, avail_detail, load_error,
                   act, nt)  # fmt: skip


def _num_blocks(dep: Deployment, budget: _Budget, block_bytes: int, block: int) -> int:
    """'# GPU blocks' = int((total × gpu_memory_utilization − non-KV) // block bytes); num_gpu_blocks_override."""
    if dep.kv_cache_memory is None:
        num_blocks = int((budget.requested - budget.non_kv) // block_bytes)
    else:
        num_blocks = dep.kv_cache_memory // block_bytes
    num_blocks = max(num_blocks, 0)
    if dep.max_total_tokens is not None:  # num_gpu_blocks_override
        num_blocks = -(-dep.max_total_tokens // block)
    return num_blocks


@dataclass(frozen=True)
class _Startup:
    error: str | None
    refusal: StartupRefusal | None
    notes: tuple[str, ...]


def _startup_checks(
    arch: ModelArch, dep: Deployment, budget: _Budget, num_blocks: int, block: int, max_model_len: int
) -> _Startup:
    """``_verify_args`` / ``_raise_if_cache_size_invalid``: blocks at all, then a max-length sequence in tokens."""
    error = budget.load_error
    if error is None and num_blocks <= 0:
        error = (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine."
        )
    refusal = None
    max_seq_len = block * (num_blocks // max(dep.pp, 1))
    if error is None and max_model_len > max_seq_len:
        text = (
            f"The model's max seq len ({max_model_len}) is larger than the maximum number of tokens that can be "
            f"stored in KV cache ({max_seq_len}). Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
        # V0 compares tokens, not bytes: no needed / available bytes
        refusal = StartupRefusal(text=text, max_model_len=max_model_len, needed_bytes=None, available_bytes=None)
        error = text
    notes: tuple[str, ...] = ()
    if max_model_len > arch.max_position_embeddings and dep.allow_long_context:
        notes = (long_context_note(arch, dep, max_model_len),)
    elif max_model_len > arch.max_position_embeddings:
        refusal, error = (
            None,
            (
                f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
                f"(max_position_embeddings={arch.max_position_embeddings} in model's config.json)."
            ),
        )
    return _Startup(error, refusal, notes)


@dataclass(frozen=True)
class _V0Sizes:
    row: int
    row_what: str
    block: int
    block_bytes: int
    cell: Cell
    num_blocks: int
    attn_tp: int
    dtype: str


def _chain(dep: Deployment, s: _V0Sizes, budget: _Budget, layers: int) -> tuple[Term, ...]:
    cpu_blocks = SWAP_SPACE_BYTES // s.block_bytes if s.block_bytes else 0
    return (
        Term(dep.gpu.total_label, dep.gpu.nvml_total_bytes, f"{dep.gpu.name}, catalog"),
        Term("CUDA total (torch)", budget.total, "torch.cuda.mem_get_info total"),
        Term("requested", int(budget.requested), f"total × gpu_memory_utilization {budget.util_k.as_float()}"),
        Term("weights per GPU", budget.w_k.as_int(), budget.w_k.origin),
        *budget.other_terms,
        Term("available KV cache memory", budget.available, budget.avail_detail),
        Term("bytes per block", s.block_bytes, f"{s.block} × {layers} layers × {s.row:,} B ({s.row_what})"),
        Term("# GPU blocks", None, f"{s.num_blocks:,} = (requested − non-KV) // bytes per block; all usable"),
        Term("# CPU blocks", None, f"{cpu_blocks:,} = swap_space 4 GiB // bytes per block"),
        Term("pool tokens per GPU", None, f"{s.num_blocks * s.block:,} = # GPU blocks × {s.block}"),
    )


def _pool_plan(arch: ModelArch, dep: Deployment, s: _V0Sizes, sched: _Scheduler, budget: _Budget, startup: _Startup,
               knobs: tuple[Knob, ...], notes: tuple[str, ...]) -> PoolPlan:  # fmt: skip
    rows = s.num_blocks * s.block
    return PoolPlan(
        engine="vllm",
        engine_version=dep.engine_version,
        arch=arch,
        deployment=dep,
        knobs=knobs,
        mla_layout=None,
        mla_bytes_per_layer=s.row,
        main_layers=arch.num_layers,
        indexer_bytes_per_layer=0,
        indexer_layers=0,
        indexer_rule="vLLM V0: no indexer",
        draft_layers=0,
        dcp=1,
        cell=s.cell,
        page_tokens=s.block,
        chain=_chain(dep, s, budget, arch.num_layers),
        available_bytes=budget.available,
        rows=rows,
        usable_pages=s.num_blocks,
        logged_tokens=rows,
        context_len=sched.ctx_k.as_int(),
        max_running_requests=sched.seqs_k.as_int(),
        allocated_bytes=s.num_blocks * s.block_bytes,
        memory_map=memory_map(
            nvml_total=dep.gpu.nvml_total_bytes,
            outside=("driver", dep.gpu.nvml_total_bytes - budget.total),
            weights=budget.w_k.as_int(),
            main=rows * s.cell.main_bytes,
            indexer=0,
            draft=0,
            available=budget.available,
        ),
        startup_error=startup.error,
        startup_refusal=startup.refusal,
        loads_weights=budget.load_error is None,
        notes=notes,
        kv_dtype=s.dtype,
        attn_tp=s.attn_tp,
        extras={
            "num_blocks": s.num_blocks,
            "num_cpu_blocks": SWAP_SPACE_BYTES // s.block_bytes if s.block_bytes else 0,
            "bytes_per_block": s.block_bytes,
            "requested_bytes": int(budget.requested),
            "non_kv_bytes": budget.non_kv,
            "activation_bytes": budget.act,
            "non_torch_bytes": budget.nt,
            "max_num_batched_tokens": sched.mnbt_k.as_int(),
        },
    )
