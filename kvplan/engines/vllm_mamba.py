"""vLLM's hybrid KV cache manager for attention (full or MLA) beside linear-attention state: Qwen3-Next Gated
DeltaNet, Kimi-Linear KDA (``platforms/interface.py _align_hybrid_block_size``, ``MambaSpec``).

The attention block grows until one attention page holds a state: ``block = align × cdiv(mamba_page, align ×
attn_page_1_token)`` with ``align = max(smallest kernel block, block_size)`` (MLA: at least 128 from 0.27, 64
before; 'align' mode: lcm with the prefill checkpoint alignment), rounded up to every backend's smallest kernel
block; the state page is then padded to ``block × attn_page_1_token``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import (
    MLA_MAMBA_BLOCK_ALIGNMENT,
    Group,
    HybridBlocks,
    MambaCacheMode,
    caches,
    group_size_of,
    padding_note,
    refuse,
)
from kvplan.models.arch import ModelArch
from kvplan.models.cache import LinearState
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


def _config_py_alignment(dep: Deployment, head256: bool, mla: bool, version: tuple[int, ...]) -> int:
    """The kernel block alignment of ``HybridAttentionMambaModelConfig.verify_and_update_config`` (before 0.27.0;
    ``_align_hybrid_block_size`` from 0.27.0: MLA 128): MLA 64 (128 on CUTLASS_MLA), full attention 16 (32 on SM10x
    with head_size 256 and FlashInfer); 1 where the rule adds nothing to the smallest kernel block."""
    backend = (dep.attention_backend or "").upper()
    if mla:
        if version >= MLA_ALIGNMENT_SINCE:
            return MLA_MAMBA_BLOCK_ALIGNMENT
        return MLA_MAMBA_BLOCK_ALIGNMENT if backend == "CUTLASS_MLA" else MLA_MAMBA_BLOCK_ALIGNMENT_BEFORE
    blackwell = dep.gpu.vendor == "nvidia" and dep.gpu.sm // 10 == 10
    if FLASHINFER_HEAD256_ALIGNMENT_SINCE <= version < MLA_ALIGNMENT_SINCE and head256 and blackwell:
        return 32 if backend in ("", "FLASHINFER") else 1
    return 1


# Speculative decoding on Qwen3-Next (``qwen3_next_mtp``, num_speculative_tokens S): the MTP layer's attention
# joins the full-attention groups, each GDN group keeps S more state blocks a request and a conv state S columns
# wider.
def plan_mamba(
    arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, min_kernel_block: int, attn_tp: int
) -> HybridBlocks:
    """Attention (full or MLA) + linear-attention state (Qwen3-Next GDN, Kimi-Linear KDA): the two buckets
    (``get_kv_cache_groups``), the block (``_align_hybrid_block_size``), the groups of equal layer count
    (``_get_kv_cache_groups_uniform_page_size``) and what a request takes of each."""
    b = _buckets(arch, dep)
    blk = _align_block(arch, dep, b, row, block_knob, min_kernel_block, attn_tp)
    # MambaSpec.max_memory_usage_bytes: (2 + num_speculative_blocks + checkpoint) pages in 'align' mode, (1 +
    # num_speculative_blocks) in 'none'; ``MambaBase.get_kv_cache_spec``: num_speculative_blocks =
    # num_speculative_tokens (0 only with --use-replayssm, off by default)
    per_group = (2 + (1 if blk.checkpoint else 0) if blk.mode == "align" else 1) + b.spec
    size = group_size_of([b.n_attn, b.n_state])
    attn_groups, state_groups = cdiv(b.n_attn, size), cdiv(b.n_state, size)
    state = b.state
    groups = (
        Group(b.label, b.n_attn, attn_groups, Demand(b.label, "token", units=attn_groups)),
        Group(state.label, b.n_state, state_groups, Demand(state.label, "request", units=state_groups * per_group)),
    )
    return HybridBlocks(
        block=blk.block,
        block_knob=blk.block_knob,
        page_bytes=blk.block * row,
        attn_bytes_per_token=row,
        state_bytes=blk.mamba_page,
        group_size=size,
        groups=groups,
        mamba_cache_mode=blk.mode,
        notes=_notes(dep, b, blk, row, per_group, size, attn_groups + state_groups),
    )


@dataclass(frozen=True)
class _Buckets:
    """The model's two spec buckets: one linear-attention state shape and the attention layers (with the MTP
    drafter's)."""

    state: LinearState
    n_state: int
    n_target_attn: int
    draft_layers: int
    mla: bool
    head256: bool
    spec: int
    """num_speculative_tokens (the deployment's draft tokens)."""

    @property
    def n_attn(self) -> int:
        return self.n_target_attn + self.draft_layers

    @property
    def label(self) -> str:
        return "MLA" if self.mla else "full attention"


def _buckets(arch: ModelArch, dep: Deployment) -> _Buckets:
    states = {layer.state for layer in arch.layers if layer.state is not None}
    if len(states) != 1:
        raise refuse(arch, dep, "linear-attention layers of several state shapes")
    (state,) = states
    attn = [c for layer in arch.layers for c in layer.paged_attention]
    # speculative decoding (Qwen3-Next MTP): num_speculative_tokens S = the deployment's draft tokens
    spec = dep.speculative_num_draft_tokens
    # the MTP decoder layer's attention is one more FullAttentionSpec layer: ``get_kv_cache_spec`` collects every
    # attention layer of the static forward context, the drafter's included (tagged ``is_draft``, which
    # ``KVCacheSpec`` leaves out of equality, so it groups with the target's full-attention layers)
    # (``qwen3_next_mtp.py``: ``num_nextn_predict_layers`` decoder layers of ``layer_type="full_attention"``,
    # default 1 as kvplan.models.hybrid reads it)
    return _Buckets(
        state=state,
        n_state=sum(1 for c in caches(arch) if c.spec == "state"),
        n_target_attn=len(attn),
        draft_layers=arch.num_mtp_layers if spec else 0,
        mla=any(c.spec == "mla" for c in attn),
        head256=any(c.spec == "full" and c.head_size == 256 for c in attn),
        spec=spec,
    )


@dataclass(frozen=True)
class _Block:
    block_knob: Knob
    mamba_page: int
    mode: MambaCacheMode
    checkpoint: int | None

    @property
    def block(self) -> int:
        return self.block_knob.as_int()


def _align_block(
    arch: ModelArch, dep: Deployment, b: _Buckets, row: int, block_knob: Knob, min_kernel_block: int, attn_tp: int
) -> _Block:
    """``_align_hybrid_block_size``: the attention block grows until one attention page holds a state."""
    state, spec = b.state, b.spec
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
    mode: MambaCacheMode = "align" if version >= MAMBA_ALIGN_ONLY_SINCE else "none"
    checkpoint = gdn_checkpoint_alignment(arch, dep, state) if version >= CHECKPOINT_BLOCKS_SINCE else None
    user_block = block_knob.as_int()
    align = max(min_kernel_block, user_block, _config_py_alignment(dep, b.head256, b.mla, version))
    if mode == "align":
        align = math.lcm(align, checkpoint or 1)
    attn_block = align * cdiv(mamba_page, align * row)
    attn_block = min_kernel_block * cdiv(attn_block, min_kernel_block)
    block = max(user_block, attn_block)
    if block != user_block:
        block_knob = Knob(
            "page_size",
            block,
            f"default: vLLM {_ALIGN_FN[version >= MLA_ALIGNMENT_SINCE]}: {align} × cdiv(mamba page "
            f"{mamba_page:,} B, {align} × {row:,} B a token) = {attn_block} tokens, so that one attention page holds "
            f"a state (was {user_block}: {block_knob.origin})",
        )
    return _Block(block_knob, mamba_page, mode, checkpoint)


def _notes(
    dep: Deployment, b: _Buckets, blk: _Block, row: int, per_group: int, size: int, num_groups: int
) -> tuple[str, ...]:
    """What vLLM logs and assumes about the groups, as the plan's notes."""
    block, mamba_page, spec, state = blk.block, blk.mamba_page, b.spec, b.state
    page = block * row
    pad_pct = 100 * (page - mamba_page) / mamba_page
    mode = (
        f"'align' (2 + {1 if blk.checkpoint else 0} prefill checkpoint"
        + (f" + {spec} speculative" if spec else "")
        + "; ASSUMPTION: prefix caching on, the vLLM default for hybrids from 0.26)"
        if blk.mode == "align"
        else "'none' ("
        + (f"1 + {spec} speculative; " if spec else "")
        + "prefix caching off: the default for hybrids before vLLM 0.26)"
    )
    notes = [
        f"vLLM: Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page "
        f"size; Padding mamba page size by {pad_pct:.2f}% (state {mamba_page:,} B -> page {page:,} B)",
        f"vLLM hybrid KV cache manager: {num_groups} KV cache groups of {size} layers share one "
        f"block pool; a request takes {per_group} state blocks per {state.label} group in mamba_cache_mode " + mode,
    ]
    if spec:
        notes.append(
            f"speculative decoding (MTP, num_speculative_tokens {spec}): the drafter's {b.draft_layers} MTP "
            f"full-attention layer joins the {b.label} KV cache groups ({b.n_target_attn} + {b.draft_layers} = "
            f"{b.n_attn} layers; qwen3_next_mtp.py num_nextn_predict_layers default 1), each {state.label} group "
            f"keeps {spec} speculative state blocks a request (MambaSpec.num_speculative_blocks) and a GDN conv state "
            f"{spec} more columns (conv_kernel - 1 + num_spec); a prefix hit drops its last block "
            "(SpeculativeConfig.use_eagle_block_drop for MTP); ASSUMPTION: the drafter's share of the profiling "
            "run's torch peak and of the CUDA graphs is not modelled (the target's figures are kept)"
        )
    if blk.checkpoint and dep.gpu.sm // 10 in (10, 12):
        notes.append(
            "vLLM picks the FlashInfer GDN prefill (one checkpoint block a group) on SM10x / SM12x only with a CUDA 13 "
            "runtime (ASSUMPTION: CUDA 13; with Triton a request takes 2 state blocks a group)"
        )
    pads = (padding_note(b.label, b.n_attn, size), padding_note(state.label, b.n_state, size))
    notes += [n for n in pads if n]
    notes.append(
        f"vLLM {dep.engine_version} runs a Mamba hybrid without prefix caching (the default before 0.26): no "
        "prefix is reused"
        if blk.mode == "none"
        else f"vLLM prefix reuse on a hybrid: a hit ends on a whole {block}-token block whose state was kept "
        "(MambaManager.find_longest_cache_hit, mamba_cache_mode 'align', mamba_block_size = the attention block), "
        "and the attention groups must hold every block before it (HybridKVCacheCoordinator: the longest length "
        f"every group accepts): at most floor(prefix / {block}) × {block} tokens are reused"
    )
    return tuple(notes)
