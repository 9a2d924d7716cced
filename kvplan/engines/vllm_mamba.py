"""vLLM's hybrid KV cache manager for attention (full or MLA) beside linear-attention state: Qwen3-Next Gated
DeltaNet, Kimi-Linear KDA (``platforms/interface.py _align_hybrid_block_size``, ``MambaSpec``).

The attention block grows until one attention page holds a state: ``block = align × cdiv(mamba_page, align ×
attn_page_1_token)`` with ``align = max(smallest kernel block, block_size)`` (MLA: at least 128 from 0.27, 64
before; 'align' mode: lcm with the prefill checkpoint alignment), rounded up to every backend's smallest kernel
block; the state page is then padded to ``block × attn_page_1_token``.
"""

from __future__ import annotations

import math

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import (
    MLA_MAMBA_BLOCK_ALIGNMENT,
    Group,
    HybridBlocks,
    caches,
    group_size_of,
    padding_note,
    refuse,
)
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention, LinearState, MlaLatent
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv
from kvplan.versions import parse_version

FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
"""``v1/attention/backends/gdn_attn.py``: the token alignment of the FlashInfer GDN prefill checkpoints."""

HYBRID_PREFIX_CACHING_SINCE = (0, 26, 0)
"""vLLM 0.26.0 turns prefix caching on by default for Mamba hybrids (``ModelConfig.is_prefix_caching_supported``:
"Generative hybrid models support prefix caching"); 0.25.0 and before return False ("Hybrid models do not support
prefix caching"), so ``MambaModelConfig`` keeps mamba_cache_mode 'none' (wheels 0.19.0 / 0.25.0 / 0.26.0 read)."""

MAMBA_ALIGN_ONLY_SINCE = (0, 28, 0)
"""0.26.0-0.27.x pick mamba_cache_mode 'all' for models with ``supports_mamba_prefix_caching`` (else 'align');
0.28.0 on always 'align'. kvplan does not model 'all' mode: a state hybrid on 0.26-0.27 is refused."""

CHECKPOINT_BLOCKS_SINCE = (0, 33, 0)
"""0.33.0 gives the GDN layers their FlashInfer prefill checkpoint block (``QwenGDNLinearAttention.get_kv_cache_spec``
sets ``num_prefill_checkpoint_blocks=1``) and aligns the block to the checkpoint grid (``_align_hybrid_block_size``:
lcm with ``get_mamba_prefill_checkpoint_alignment``); the ``MambaSpec`` field exists from 0.29.0, but no GDN layer
sets it in 0.29.0-0.32.0 (wheels 0.29.0, 0.31.0, 0.32.0 read)."""

MLA_ALIGNMENT_SINCE = (0, 27, 0)
"""0.27.0 makes a hybrid MLA / Mamba model's block a multiple of 128 (``_align_hybrid_block_size``)."""

FLASHINFER_HEAD256_ALIGNMENT_SINCE = (0, 11, 1)
"""The same function's full-attention branch: ``kernel_block_alignment_size = 32`` on SM10x with head_size 256 and
the FlashInfer backend (the default there), "flashinfer-ai/flashinfer#1993 reports that head size 256 and block
size 16 is not supported on blackwell" (issue of Oct 2025: ASSUMPTION, first in 0.11.1, the MLA branch's release;
the 0.11-era source reads ``is_device_capability(100)``, the later one ``is_device_capability_family(100)``: SM10x
is taken for both)."""

MLA_MAMBA_BLOCK_ALIGNMENT_BEFORE = 64
"""Before 0.27.0 (``model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config``, from
Kimi-Linear's first release 0.11.1): ``kernel_block_alignment_size = 128 if use_cutlass_mla else 64`` for an MLA
model (use_cutlass_mla: the attention backend set to CUTLASS_MLA), 16 for full attention. vllm#28228 (Kimi-Linear
AWQ, tp 2, 0.11.1): 64 x cdiv(1,085,440, 64 x 1,152) = 960 tokens, which its 'GPU KV cache size: 75,840' (79 x 960)
fits and 944 (an alignment of 16) does not."""


def gdn_checkpoint_alignment(arch: ModelArch, dep: Deployment, state: LinearState) -> int | None:
    """The GDN prefill checkpoint alignment in 'align' mode, or None (no checkpoint block).

    ``qwen_gdn_linear_attn._resolve_gdn_prefill_backend`` ('auto'): FlashInfer on SM90, and on SM10x / SM12x with
    head_k_dim 128 and a CUDA 13 runtime (ASSUMPTION: the runtime is CUDA 13); else Triton, which exports no
    checkpoints. FlashInfer then adds one prefill checkpoint block per GDN group (``get_kv_cache_spec``). KDA
    (Kimi-Linear) layers declare no alignment.
    """
    del arch
    if state.family != "gated_deltanet" or dep.gpu.vendor != "nvidia":
        return None
    sm = dep.gpu.sm
    if sm // 10 == 9 or (sm // 10 in (10, 12) and state.head_k_dim == 128):
        return FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    return None


_ALIGN_FN = {True: "_align_hybrid_block_size", False: "HybridAttentionMambaModelConfig.verify_and_update_config"}


def _config_py_alignment(dep: Deployment, attn: list[object], mla: bool, version: tuple[int, ...]) -> int:
    """The kernel block alignment of ``HybridAttentionMambaModelConfig.verify_and_update_config`` (before 0.27.0;
    ``_align_hybrid_block_size`` from 0.27.0: MLA 128): MLA 64 (128 on CUTLASS_MLA), full attention 16 (32 on SM10x
    with head_size 256 and FlashInfer); 1 where the rule adds nothing to the smallest kernel block."""
    backend = (dep.attention_backend or "").upper()
    if mla:
        if version >= MLA_ALIGNMENT_SINCE:
            return MLA_MAMBA_BLOCK_ALIGNMENT
        return MLA_MAMBA_BLOCK_ALIGNMENT if backend == "CUTLASS_MLA" else MLA_MAMBA_BLOCK_ALIGNMENT_BEFORE
    head256 = any(isinstance(c, FullAttention) and c.head_dim == 256 for c in attn)
    blackwell = dep.gpu.vendor == "nvidia" and dep.gpu.sm // 10 == 10
    if FLASHINFER_HEAD256_ALIGNMENT_SINCE <= version < MLA_ALIGNMENT_SINCE and head256 and blackwell:
        return 32 if backend in ("", "FLASHINFER") else 1
    return 1


def plan_mamba(
    arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, min_kernel_block: int, attn_tp: int
) -> HybridBlocks:
    """Attention (full or MLA) + linear-attention state (Qwen3-Next GDN, Kimi-Linear KDA)."""
    states = {c for c in caches(arch) if isinstance(c, LinearState)}
    if len(states) != 1:
        raise refuse(arch, dep, "linear-attention layers of several state shapes")
    (state,) = states
    n_state = sum(1 for c in caches(arch) if isinstance(c, LinearState))
    attn = [c for c in caches(arch) if type(c) in (FullAttention, MlaLatent)]
    # speculative decoding (Qwen3-Next MTP): num_speculative_tokens S = the deployment's draft tokens
    spec = dep.speculative_num_draft_tokens
    # the MTP decoder layer's attention is one more FullAttentionSpec layer: ``get_kv_cache_spec`` collects every
    # attention layer of the static forward context, the drafter's included (tagged ``is_draft``, which
    # ``KVCacheSpec`` leaves out of equality, so it groups with the target's full-attention layers)
    # (``qwen3_next_mtp.py``: ``num_nextn_predict_layers`` decoder layers of ``layer_type="full_attention"``,
    # default 1 as kvplan.models.hybrid reads it)
    draft_layers = arch.num_mtp_layers if spec else 0
    n_attn = len(attn) + draft_layers
    mla = any(isinstance(c, MlaLatent) for c in attn)
    # MambaSpec.page_size_bytes: conv + recurrent state in vLLM's dtypes (MambaStateDtypeCalculator); a GDN conv
    # state keeps conv_kernel - 1 + num_spec columns (``gdn/base.py`` num_spec = num_speculative_tokens,
    # ``MambaStateShapeCalculator.gated_delta_net_state_shape``)
    mamba_page = state.bytes_per_request(attn_tp, "vllm", spec_tokens=spec if state.family == "gated_deltanet" else 0)
    version = parse_version(dep.engine_version)
    if HYBRID_PREFIX_CACHING_SINCE <= version < MAMBA_ALIGN_ONLY_SINCE:
        raise refuse(arch, dep, "linear-attention state layers in mamba_cache_mode 'all' (vLLM 0.26-0.27)")
    # from 0.28.0 prefix caching is on by default for hybrids (CacheConfig.enable_prefix_caching = True), so
    # MambaModelConfig sets mamba_cache_mode 'align' (ASSUMPTION: the deployment does not pass
    # --no-enable-prefix-caching); before 0.26.0 hybrids ran without prefix caching: 'none'
    mode = "align" if version >= MAMBA_ALIGN_ONLY_SINCE else "none"
    checkpoint = gdn_checkpoint_alignment(arch, dep, state) if version >= CHECKPOINT_BLOCKS_SINCE else None
    user_block = block_knob.as_int()
    align = max(min_kernel_block, user_block, _config_py_alignment(dep, attn, mla, version))
    if mode == "align":
        align = math.lcm(align, checkpoint or 1)
    attn_block = align * cdiv(mamba_page, align * row)
    attn_block = min_kernel_block * cdiv(attn_block, min_kernel_block)
    block = max(user_block, attn_block)
    page = block * row
    if block != user_block:
        block_knob = Knob(
            "page_size",
            block,
            f"default: vLLM {_ALIGN_FN[version >= MLA_ALIGNMENT_SINCE]}: {align} × cdiv(mamba page "
            f"{mamba_page:,} B, {align} × {row:,} B a token) = {attn_block} tokens, so that one attention page holds "
            f"a state (was {user_block}: {block_knob.origin})",
        )
    # MambaSpec.max_memory_usage_bytes: (2 + num_speculative_blocks + checkpoint) pages in 'align' mode, (1 +
    # num_speculative_blocks) in 'none'; ``MambaBase.get_kv_cache_spec``: num_speculative_blocks =
    # num_speculative_tokens (0 only with --use-replayssm, off by default)
    per_group = (2 + (1 if checkpoint else 0) if mode == "align" else 1) + spec
    size = group_size_of([n_attn, n_state])
    attn_groups, state_groups = cdiv(n_attn, size), cdiv(n_state, size)
    label = "MLA" if mla else "full attention"
    groups = (
        Group(label, n_attn, attn_groups, Demand(label, "token", units=attn_groups)),
        Group(state.label, n_state, state_groups, Demand(state.label, "request", units=state_groups * per_group)),
    )
    pad_pct = 100 * (page - mamba_page) / mamba_page
    notes = [
        f"vLLM: Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page "
        f"size; Padding mamba page size by {pad_pct:.2f}% (state {mamba_page:,} B -> page {page:,} B)",
        f"vLLM hybrid KV cache manager: {attn_groups + state_groups} KV cache groups of {size} layers share one "
        f"block pool; a request takes {per_group} state blocks per {state.label} group in mamba_cache_mode "
        + (
            f"'align' (2 + {1 if checkpoint else 0} prefill checkpoint"
            + (f" + {spec} speculative" if spec else "")
            + "; ASSUMPTION: prefix caching on, the vLLM default for hybrids from 0.26)"
            if mode == "align"
            else "'none' ("
            + (f"1 + {spec} speculative; " if spec else "")
            + "prefix caching off: the default for hybrids before vLLM 0.26)"
        ),
    ]
    if spec:
        notes.append(
            f"speculative decoding (MTP, num_speculative_tokens {spec}): the drafter's {draft_layers} MTP "
            f"full-attention layer joins the {label} KV cache groups ({len(attn)} + {draft_layers} = {n_attn} layers; "
            f"qwen3_next_mtp.py num_nextn_predict_layers default 1), each {state.label} group keeps {spec} "
            "speculative state blocks a request (MambaSpec.num_speculative_blocks) and a GDN conv state "
            f"{spec} more columns (conv_kernel - 1 + num_spec); a prefix hit drops its last block "
            "(SpeculativeConfig.use_eagle_block_drop for MTP); ASSUMPTION: the drafter's share of the profiling "
            "run's torch peak and of the CUDA graphs is not modelled (the target's figures are kept)"
        )
    if checkpoint and dep.gpu.sm // 10 in (10, 12):
        notes.append(
            "vLLM picks the FlashInfer GDN prefill (one checkpoint block a group) on SM10x / SM12x only with a CUDA 13 "
            "runtime (ASSUMPTION: CUDA 13; with Triton a request takes 2 state blocks a group)"
        )
    notes += [n for n in (padding_note(label, n_attn, size), padding_note(state.label, n_state, size)) if n]
    notes.append(
        f"vLLM {dep.engine_version} runs a Mamba hybrid without prefix caching (the default before 0.26): no "
        "prefix is reused"
        if mode == "none"
        else f"vLLM prefix reuse on a hybrid: a hit ends on a whole {block}-token block whose state was kept "
        "(MambaManager.find_longest_cache_hit, mamba_cache_mode 'align', mamba_block_size = the attention block), "
        "and the attention groups must hold every block before it (HybridKVCacheCoordinator: the longest length "
        f"every group accepts): at most floor(prefix / {block}) × {block} tokens are reused"
    )
    return HybridBlocks(
        block=block,
        block_knob=block_knob,
        page_bytes=page,
        attn_bytes_per_token=row,
        state_bytes=mamba_page,
        group_size=size,
        groups=groups,
        mamba_cache_mode=mode,
        notes=tuple(notes),
    )
