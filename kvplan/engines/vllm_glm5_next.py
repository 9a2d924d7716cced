"""GLM-5.3-Flash (Glm5NextForConditionalGeneration) on vLLM 0.33.0: KDA state, MLA, the pooled indexer K and its
tail ring packed into one block id pool (``models/glm5next/``, ``v1/core/kv_cache_planning.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import MLA_MAMBA_BLOCK_ALIGNMENT, Group, HybridBlocks, approximate_gcd, refuse
from kvplan.engines.vllm_dsv4 import V4_SINCE
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import IndexerK, LinearState
from kvplan.models.deploy import Deployment
from kvplan.models.formats import MlaLayout
from kvplan.units import cdiv
from kvplan.versions import parse_version

GLM5_NEXT = "Glm5NextForConditionalGeneration"
GLM5_NEXT_BACKEND = "FLASHINFER_MLA_SPARSE_SM90"
"""``platforms/cuda.py _get_backend_priorities`` on SM90: with MLA head_size 512 (kv_lora 512 + rope 0) the sparse
tail puts FLASHINFER_MLA_SPARSE_SM90 first ("512 = ckv 512 + kpe 0 (NoPE)"); it keeps raw rows of head_size
bytes × dtype (``get_kv_cache_shape`` = (blocks, block, head_size); fp8 is not rewritten to fp8_ds_mla:
``_canonicalize_sparse_mla_kv_cache_dtype`` only rewrites FLASHMLA_SPARSE and the SM120 backend)."""
GLM5_NEXT_INDEXER_PAGES = (32, 64)
"""``utils/deep_gemm.get_paged_mqa_page_sizes`` off SM120: the paged-MQA kernel's pages; the Glm5Next indexer
backend takes ``index_kpool × n`` token kernel blocks (``Glm5NextIndexerBackend.get_supported_kernel_block_sizes``)."""
KDA_CHECKPOINT_ALIGNMENT = 16
"""``model_executor/layers/mamba/kda_checkpoint.py``: FlashKDA prefill checkpoints land every 16 tokens."""


def is_glm5_next(arch: ModelArch) -> bool:
    """GLM-5.3-Flash with its KDA layers (a config without them plans as a uniform DSA model)."""
    return arch.architecture == GLM5_NEXT and arch.is_hybrid


def glm5_next_layout(arch: ModelArch, dep: Deployment) -> tuple[MlaLayout, list[Knob]]:
    """The MLA row of GLM-5.3-Flash on vLLM 0.33.0: FLASHINFER_MLA_SPARSE_SM90 raw rows, (layout, knobs)."""
    gpu = dep.gpu
    if parse_version(dep.engine_version) != V4_SINCE:
        raise refuse(arch, dep, "GLM-5.3-Flash's pools before or after vLLM 0.33.0 (only that source read)")
    if gpu.vendor != "nvidia" or gpu.sm // 10 != 9:
        raise refuse(arch, dep, f"GLM-5.3-Flash off SM90 (SM{gpu.sm}: only the {GLM5_NEXT_BACKEND} path read)")
    if dep.attention_backend and dep.attention_backend != GLM5_NEXT_BACKEND:
        raise refuse(arch, dep, f"GLM-5.3-Flash with attention backend {dep.attention_backend}")
    if dep.mla_layout:
        raise PlanError(f"mla_layout: {GLM5_NEXT_BACKEND} keeps raw MLA rows for GLM-5.3-Flash")
    dtype = dep.kv_cache_dtype
    if dtype not in ("auto", "bfloat16", "bf16", "fp8", "fp8_e4m3"):
        raise PlanError(
            f"kv_cache_dtype {dtype}: {GLM5_NEXT_BACKEND} supports auto, bfloat16, fp8, fp8_e4m3 "
            "(supported_kv_cache_dtypes)"
        )
    fp8 = dtype.startswith("fp8")
    layout = MlaLayout.FP8_RAW if fp8 else MlaLayout.BF16
    knobs = [
        Knob("kv_cache_dtype", dtype, "set" if dtype != "auto" else "default: auto = the model dtype (bf16)"),
        Knob(
            "attention_backend",
            GLM5_NEXT_BACKEND,
            "set" if dep.attention_backend else "default: SM90 sparse MLA with head_size 512 (kv_lora 512, no rope)",
        ),
        Knob("mla_layout", layout.value, f"default: {GLM5_NEXT_BACKEND} keeps raw rows"),
    ]
    return layout, knobs


# Speculative decoding on GLM-5.3-Flash (num_speculative_tokens S): the MTP layer's MLA, indexer and tail ring join
# the packed groups, the ring widens to kpool × next_power_of_2(cdiv(kpool + S, kpool)).
def plan_glm5_next(arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, attn_tp: int) -> HybridBlocks:
    """GLM-5.3-Flash: the block (``_align_hybrid_block_size``), the packed groups (``_get_packed_kv_cache_groups``:
    the KDA, ring and MLA + indexer buckets, the state buckets split to the block the MLA bucket needs), their
    bytes per block id (``_get_kv_cache_bytes_per_block``, block-outermost: the widest group rounded to the lcm of
    the layers' block stride alignments) and what one request takes of each group."""
    b = _buckets(arch, dep, attn_tp)
    block_knob, ring = _align_block(b, row, block_knob)
    p = _pack(b, row, block_knob.as_int(), ring)
    # MambaSpec.max_memory_usage_bytes, 'align': 2 + one FlashKDA checkpoint block + num_speculative_blocks (S)
    per_state_group = 2 + 1 + b.spec
    kpool, n_mla, state = b.indexer.index_kpool, b.n_mla, b.state
    groups = (
        Group(f"MLA + indexer K (kpool {kpool})", 2 * n_mla, p.attn_groups,
              Demand("MLA + indexer K", "token", units=p.attn_groups)),
        Group(state.label, b.n_state, p.state_groups,
              Demand(state.label, "request", units=p.state_groups * per_state_group)),
        Group("indexer tail ring", n_mla, p.ring_groups, Demand("indexer tail ring", "request", units=p.ring_groups)),
    )  # fmt: skip
    return HybridBlocks(
        block=block_knob.as_int(),
        block_knob=block_knob,
        page_bytes=p.bytes_per_block,
        attn_bytes_per_token=row,
        state_bytes=b.mamba_page,
        group_size=1,
        groups=groups,
        mamba_cache_mode="align",
        notes=_notes(b, p, row, block_knob.as_int(), ring, per_state_group),
        packed_bytes_per_block=p.bytes_per_block,
        group_layers=2 * n_mla,
    )


@dataclass(frozen=True)
class _Buckets:
    """GLM-5.3-Flash's layers as vLLM buckets them: one KDA state shape, the MLA layers (each with its pooled
    indexer K and tail ring), the MTP drafter's MLA layer with speculative decoding."""

    state: LinearState
    indexer: IndexerK
    n_state: int
    n_mla: int
    n_draft: int
    spec: int
    mamba_page: int


def _buckets(arch: ModelArch, dep: Deployment, attn_tp: int) -> _Buckets:
    if dep.dcp > 1:
        raise refuse(arch, dep, "GLM-5.3-Flash with decode context parallel (dcp > 1)")
    states = {layer.state for layer in arch.layers if layer.state is not None}
    idx = {layer.indexer for layer in arch.layers if layer.indexer is not None}
    mla_layers = [layer for layer in arch.layers if layer.caches[0].spec == "mla"]
    if len(states) != 1 or len(idx) != 1 or any(layer.indexer is None for layer in mla_layers):
        raise refuse(arch, dep, "GLM-5.3-Flash layers without one KDA shape and an indexer on every MLA layer")
    (state,), (indexer,) = states, idx
    # speculative decoding (``glm5_next_mtp``, num_speculative_tokens S): the MTP decoder layer
    # (``common/mtp.py`` Glm5NextMultiTokenPredictorLayer, ``is_mtp_layer=True``: an MLA (DSA) layer, never KDA)
    # brings one more MLA page, indexer page and tail ring (tagged is_draft, grouped with the target's)
    spec = dep.speculative_num_draft_tokens
    if spec and not arch.mtp_layers_named:
        # config/speculative.py hf_config_override: glm5_next -> glm5_next_mtp with n_predict =
        # text_config.num_nextn_predict_layers, a field transformers' Glm5NextTextConfig (5.16.1-5.20) lacks
        raise PlanError(
            "vLLM refuses it: AttributeError: 'Glm5NextTextConfig' object has no attribute 'num_nextn_predict_layers' "
            "(config.json names no num_nextn_predict_layers; SGLang's config class defaults it to 1)"
        )
    n_draft = arch.num_mtp_layers if spec else 0
    n_state, n_mla = sum(layer.state is not None for layer in arch.layers), len(mla_layers) + n_draft
    # MambaSpec: conv bf16 + recurrent fp32 (kda_state_dtype); the conv state keeps conv_kernel - 1 + S columns
    # (``Glm5NextLinearAttention`` is a GatedDeltaNetAttention: num_spec = num_speculative_tokens)
    mamba_page = state.bytes_per_request(attn_tp, "vllm", spec_tokens=spec)
    return _Buckets(state, indexer, n_state, n_mla, n_draft, spec, mamba_page)


def _align_block(b: _Buckets, row: int, block_knob: Knob) -> tuple[Knob, int]:
    """(the block knob, the tail ring's slots): ``_align_hybrid_block_size`` and ``Glm5NextTailCache``."""
    kpool, mamba_page = b.indexer.index_kpool, b.mamba_page
    # _align_hybrid_block_size: the MLA backend's smallest kernel block (64) and the preliminary block (at most
    # 128: the backends' smallest common block) raised to 128 for MLA / Mamba hybrids; 'align' mode: lcm with the
    # FlashKDA checkpoint (16); then a multiple of every non-SSM backend's smallest kernel block: lcm(64, indexer
    # kpool × 32, ring 1)
    user_block = block_knob.as_int()
    align = math.lcm(max(MLA_MAMBA_BLOCK_ALIGNMENT, user_block), KDA_CHECKPOINT_ALIGNMENT)
    backend_align = math.lcm(64, kpool * min(GLM5_NEXT_INDEXER_PAGES))
    attn_block = align * cdiv(mamba_page, align * row)
    attn_block = backend_align * cdiv(attn_block, backend_align)
    block = max(user_block, attn_block)
    # Glm5NextTailCache.get_kv_cache_spec: kpool × next_power_of_2(cdiv(kpool + num_speculative_tokens, kpool))
    ring = kpool << (cdiv(kpool + b.spec, kpool) - 1).bit_length()
    if block % ring or block % kpool:
        raise PlanError(f"vLLM asserts it: Glm5NextTailCache: cache_config.block_size ({block}) must be a multiple "
                        f"of the tail ring ({ring})")  # fmt: skip
    if block != user_block:
        block_knob = Knob(
            "page_size",
            block,
            f"default: vLLM _align_hybrid_block_size: {align} × cdiv(KDA page {mamba_page:,} B, {align} × {row:,} B "
            f"a token) = {attn_block} tokens, a multiple of {backend_align} (was {user_block}: {block_knob.origin})",
        )
    return block_knob, ring


@dataclass(frozen=True)
class _Packed:
    """The pages of one block id and the groups ``_get_packed_kv_cache_groups`` makes of them."""

    mla_page: int
    idx_page: int
    ring_page: int
    attn_groups: int
    state_groups: int
    ring_groups: int
    widest: int
    idx_align: int
    bytes_per_block: int


def _pack(b: _Buckets, row: int, block: int, ring: int) -> _Packed:
    indexer, n_mla, n_state = b.indexer, b.n_mla, b.n_state
    kpool = indexer.index_kpool
    mla_page = block * row  # the KDA page is padded to it (mamba_page_size_padded)
    idx_page = block // kpool * indexer.bytes_per_state  # MLAAttentionSpec, tokens_per_state = kpool, uint8 132 B
    ring_page = ring * 2 * indexer.index_head_dim * 2  # CircularBufferSpec: [K, gate score] bf16 × ring slots
    # _get_packed_kv_cache_groups: balanced buckets' largest page-size counts: KDA n_state, MLA + indexer n_mla
    # (mixed: it stays whole, so at least n_mla repeats a group), ring n_mla
    repeats = approximate_gcd([n_state, n_mla, n_mla], n_mla)
    # num_groups_for: the ring (CircularBufferSpec, an AttentionSpec, not a MambaSpec: never capped by the block)
    # splits by the repeats like the MLA + indexer bucket
    attn_groups = ring_groups = cdiv(n_mla, repeats)
    # anchor_bytes: every bucket's widest group (a KDA group of one state, padded to mla_page, is never the widest)
    anchor = max(cdiv(n_mla, attn_groups) * (mla_page + idx_page), cdiv(n_mla, ring_groups) * ring_page)
    # the KDA groups, capped at the states one block fits (the anchor holds at least one MLA page, so vLLM's
    # max(…, 1) never binds), are never wider than the anchor
    state_groups = max(cdiv(n_state, repeats), cdiv(n_state, anchor // mla_page))
    widest = anchor
    # block stride alignments: MLA rows (align_blocks_to_rows: one row), the indexer's whole kernel blocks
    # (MultipleOf(kpool × 64) → a 128-token page when gcd(256, block) < block), 1 for the KDA state and the ring
    kernel = math.gcd(kpool * max(GLM5_NEXT_INDEXER_PAGES), block)
    idx_align = 1 if kernel == block else kernel // kpool * indexer.bytes_per_state
    bytes_per_block = cdiv(widest, math.lcm(row, idx_align)) * math.lcm(row, idx_align)
    return _Packed(mla_page, idx_page, ring_page, attn_groups, state_groups, ring_groups, widest, idx_align,
                   bytes_per_block)  # fmt: skip


def _notes(b: _Buckets, p: _Packed, row: int, block: int, ring: int, per_state_group: int) -> tuple[str, ...]:
    kpool, n_mla, spec, indexer = b.indexer.index_kpool, b.n_mla, b.spec, b.indexer
    notes: tuple[str, ...] = (
        f"vLLM GLM-5.3-Flash (0.33.0, {GLM5_NEXT_BACKEND}, block-outermost BLHNC layout: KpoolTailBackend's only "
        f"layout): {p.attn_groups} MLA + indexer group of {n_mla} + {n_mla} pages ({p.mla_page:,} + {p.idx_page:,} "
        f"B: {block // kpool} pooled keys of {indexer.bytes_per_state} B), {p.state_groups} KDA state groups of at "
        f"most {cdiv(b.n_state, p.state_groups)} layers (a state page {b.mamba_page:,} B padded to {p.mla_page:,} B), "
        f"{p.ring_groups} tail ring group of {n_mla} × {p.ring_page:,} B; one block id = the widest group "
        f"{p.widest:,} B rounded to lcm({row}, {p.idx_align}) = {p.bytes_per_block:,} B "
        "(_get_kv_cache_bytes_per_block)",
        f"vLLM: Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page "
        f"size; a request takes cdiv(tokens, {block}) MLA + indexer blocks, {per_state_group} blocks per KDA group "
        "(mamba_cache_mode 'align': 2 + one FlashKDA prefill checkpoint"
        + (f" + {spec} speculative" if spec else "")
        + "; ASSUMPTION: prefix caching on, and the "
        "config's gate_lower_bound set, so FlashKDA runs the prefill) and one ring block (CircularBufferSpec)",
        f"vLLM prefix reuse on GLM-5.3-Flash: a hit ends on a whole {block}-token block whose KDA state was kept "
        "(mamba_cache_mode 'align') and whose MLA + indexer blocks are cached; the tail ring is not prefix-cacheable "
        "(CircularBufferSpec.prefix_cacheable = False): the open pool's keys are recomputed",
    )
    if spec:
        notes += (
            f"speculative decoding (glm5_next_mtp, num_speculative_tokens {spec}): the MTP layer's MLA, indexer and "
            f"tail ring join the groups ({n_mla - b.n_draft} + {b.n_draft} MLA layers), each KDA group keeps {spec} "
            f"speculative state blocks a request and a conv state {spec} columns wider, the tail ring holds "
            f"{ring} slots ({kpool} × next_power_of_2(cdiv({kpool} + {spec}, {kpool}))); ASSUMPTION: the drafter's "
            "share of the profiling run's torch peak and of the CUDA graphs is not modelled",
        )
    return notes
