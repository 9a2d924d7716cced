"""DeepSeek-V4's pool shapes on SGLang 0.5.23 (``DSV4PoolConfigurator``): the V4 KV layout's page bytes, the
compress-state rings, the bytes a full token costs, and the sizer kvplan.engines.sglang.plan_pools runs in place of
the token pool's (pure).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang_hybrid_sizer import HybridSizer, swa_pool_error
from kvplan.units import cdiv

# ---------------------------------------------------------------------------------------------------------------
# DeepSeek-V4 (``model_executor/pool_configurator.py`` ``DSV4PoolConfigurator``, SGLang 0.5.23)
#
# create_memory_pool_configurator: ``is_deepseek_v4(hf_config) and kvc.is_hybrid_swa`` -> DSV4PoolConfigurator.
# Defaults SGLang applies to DeepseekV4ForCausalLM before it sizes anything:
# - ``arg_groups/model_overrides/deepseek_v4.py``: attention_backend "dsv4", page_size 256 on CUDA/ROCm (128 on
#   NPU), swa_full_tokens_ratio 0.1 when not given (a model override is a declaration, so
#   ``kv_cache_hook.handle_cache_compatibility``, which runs after it, records the ratio as explicitly set:
#   DSV4PoolConfigurator takes the ratio mode, never the request-cap mode, for V4; the cap mode is V4.1's);
# - ``arg_groups/deepseek_v4_hook.py`` ``apply_deepseek_v4_defaults``: max_running_requests 256 when not given
#   ("Setting max_running_requests to 256 for DeepseekV4ForCausalLM."), dsv4_attn_backend "flashmla" off
#   SM100; ``overrides._deepseek_v4_kv_cache_dtype``: kv_cache_dtype auto -> fp8_e4m3, only fp8_e4m3 / bfloat16
#   accepted (the FlashMLA pool below is the same 584 B layout for both: kv_bytes does not read the dtype).
# Env defaults (``environ.py``): SGLANG_DSV4_COMPRESS_STATE_DTYPE float32, SGLANG_OPT_USE_ONLINE_COMPRESS off,
# SGLANG_DSV4_KV_LAYOUT auto (``select_dsv4_kv_layout``: the V4 layout off SM100), unified_kv off (HIP only).

DSV4_PAGE_SIZE = 256
"""``model_overrides/deepseek_v4.py``: ``page_size = 256`` (CUDA / ROCm), over any --page-size."""
DSV4_SWA_FULL_TOKENS_RATIO = 0.1
"""``model_overrides/deepseek_v4.py``: ``overrides["swa_full_tokens_ratio"] = 0.1`` when not given."""
DSV4_MAX_RUNNING_REQUESTS = 256
"""``deepseek_v4_hook.apply_deepseek_v4_defaults``: ``max_running_requests=256`` when not given."""
V4_ROW_BYTES = 584
"""``KVLayout.V4`` (``kernels/ops/attention/dsv4/kv_layout.py``): data 576 + scale 8 bytes a token; the same as
DSV4PoolConfigurator's FlashMLA ``kv_bytes = qk_nope_head_dim + qk_rope_head_dim × 2 + 8`` (448 + 128 + 8)."""
V4_PAGE_ALIGN = 576
"""``KVLayout.V4.page_align``: a page's bytes are padded to a multiple of 576 (``KVLayout.page_bytes``)."""
COMPRESS_STATE_DTYPE_BYTES = 4
"""``_get_dsv4_compress_state_dtype_sizes``: SGLANG_DSV4_COMPRESS_STATE_DTYPE float32 -> 4 B (c4 and c128)."""
COMPRESS_RING = {4: 8, 128: 128}
"""``get_compress_state_ring_size`` without speculative decoding and online c128: rows of one ring."""
SPEC_COMPRESS_RING = {4: 16, 128: 256}
"""``get_compress_state_ring_size`` with speculative decoding ("return 16 if compress_ratio == 4 else 256")."""


def compress_state_write_pad(ratio: int, ring: int) -> int:
    """``get_compress_state_write_pad``: the most draft tokens a ring serves (ring − window + 2, window 8 for C4 and
    128 for C128).

    >>> compress_state_write_pad(4, 16), compress_state_write_pad(128, 256), compress_state_write_pad(4, 8)
    (10, 130, 0)
    """
    window = ratio * (2 if ratio == 4 else 1)
    return ring - window + 2 if ring > window else 0


def v4_page_bytes(tokens: int) -> int:
    """``KVLayout.V4.page_bytes``: ceil(tokens × 584 / 576) × 576.

    >>> v4_page_bytes(256), v4_page_bytes(64), v4_page_bytes(2)   # 149,504 -> 260 × 576; 37,376 -> 65; 1,168 -> 3
    (149760, 37440, 1728)
    """
    return cdiv(tokens * V4_ROW_BYTES, V4_PAGE_ALIGN) * V4_PAGE_ALIGN


def dsv4_indexer_bytes(index_head_dim: int) -> int:
    """``get_dsv4_indexer_bytes_per_token`` (fp8, not the HIP fp4 indexer): index_head_dim + index_head_dim/128 × 4.

    >>> dsv4_indexer_bytes(128)
    132
    """
    return index_head_dim + index_head_dim // 128 * 4


@dataclass(frozen=True)
class Dsv4Shape:
    """The per-rank byte figures DSV4PoolConfigurator sizes its pools with (one KV head: every rank holds all).

    Layers: ``num_layers_total`` (every layer has the SWA KV), ``c4_layers`` / ``c128_layers``
    (``collect_sources_by_ratio``: the layers of ratio 4 / 128); ``head_dim`` = qk_nope + rope (512).
    """

    layers: int
    c4_layers: int
    c128_layers: int
    head_dim: int
    index_head_dim: int
    window: int
    page: int = DSV4_PAGE_SIZE
    ring4: int = COMPRESS_RING[4]
    ring128: int = COMPRESS_RING[128]
    spec_infl: float = 1.0
    """Speculative decoding: (layers + 1) / layers, DSV4PoolConfigurator's reservation for the draft worker
    ("Reserve the draft worker by inflating per-token bytes by (target+draft)/target"); 1.0 without."""

    @property
    def swa_page_bytes(self) -> int:
        """One SWA page over the stage: the V4-layout page on every layer + the c4 compress state it addresses
        (``c4_state_pool_size = swa_tokens // page × ring``): ring 8 rows × (2 × 2 × head_dim + 2 × 2 × index_head_dim)
        × 4 B on each c4 layer (``_get_bytes_per_swa_token`` × page)."""
        state = self.ring4 * 2 * 2 * (self.head_dim + self.index_head_dim) * COMPRESS_STATE_DTYPE_BYTES
        return v4_page_bytes(self.page) * self.layers + state * self.c4_layers

    @property
    def c4_page_bytes(self) -> int:
        """What one full page (256 tokens) adds on one c4 layer: 64 compressed tokens in a V4 page of 64 + their
        indexer keys (``_compressed_bytes_per_full_token(4)`` × page)."""
        return v4_page_bytes(self.page // 4) + self.page // 4 * dsv4_indexer_bytes(self.index_head_dim)

    @property
    def c128_page_bytes(self) -> int:
        """What one full page adds on one c128 layer: 2 compressed tokens in a V4 page of 2."""
        return v4_page_bytes(self.page // 128)

    @property
    def full_page_bytes(self) -> int:
        return self.c4_page_bytes * self.c4_layers + self.c128_page_bytes * self.c128_layers

    def bytes_per_full_token(self, ratio: float) -> float:
        """``_get_bytes_per_full_token`` in SGLang's float order: ratio × bytes_per_swa_token + Σ per ratio."""
        state = 2 * 2 * (self.head_dim + self.index_head_dim) * COMPRESS_STATE_DTYPE_BYTES
        swa = v4_page_bytes(self.page) / self.page * self.layers + (self.ring4 / self.page * state * self.c4_layers)
        c4 = 1 / 4 * (v4_page_bytes(self.page // 4) / (self.page // 4)) + 1 / 4 * dsv4_indexer_bytes(
            self.index_head_dim
        )
        c128 = 1 / 128 * (v4_page_bytes(self.page // 128) / (self.page // 128))
        terms = ([c4 * self.c4_layers] if self.c4_layers else []) + (
            [c128 * self.c128_layers] if self.c128_layers else []
        )
        per = ratio * swa + sum(terms)
        return per * self.spec_infl if self.spec_infl != 1.0 else per

    def c128_state_slot_bytes(self) -> int:
        """One request's c128 compress-state ring: 128 rows × 2 × head_dim × 4 B on every c128 layer."""
        return self.ring128 * 2 * self.head_dim * COMPRESS_STATE_DTYPE_BYTES * self.c128_layers

    def c128_state_fixed_bytes(self, max_running_requests: int) -> int:
        """``_get_c128_state_fixed_bytes``: rows = ceil((mrr + 1) × 128 + 128 + 1, 128) × 128, × 2 × head_dim × 4 B
        × c128 layers (taken out of the budget before the token pools)."""
        if not self.c128_layers:
            return 0
        ring = self.ring128
        rows = cdiv((max_running_requests + 1) * ring + ring + 1, 128) * 128
        return rows * 2 * self.head_dim * COMPRESS_STATE_DTYPE_BYTES * self.c128_layers


def dsv4_pool_tokens(available: int, shape: Dsv4Shape, *, ratio: float, max_running_requests: int) -> tuple[int, int]:
    """``DSV4PoolConfigurator.calculate_pool_sizes`` (ratio mode, no ratio-1/2 layers): (full tokens, SWA tokens).

    full = int((available − c128 state fixed) / bytes_per_full_token) // page × page;
    swa = int(full × ratio) // page × page (``_get_swa_tokens``).
    """
    fixed = shape.c128_state_fixed_bytes(max_running_requests)
    for_tokens = max(available - fixed, 0)
    full = int(for_tokens / shape.bytes_per_full_token(ratio)) // shape.page * shape.page
    return full, int(full * ratio) // shape.page * shape.page


@dataclass(frozen=True)
class Dsv4Sizer(HybridSizer):
    """The steps kvplan.engines.sglang.plan_pools runs for DeepSeek-V4: DSV4PoolConfigurator's sizing in place
    of the token pool's (``pool_tokens``), its SWA floor check, its SWA allocation."""

    shape: Dsv4Shape | None = None
    requested_mrr: int = DSV4_MAX_RUNNING_REQUESTS
    """max_running_requests per attention-DP worker (``requested_max_running_requests_per_worker``)."""

    def _shape(self) -> Dsv4Shape:
        assert self.shape is not None
        return self.shape

    def pool_tokens(self, available: int, full_cell: int, dtype: str, attn_tp: int, page: int) -> tuple[int, int]:
        return dsv4_pool_tokens(
            available, self._shape(), ratio=self.swa_full_tokens_ratio, max_running_requests=self.requested_mrr
        )

    def swa_tokens_for(self, full_tokens: int, page: int) -> int:
        if self.swa_cap is not None:
            return self.swa_cap.capped(full_tokens, page)
        return int(full_tokens * self.swa_full_tokens_ratio) // page * page

    def check_swa_pool(self, swa_tokens: int, page: int) -> str | None:
        return swa_pool_error(swa_tokens, self._shape().window, page)

    def swa_alloc_bytes(self, swa_tokens: int, dtype: str, attn_tp: int, page: int) -> int:
        return swa_tokens // page * self._shape().swa_page_bytes
