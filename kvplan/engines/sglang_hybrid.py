"""SGLang's hybrid pools: sliding-window (SWA) and linear-attention / Mamba state models, as SGLang 0.5.23
sizes them. Source: the sglang 0.5.23 release wheel (``pip download --no-deps sglang==0.5.23``), files under
``sglang/srt/``.

A hybrid model is planned as its full-attention layers (a uniform model: kvplan.engines.sglang.plan_pools sizes
their token pool with the memory chain every SGLang plan uses) plus the steps below, each SGLang's own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import kvplan.engines.sglang as sglang
from kvplan.engines.common import Cell, Demand, Knob, Pool, PoolPlan, Term, memory_map
from kvplan.engines.sglang_swa_cap import SwaRequestCap, request_cap_for, swa_cap_rows_term, swa_pool_story
from kvplan.errors import PlanError
from kvplan.models.arch import QWEN3_NEXT_FAMILY, ModelArch
from kvplan.models.cache import (
    CompressedAttention,
    FullAttention,
    IndexerK,
    LinearState,
    MlaLatent,
    SlidingWindow,
)
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv
from kvplan.versions import parse_version

SWA_FULL_TOKENS_RATIO = 0.8
"""``--swa-full-tokens-ratio`` when not given (``arg_groups/fields/schedule.py``: ``fallback=0.8``)."""
SWA_EVICTION_INTERVAL = 128
"""``SGLANG_SWA_EVICTION_INTERVAL`` (``environ.py``: ``EnvInt(128)``): tokens a request runs past its window
before the SWA pool frees them."""
MAMBA_FULL_MEMORY_RATIO = 0.9
"""``--mamba-full-memory-ratio`` when not given (``arg_groups/fields/schedule.py``: ``fallback=0.9``)."""
MAMBA_BASE_SLOTS = 3
"""``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` (``mem_cache/kv_cache_configurator.py``)."""
MAMBA_EXTRA_BUFFER_ARCHS = frozenset(
    {"Qwen3NextForCausalLM", "KimiLinearForCausalLM", "Glm5NextForConditionalGeneration",
     "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
)  # fmt: skip
"""The architectures kvplan reads whose radix cache keeps the extra state buffer (``_MAMBA_EXTRA_BUFFER_ARCHS``)."""
HYBRID_VERSION = (0, 5, 23)
QWEN3_NEXT = "Qwen3NextForCausalLM"
"""Qwen3-Next: the one hybrid kvplan plans with speculative decoding (MTP / NEXTN) on SGLang."""
SPEC_MAX_RUNNING_REQUESTS = sglang.SPEC_MAX_RUNNING_REQUESTS
"""``_handle_eagle_family``: max_running_requests 48 when not given (kvplan.engines.sglang)."""
DRAFT_POOL_LAYERS = 1
"""``_build_hybrid_linear_kv_pool``: a draft worker's HybridLinearKVPool has ``full_attention_layer_ids = [0]``
("if draft worker, we only need 1 attention layer's kv pool")."""
GLM5_NEXT = "Glm5NextForConditionalGeneration"
"""GLM-5.3-Flash: KDA state + MLA with the pooled DSA indexer (``configs/hybrid_arch.py`` ``glm5_next_config``)."""


# The hybrid chain, step by step (SGLang 0.5.23):
#
# Sliding window (gpt-oss; ``model_executor/pool_configurator.py`` ``HybridSWAPoolConfigurator``):
#
#     full_per_token = kv_heads_per_rank × (head_dim + v_head_dim) × kv bytes        (× full layers)
#     swa_per_token  = swa kv_heads_per_rank × (swa_head_dim + swa_v_head_dim) × kv bytes   (× SWA layers)
#     cell_size      = full_per_token × full_layers + swa_full_tokens_ratio × swa_per_token × swa_layers   (a float)
#     max_total      = int(available // cell_size)
#     full_tokens    = max_total // page × page          (logged max_total_num_tokens)
#     swa_tokens     = int(full_tokens × swa_full_tokens_ratio) // page × page
#     log: "Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}"
#
# ``swa_full_tokens_ratio`` defaults to 0.8 (``arg_groups/fields/schedule.py``: ``fallback=0.8``); DeepSeek-V4 and
# Inkling set 0.1 (``arg_groups/model_overrides/``). ``validate_swa_pool_size`` refuses a SWA pool of at most
# window + page tokens. ``SWARequestCapPoolConfigurator`` (SWA pool sized from ``--max-running-requests`` with
# the radix cache disabled: knobs ``disable_radix_cache``, ``swa_eviction_interval``) is kvplan.engines.sglang_swa_cap;
# ``--enable-unified-memory`` (off by default) is not planned.
#
# Linear-attention / Mamba state (Qwen3-Next, Kimi-Linear; ``mem_cache/kv_cache_configurator.py``):
#
# - ``_profile_available_bytes``: rest = free after weights − pre_load_free × (1 − mem_fraction_static) (GiB
#   floats), then ``_handle_max_mamba_cache`` takes the state pool out of it BEFORE the token pool is sized;
# - ``_handle_max_mamba_cache`` without ``--max-mamba-cache-size`` (no speculative decoding):
#   mamba_budget = rest × r / (1 + r), r = ``mamba_full_memory_ratio`` (default 0.9);
#   max_mamba_cache_size K = int((mamba_budget × 2^30 − per_req) // per_req); rest −= (K + 1) × per_req / 2^30
#   (+1: the pool's padding slot); K ≤ 0 is SGLang's "Not enough GPU memory for hybrid (mamba/linear-attention)
#   state cache" start-up error;
# - ``per_req`` = ``mamba_cache_per_req`` (``configs/mamba_utils.py``): conv + temporal state × every linear layer,
#   conv bf16, temporal the config's ``mamba_ssm_dtype`` else float32 (kvplan.models.cache.LinearState);
# - the token pool: ``DefaultPoolConfigurator`` with the cell over ``full_attention_layer_ids`` only;
# - ``resolve_max_num_reqs``: max_running_requests = min(its usual value, K // mamba_ratio), logged as
#   "max_running_requests is capped to N by the mamba state cache"; ``_calculate_mamba_ratio``: 1 with the radix
#   cache disabled, else ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` 3 + the extra-buffer tracking slots
#   (``get_mamba_tracking_slots``: 2 with the overlap scheduler, 1 without). Qwen3-Next and Kimi-Linear are in
#   ``_MAMBA_EXTRA_BUFFER_ARCHS`` (``arg_groups/overrides.py``), the linear-attention backend defaults to triton and
#   the overlap scheduler is on, so ``_mamba_radix_cache_resolution`` picks ``extra_buffer``: 5 slots a request.
# - log (``mem_cache/memory_pool.py`` ``MambaPool``): "Mamba Cache is allocated. max_mamba_cache_size: K,
#   conv_state size: X GB, ssm_state size: Y GB".
#
# Knobs: ``swa_full_tokens_ratio`` and ``max_mamba_cache_size`` (SGLang's flags; the explicit size skips the
# auto-sizing, ``// attn_dp_size`` per rank as ``_handle_max_mamba_cache`` does).
#
# What the plan's figures mean for a hybrid: ``rows`` / ``logged_tokens`` are the full-attention pool's
# ``max_total_num_tokens`` (the scheduler line's figure); ``usable_pages`` its pages; ``cell`` its bytes per token
# (full layers only); ``pools`` the full pool, the SWA pool and the Mamba state pool, each with what one request
# takes from it (kvplan.engines.common.Demand).
#
# Speculative decoding (NEXTN / EAGLE) is planned for Qwen3-Next: max_running_requests 48 when not given
# (``_handle_eagle_family``); ``_handle_max_mamba_cache`` solves K jointly with the intermediate state,
# K = int((budget − per_req × (1 + D)) // (per_req × (1 + D / mamba_ratio))), and reserves
# per_req × (min(max_running_requests, K // mamba_ratio) + 1) × D out of rest; MambaPool allocates
# ``intermediate_ssm_state_cache`` and the (deduplicated) ``intermediate_conv_window``; the draft worker's one-layer
# HybridLinearKVPool over the target's rows comes from the slack (``_with_draft_pool``).
#
# Not planned, each refused with one line (never a silently wrong pool): speculative decoding on the other hybrids
# (draft SWA pools, other drafts' state), dcp, SWA and linear state in one model,
# a model without attention layers (all-state), other SGLang versions than 0.5.23; an all-sliding-window model is
# planned by kvplan.engines.sglang_allswa.
#
# GLM-5.3-Flash (``Glm5NextForConditionalGeneration``: KDA state + MLA with the DSA indexer pooled over
# ``index_kpool`` tokens; ``configs/hybrid_arch.py`` ``glm5_next_config``) is the linear-state path above with a DSA
# token pool: ``_build_hybrid_linear_kv_pool`` builds ``HybridLinearKVPool`` over ``DSATokenToKVPool`` on the
# full layers, and ``DefaultPoolConfigurator._compute_cell_size`` charges ``calculate_mla_kv_cache_dim`` × full
# layers + ceil((index_head_dim + index_head_dim / 128 × 4) / index_kpool) × indexer layers (33 B for kpool 4);
# the page is 64 × index_kpool over any --page-size (``_deepseek_family_overrides``); it is in
# ``_MAMBA_EXTRA_BUFFER_ARCHS`` (5 state slots a request); the pooled-index compress tails sit beside the pool.
#
# DeepSeek-V4 (``DSV4PoolConfigurator``: the full pool of C4 / C128 compressed KV and C4 indexer keys, the SWA pool
# with the C4 compress-state rings, the C128 compress-state rings, one per running request) is planned by
# ``plan_dsv4`` below, each rule cited there (with speculative decoding: 16 / 256-row compress rings, bytes per token
# inflated by (layers + 1) / layers for the draft worker); refused there: dcp / pp, SM100 (V4.1 layout), AMD, more
# draft tokens than the C4 ring serves (SGLang's assertion).
# Not expressible: ``--mamba-full-memory-ratio`` (kvplan has no knob: 0.9 assumed, said in the knobs).
def mamba_slots_per_request(*, radix_cache: bool = True, extra_buffer: bool = True, overlap: bool = True) -> int:
    """``_calculate_mamba_ratio``: state slots SGLang reserves per running request.

    >>> mamba_slots_per_request(), mamba_slots_per_request(overlap=False), mamba_slots_per_request(extra_buffer=False)
    (5, 4, 3)
    """
    if not radix_cache:
        return 1
    tracking = (2 if overlap else 1) if extra_buffer else 0  # get_mamba_tracking_slots
    return MAMBA_BASE_SLOTS + tracking


def mamba_cache_size(rest_gib: float, per_req: int, ratio: float = MAMBA_FULL_MEMORY_RATIO) -> int:
    """``_handle_max_mamba_cache`` auto-size: K = int((rest × r / (1 + r) × 2^30 − per_req) // per_req).

    >>> mamba_cache_size(19.0, 100 * 2**20)   # 9.0 GiB budget = 92.16 states of 100 MiB, minus the padding one
    91
    """
    budget_bytes = rest_gib * ratio / (1 + ratio) * (1 << 30)
    return int((budget_bytes - per_req) // per_req)


def mamba_cache_size_spec(
    rest_gib: float, per_req: int, draft_tokens: int, slots_per_request: int, ratio: float = MAMBA_FULL_MEMORY_RATIO
) -> int:
    """``_handle_max_mamba_cache`` auto-size with speculative decoding ("Joint solve: main_state + intermediate =
    mamba_budget"): K = int((budget − per_req × (1 + D)) // (per_req × (1 + D / mamba_ratio))).

    >>> mamba_cache_size_spec(19.0, 100 * 2**20, 4, 5)   # 92.16 states of 100 MiB: (92.16 − 5) // 1.8
    48
    """
    budget_bytes = rest_gib * ratio / (1 + ratio) * (1 << 30)
    return int((budget_bytes - per_req * (1 + draft_tokens)) // (per_req * (1 + draft_tokens / slots_per_request)))


def swa_pool_tokens(available: int, *, full_cell: int, swa_cell: int, ratio: float, page: int) -> tuple[int, int]:
    """``HybridSWAPoolConfigurator.calculate_pool_sizes`` + ``_solve_pool_sizes``: (full_tokens, swa_tokens).

    >>> swa_pool_tokens(10**9, full_cell=36_864, swa_cell=36_864, ratio=0.8, page=1)   # 10^9 // 66,355.2
    (15070, 12056)
    """
    cell = full_cell + ratio * swa_cell
    max_total = int(available // cell)
    full = max_total // page * page
    return full, int(full * ratio) // page * page


def swa_pool_error(swa_tokens: int, window: int, page: int) -> str | None:
    """``MemoryPoolConfigurator.validate_swa_pool_size``: SGLang's start-up error for a SWA pool that cannot hold
    one request (None when it can)."""
    if window + page < swa_tokens:
        return None
    return (
        f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor is "
        f"sliding_window_size ({window}) + page_size ({page}). Increase --swa-full-tokens-ratio or the total KV budget."
    )


@dataclass(frozen=True)
class HybridSizer:
    """The hybrid steps kvplan.engines.sglang.plan_pools runs for a hybrid model's extra pools."""

    full_layers: int
    swa: SlidingWindow | None = None
    swa_layers: int = 0
    state: LinearState | None = None
    state_layers: int = 0
    swa_full_tokens_ratio: float = SWA_FULL_TOKENS_RATIO
    mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO
    slots_per_request: int = 1
    max_mamba_cache_size: int | None = None
    """--max-mamba-cache-size per attention-DP rank (``max_mamba_cache_size // attn_dp_size``); None: auto-sized."""
    draft_tokens: int = 0
    """--speculative-num-draft-tokens D; 0 without speculative decoding."""
    spec_running: int = 1
    """max(1, max_running_requests // attn_dp_size): the running requests ``_handle_max_mamba_cache`` reserves the
    speculative state buffers for (before the state slots cap them)."""
    dedup_conv: bool = True
    """``memory_pool.conv_window_dedup_enabled``: on CUDA for a non-KDA state with eagle top-k ≤ 1 the conv
    intermediate is one (D + conv_kernel − 2)-column window a slot, else D windows of conv_kernel − 1 columns."""
    eviction_interval: int = SWA_EVICTION_INTERVAL
    """SGLANG_SWA_EVICTION_INTERVAL (the ``swa_eviction_interval`` knob)."""
    swa_cap: SwaRequestCap | None = None
    """Set when SWARequestCapPoolConfigurator sizes the SWA pool (kvplan.engines.sglang_swa_cap), else the ratio."""

    def spec_requests(self, slots: int) -> int:
        """``_handle_max_mamba_cache`` ``capped_reqs`` = min(max(1, max_running_requests // dp), K // mamba_ratio).

        The buffers are allocated for the final max_running_requests (``mamba_spec_state_size``), which is the same
        number unless the token pool's rows // 2 is smaller still."""
        return min(max(1, self.spec_running), slots // self.slots_per_request)

    def spec_reserved_bytes(self, slots: int, attn_tp: int) -> int:
        """What ``_handle_max_mamba_cache`` takes out of rest_memory for the speculative intermediate state:
        per_req × (capped_reqs + 1) × D (0 without speculative decoding)."""
        if not self.draft_tokens or self.state is None:
            return 0
        return self.state_bytes_per_request(attn_tp) * (self.spec_requests(slots) + 1) * self.draft_tokens

    def spec_alloc_bytes(self, slots: int, attn_tp: int) -> int:
        """MambaPool's speculative buffers (``mem_cache/memory_pool.py``): ``intermediate_ssm_state_cache``
        [layers, reqs + 1, D, recurrent state] in the recurrent dtype and ``intermediate_conv_window``
        [layers, reqs + 1, D + conv_kernel − 2 (deduplicated) or D × (conv_kernel − 1), conv_dim / tp] in the conv
        dtype."""
        if not self.draft_tokens or self.state is None:
            return 0
        st = self.state
        conv_b, rec_b = st.dtype_bytes("sglang")
        rows = self.state_layers * (self.spec_requests(slots) + 1)
        win = st.conv_kernel - 1
        cols = self.draft_tokens + win - 1 if self.dedup_conv else self.draft_tokens * win
        ssm = rows * self.draft_tokens * st.recurrent_elements(attn_tp) * rec_b
        return ssm + rows * cols * (st.conv_elements(attn_tp) // win) * conv_b

    def state_bytes_per_request(self, attn_tp: int) -> int:
        """``mamba_cache_per_req``: one request's conv + temporal state over every linear layer, one rank."""
        if self.state is None:
            return 0
        try:
            return self.state.bytes_per_request(attn_tp, "sglang") * self.state_layers
        except PlanError as e:  # Mamba2StateShape.create: divide() asserts
            raise PlanError(f"SGLang shards the linear-attention state by attention tp {attn_tp}: {e}") from None

    def take_state(self, rest_gib: float, attn_tp: int) -> tuple[float, int, str | None]:
        """(rest left for the token pools in GiB, max_mamba_cache_size, start-up error or None)."""
        if self.state is None:
            return rest_gib, 0, None
        per = self.state_bytes_per_request(attn_tp)
        k = self.max_mamba_cache_size
        if k is None and self.draft_tokens:
            k = mamba_cache_size_spec(rest_gib, per, self.draft_tokens, self.slots_per_request,
                                      self.mamba_full_memory_ratio)  # fmt: skip
        elif k is None:
            k = mamba_cache_size(rest_gib, per, self.mamba_full_memory_ratio)
        # the intermediate state is reserved (both the explicit and the auto-sized path) before K is validated
        rest_gib -= self.spec_reserved_bytes(k, attn_tp) / (1 << 30)
        if k <= 0:
            return (
                rest_gib,
                0,
                (
                    f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                    f"max_mamba_cache_size={k} (total_rest_memory={rest_gib:.2f} GB, "
                    f"mamba_cache_per_req={per / (1 << 20):.2f} MB)"
                ),
            )
        return rest_gib - (k + 1) * per / (1 << 30), k, None

    def swa_cell(self, dtype: str, attn_tp: int) -> int:
        """SWA bytes per token over every SWA layer (``_swa_cell_bytes``)."""
        return self.swa.bytes_per_token(attn_tp, dtype) * self.swa_layers if self.swa is not None else 0

    def pool_tokens(self, available: int, full_cell: int, dtype: str, attn_tp: int, page: int) -> tuple[int, int]:
        """(full-attention pool tokens, SWA pool tokens) from the KV budget left after any state pool."""
        if self.swa is None:
            return (available // full_cell // page * page if full_cell else 0), 0
        if self.swa_cap is not None:
            return self.swa_cap.pool_tokens(available, full_cell=full_cell, swa_cell=self.swa_cell(dtype, attn_tp),
                                            page=page)  # fmt: skip
        return swa_pool_tokens(available, full_cell=full_cell, swa_cell=self.swa_cell(dtype, attn_tp),
                               ratio=self.swa_full_tokens_ratio, page=page)  # fmt: skip

    def swa_tokens_for(self, full_tokens: int, page: int) -> int:
        if self.swa_cap is not None:
            return self.swa_cap.capped(full_tokens, page)
        return int(full_tokens * self.swa_full_tokens_ratio) // page * page if self.swa is not None else 0

    def check_swa_pool(self, swa_tokens: int, page: int) -> str | None:
        # SWARequestCapPoolConfigurator does not call validate_swa_pool_size
        return swa_pool_error(swa_tokens, self.swa.window, page) if self.swa and not self.swa_cap else None

    def running_cap(self, slots: int) -> int | None:
        """``resolve_max_num_reqs``: K // mamba_ratio bounds the running requests (None without state); with
        speculative decoding and no --max-running-requests, SGLang's 48 (``_handle_eagle_family``) does too. The 48
        is resolved after the memory-fraction heuristic (``arg_groups/pipeline.py`` runs
        ``handle_gpu_memory_settings`` before ``handle_speculative_decoding``), so it is a cap here, not a set knob
        that would shrink the decode CUDA-graph batch the reserve is computed with."""
        if self.state is None:
            return None
        cap = slots // self.slots_per_request
        return min(cap, self.spec_running) if self.draft_tokens else cap

    def cap_note(self, knob: Knob, mrr: int, cap: int, slots: int) -> tuple[Knob, list[str], str | None]:
        """The max_running_requests knob, SGLang's warning when the state slots cap it, its error when none fits."""
        if cap <= 0:
            return (
                knob,
                [],
                (
                    f"Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                    f"max_mamba_cache_size={slots}, mamba_ratio={self.slots_per_request}, resulting max_num_reqs={cap}."
                ),
            )
        if knob.as_int() <= mrr:
            return knob, [], None
        if self.draft_tokens and mrr == self.spec_running < slots // self.slots_per_request:
            why = (f"default: {SPEC_MAX_RUNNING_REQUESTS} // dp with speculative decoding (_handle_eagle_family: "
                   "\"Max running requests is reset to 48 for speculative decoding.\")")  # fmt: skip
            return Knob("max_running_requests", mrr, why), [], None
        said = (
            f"max_running_requests is capped to {mrr} by the mamba state cache (max_mamba_cache_size={slots}, "
            f"{self.slots_per_request} state slots per request)"
        )
        origin = f"{knob.origin}; capped: max_mamba_cache_size {slots:,} // {self.slots_per_request} slots"
        return Knob("max_running_requests", mrr, origin), [said], None

    def swa_alloc_bytes(self, swa_tokens: int, dtype: str, attn_tp: int, page: int) -> int:
        """SWAKVPool's SWA buffers: a token pool of swa_tokens + page rows over the SWA layers."""
        return (swa_tokens + page) * self.swa_cell(dtype, attn_tp)

    def state_alloc_bytes(self, slots: int, attn_tp: int) -> int:
        """MambaPool: (max_mamba_cache_size + 1 padding slot) × per_req, + the speculative buffers."""
        return (slots + 1) * self.state_bytes_per_request(attn_tp) + self.spec_alloc_bytes(slots, attn_tp)


def _engine_refuses(arch: ModelArch, dep: Deployment, why: str, layer: int | None = None) -> PlanError:
    """One line, exit 2: what kvplan does not yet plan, the model (and layer), the engine."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return PlanError(f"kvplan does not yet plan {why} ({where}) on SGLang {dep.engine_version}")


def _first_layer(arch: ModelArch, kind: type) -> int:
    return next(layer.index for layer in arch.layers if any(isinstance(c, kind) for c in layer.caches))


def sizer_for(arch: ModelArch, dep: Deployment) -> tuple[ModelArch, HybridSizer]:
    """The hybrid's full-attention layers as a uniform model, and the steps that size its other pools.

    Refuses (one line, exit 2) what SGLang 0.5.23 sizes in ways kvplan does not plan.
    """
    if parse_version(dep.engine_version) != HYBRID_VERSION:
        raise _engine_refuses(arch, dep, "hybrid pools (read from SGLang 0.5.23 only: set engine_version=0.5.23)")
    kinds = {type(c) for layer in arch.layers for c in layer.caches}
    if CompressedAttention in kinds:
        raise _engine_refuses(
            arch, dep, "DeepSeek-V4's pools (SGLang 0.5.23 sizes them with DSV4PoolConfigurator: SWA, C4, C128 and "
            "compressor-state pools)"
        )  # fmt: skip
    if IndexerK in kinds and arch.architecture != GLM5_NEXT:
        raise _engine_refuses(arch, dep, "indexer K layers beside linear-attention state", _first_layer(arch, IndexerK))
    if SlidingWindow in kinds and LinearState in kinds:
        raise _engine_refuses(arch, dep, "sliding-window and linear-attention layers in one model")
    if dep.mtp and arch.architecture == "KimiLinearForCausalLM":
        # no KimiLinear NextN model under models/ and no draft-mode rewrite for it in configs/model_config.py
        raise PlanError(
            f"SGLang {dep.engine_version} has no draft for speculative decoding with Kimi-Linear ({arch.name}): it "
            "ships no MTP / NextN layer (no num_nextn_predict_layers) and SGLang has no Kimi-Linear NextN model"
        )
    if dep.mtp and arch.architecture not in (*QWEN3_NEXT_FAMILY, GLM5_NEXT):
        raise _engine_refuses(
            arch, dep, "speculative decoding with a hybrid model other than Qwen3-Next and GLM-5.3-Flash (draft SWA "
            "pools, other drafts' state)"
        )  # fmt: skip
    if dep.dcp > 1:
        raise _engine_refuses(arch, dep, f"dcp {dep.dcp} with a hybrid model")
    swa_layers = [c for layer in arch.layers for c in layer.caches if isinstance(c, SlidingWindow)]
    states = [s for layer in arch.layers if (s := layer.state) is not None]
    plain = [layer for layer in arch.layers if layer.state is None and type(layer.caches[0]) is not SlidingWindow]
    full = [layer.caches[0] for layer in plain]
    if not full:
        raise _engine_refuses(arch, dep, "a model without attention layers (all linear-attention state)")
    if len(set(swa_layers)) > 1 or len(set(states)) > 1 or len(set(full)) > 1:
        raise _engine_refuses(arch, dep, "layers of one kind with different shapes")
    # GLM-5.3-Flash: the DSA pool of its MLA layers (HybridLinearKVPool over DSATokenToKVPool, one indexer K per
    # full layer that owns one: pool_configurator._compute_dsa_indexer_cell_size over full_attention_layer_ids)
    owners = tuple(layer.indexer is not None for layer in plain) if arch.architecture == GLM5_NEXT else ()
    # the NextN draft is in cell_size only when the TARGET config names num_nextn_predict_layers
    # (``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``): GLM-5.3-Flash's does (1), Qwen3-Next's does not
    # (num_mtp_layers 0 here; _with_draft_pool allocates its draft pool beyond the budget)
    drafts = arch.num_mtp_layers if arch.architecture == GLM5_NEXT else 0
    view = replace(arch, num_layers=len(full), layers=(), indexer_full=owners, num_mtp_layers=drafts)
    if view.attention != full[0] or not isinstance(full[0], FullAttention | MlaLatent):
        raise _engine_refuses(arch, dep, f"full-attention layers unlike the config's fields ({full[0]})")
    slots = 1
    if states:
        slots = mamba_slots_per_request(radix_cache=not dep.disable_radix_cache,
                                        extra_buffer=arch.architecture in MAMBA_EXTRA_BUFFER_ARCHS)  # fmt: skip
    interval = SWA_EVICTION_INTERVAL if dep.swa_eviction_interval is None else dep.swa_eviction_interval
    cap = request_cap_for(dep, window=swa_layers[0].window, eviction_interval=interval,
                          full_layers=len(full)) if swa_layers else None  # fmt: skip
    ratio = SWA_FULL_TOKENS_RATIO if dep.swa_full_tokens_ratio is None else dep.swa_full_tokens_ratio
    explicit = None if dep.max_mamba_cache_size is None else dep.max_mamba_cache_size // max(dep.dp_attention, 1)
    # the running requests the speculative buffers are reserved for: --max-running-requests, else SGLang's 48
    running = SPEC_MAX_RUNNING_REQUESTS if dep.max_running_requests is None else dep.max_running_requests
    topk = dep.speculative_eagle_topk
    sizer = HybridSizer(
        full_layers=len(full),
        swa=swa_layers[0] if swa_layers else None,
        swa_layers=len(swa_layers),
        state=states[0] if states else None,
        state_layers=len(states),
        swa_full_tokens_ratio=ratio,
        slots_per_request=slots,
        max_mamba_cache_size=explicit,
        draft_tokens=dep.speculative_num_draft_tokens,
        spec_running=max(1, running // max(dep.dp_attention, 1)),
        dedup_conv=dep.gpu.vendor == "nvidia" and (topk is None or topk <= 1)
        and not (states and states[0].family == "kda"),
        eviction_interval=interval,
        swa_cap=cap,
    )  # fmt: skip
    return view, sizer


def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pools SGLang 0.5.23 builds for a hybrid model on each GPU (module docstring)."""
    if any(isinstance(c, CompressedAttention) for layer in arch.layers for c in layer.caches):
        return plan_dsv4(arch, dep)
    view, sizer = sizer_for(arch, dep)
    dep, said = _dsa_page_override(arch, dep)
    p = _with_pools(sglang.plan_pools(view, dep, sizer), arch, sizer)
    notes = (said, _kpool_tail_note(view, p)) if arch.architecture == GLM5_NEXT else ()
    return replace(p, notes=(*p.notes, *(n for n in notes if n)))


def _kpool_tail_note(view: ModelArch, p: PoolPlan) -> str:
    """GLM-5.3-Flash's pooled-index compress tails (``DSATokenToKVPool._init_kpool_compress_tail_buffers``, only
    with ``index_kpool > 1`` and compression): a K and a score tensor, bf16, of (max_running_requests + 2) rows ×
    (index_kpool + draft tokens) × index_head_dim on each indexer layer; allocated beside the pool, from the slack."""
    rows = p.knob("max_running_requests").as_int() + 2  # req_to_token rows (+1) and the sentinel slot (+1)
    width = view.index_kpool + p.deployment.speculative_num_draft_tokens
    # with speculative decoding the draft worker's one-layer DSA pool has its own tails (index_kpool > 1)
    layers = view.full_indexer_layers + (1 if p.draft_layers else 0)
    size = 2 * rows * width * view.index_head_dim * 2 * layers
    return (f"pooled-index compress tails: 2 × {rows:,} requests × {width} × {view.index_head_dim} × 2 B × "
            f"{layers} indexer layers = {size:,} B beside the pool, from the slack")  # fmt: skip


def _dsa_page_override(arch: ModelArch, dep: Deployment) -> tuple[Deployment, str]:
    """GLM-5.3-Flash: SGLang's DSA override sets the page to 64 × index_kpool over any --page-size
    (``model_overrides/deepseek_v2.py`` ``_deepseek_family_overrides``: "Setting page size to {page_size} for
    DeepSeek DSA.", a model override declared over the flag), so a pooled index key never spans two pages."""
    page = 64 * arch.index_kpool
    if arch.architecture != GLM5_NEXT or dep.page_size in (None, page) or dep.gpu.vendor != "nvidia":
        return dep, ""
    said = (f"SGLang sets page_size {page} (64 × index_kpool {arch.index_kpool}) for this DSA model over the "
            f"deployment's page_size {dep.page_size}: \"Setting page size to {page} for DeepSeek DSA.\"")  # fmt: skip
    return replace(dep, page_size=None), said


def _with_pools(p: PoolPlan, arch: ModelArch, s: HybridSizer) -> PoolPlan:
    """The plan of the full-attention layers, told as the hybrid's: its pools, knobs, chain terms and notes."""
    page, tp = p.page_tokens, p.attn_tp
    full_kind = "MLA" if p.mla_layout is not None else "full attention"
    pools = [
        Pool(
            name=f"{full_kind} ({s.full_layers} layers)",
            unit="page",
            page_tokens=page,
            capacity=p.usable_pages,
            unit_bytes=p.cell.total_bytes * page,
            demands=(Demand(full_kind, "token"),),
        )
    ]
    knobs = list(p.knobs)
    chain = [_hybrid_rows_term(t, p, s) for t in p.chain]
    notes = list(p.notes)
    if s.swa is not None:
        swa_tokens = p.extras["swa_tokens"]
        # compute_swa_request_cap: a running request keeps window + eviction interval tokens, + a padding page
        # and the next decode page: ceil(min(tokens, window + 128) / page) + 2 pages
        span = s.swa.window + s.eviction_interval
        pools.append(
            Pool(
                name=f"sliding window ({s.swa_layers} layers)",
                unit="page",
                page_tokens=page,
                capacity=swa_tokens // page,
                unit_bytes=s.swa_cell(p.kv_dtype, tp) * page,
                demands=(Demand("sliding-window", "window", window=span, extra=2),),
            )
        )
        swa_knobs, term, said = swa_pool_story(p, s)
        knobs += swa_knobs
        chain.append(term)
        notes.append(said)
    if s.state is not None:
        slots = p.extras["max_mamba_cache_size"]
        per = s.state_bytes_per_request(tp)
        pools.append(
            Pool(
                name=f"mamba state ({s.state_layers} layers)",
                unit="slot",
                page_tokens=1,
                capacity=slots,
                unit_bytes=per,
                demands=(Demand("linear-attention state", "request", units=s.slots_per_request),),
            )
        )
        how = "default: int((rest × 0.9 / 1.9 × 2^30 − per_req) // per_req)"
        if s.max_mamba_cache_size is not None:
            how = "set" if p.deployment.dp_attention <= 1 else f"set, // dp_attention {p.deployment.dp_attention}"
        else:
            knobs.append(Knob("mamba_full_memory_ratio", s.mamba_full_memory_ratio, "default: 0.9 (no kvplan knob)"))
        knobs.append(Knob("max_mamba_cache_size", slots, how))
        at = next(i for i, t in enumerate(chain) if t.label == "available for the KV pool")
        chain.insert(
            at,
            Term(
                "Mamba state pool",
                (slots + 1) * per,
                f"(max_mamba_cache_size {slots:,} + 1) × {per:,} B per request, taken before the token pool",
            ),
        )
        if s.draft_tokens:
            reqs = s.spec_requests(slots)
            chain.insert(
                at + 1,
                Term(
                    "speculative state (reserved)",
                    s.spec_reserved_bytes(slots, tp),
                    f"{per:,} B per request × (min(max_running_requests {s.spec_running}, {slots:,} // "
                    f"{s.slots_per_request}) = {reqs:,} + 1) × {s.draft_tokens} draft tokens; allocated "
                    f"{s.spec_alloc_bytes(slots, tp):,} B (intermediate SSM states + conv windows)",
                ),
            )
        notes.append(
            f"Mamba state: {s.slots_per_request} slots reserved per running request (3 + 2 extra-buffer tracking"
            " slots with the overlap scheduler); the radix cache keeps finished requests' states in free slots."
            " ASSUMPTION: radix cache on, overlap scheduler on, triton linear-attention backend (SGLang's defaults)"
            if s.slots_per_request == 5
            else f"Mamba state: {s.slots_per_request} slots reserved per running request"
        )
    if s.draft_tokens and p.draft_layers:  # GLM-5.3-Flash: the draft rows are in the cell (plan_pools)
        notes.append(
            f"speculative decoding (NEXTN / EAGLE, {s.draft_tokens} draft tokens): the config's "
            f"{p.draft_layers} NextN layer is in cell_size (DefaultPoolConfigurator: int(target KV × "
            f"{p.draft_layers} / {s.full_layers}) + its indexer K on every draft layer) and the draft worker's "
            "HybridLinearKVPool of one DSA layer shares the target's rows and Mamba state slots; " + _spec_state_note(s)
        )
    p = replace(p, arch=arch, pools=tuple(pools), knobs=tuple(knobs), chain=tuple(chain), notes=tuple(notes))
    return _with_draft_pool(p, s) if s.draft_tokens and not p.draft_layers else p


def _spec_state_note(s: HybridSizer) -> str:
    return (
        f"SGLang reserves {s.draft_tokens} intermediate states per running request (intermediate_ssm_state_cache, "
        "intermediate_conv_window" + ("" if s.dedup_conv else ", dense: KDA or eagle top-k > 1")
        + ") out of the Mamba budget before sizing max_mamba_cache_size (_handle_max_mamba_cache: "
        "K = int((budget − per_req × (1 + D)) // (per_req × (1 + D / mamba_ratio))))"
    )  # fmt: skip


def _with_draft_pool(p: PoolPlan, s: HybridSizer) -> PoolPlan:
    """Qwen3-Next with MTP (NEXTN): the draft worker's own KV pool and the speculative notes.

    The draft pool is sized off the TARGET config when no draft path is given
    (``model_runner_components/spec_aux_hidden_state.py`` ``_resolve_eagle_aux_hidden_state``); Qwen3-Next's
    config names no ``num_nextn_predict_layers``, so ``eagle_draft_num_layers`` stays None and
    ``DefaultPoolConfigurator`` adds no draft term to cell_size. The draft worker then reuses the target's
    ``max_total_num_tokens`` (``KVCacheConfigurator.configure``: "Draft worker requires memory_pool_config") and
    ``_build_hybrid_linear_kv_pool`` builds a ``HybridLinearKVPool`` of ONE full-attention layer (``[0] if
    is_draft_worker``) over it, sharing the target's Mamba pool: (rows + page) rows × the layer's bytes, allocated
    beyond the budget, from the slack."""
    page = p.page_tokens
    draft = (p.rows + page) * p.mla_bytes_per_layer * DRAFT_POOL_LAYERS if p.rows else 0
    mmap = tuple(
        replace(sg, bytes=sg.bytes + draft) if sg.label == "draft"
        else replace(sg, bytes=sg.bytes - draft) if sg.label == "reserve" else sg
        for sg in p.memory_map
    )  # fmt: skip
    chain = (
        *p.chain,
        Term(
            "MTP draft KV pool",
            draft,
            f"(rows {p.rows:,} + {page}) × {p.mla_bytes_per_layer:,} B × {DRAFT_POOL_LAYERS} NextN layer: "
            "not in cell_size (the config names no num_nextn_predict_layers), allocated from the slack",
        ),
    )
    notes = [
        f"speculative decoding (NEXTN / EAGLE, {s.draft_tokens} draft tokens): the draft worker shares the target's "
        f"token pool size ({p.rows:,} rows) with its own {DRAFT_POOL_LAYERS}-layer KV pool "
        f"({draft:,} B beyond the budget, from the slack) and the target's Mamba state slots",
        "speculative state: " + _spec_state_note(s),
    ]
    return replace(
        p,
        chain=chain,
        memory_map=mmap,
        allocated_bytes=p.allocated_bytes + draft,
        extras={**p.extras, "draft_alloc_bytes": draft},
        notes=(*p.notes, *notes),
    )


def _hybrid_rows_term(t: Term, p: PoolPlan, s: HybridSizer) -> Term:
    """The chain's rows line as the hybrid computes it (the full layers' cell; SWA: the ratio-weighted cell)."""
    if t.label == "available for the KV pool" and s.state is not None:
        return Term(t.label, t.bytes, "free after weights − slack − Mamba state pool")
    if t.label == "cell":
        return Term("cell", t.bytes, f"bytes per full-attention pool row ({s.full_layers} full layers)")
    if t.label != "pool rows per GPU" or s.swa is None:
        return t
    if s.swa_cap is not None:
        return swa_cap_rows_term(p, s)
    swa = s.swa_cell(p.kv_dtype, p.attn_tp)
    cell = f"({p.cell.total_bytes:,} + {s.swa_full_tokens_ratio} × {swa:,})"
    page = p.page_tokens
    return Term(t.label, None, f"{p.rows:,} = int(available // {cell}) // {page} × {page} (full_layer_tokens)")


MAMBA_TRACK_INTERVAL = 256
"""``--mamba-track-interval`` default (``arg_groups/fields/exec_.py``): decode tokens between state checkpoints."""

PREFIX_REUSE = {
    "sliding-window": (
        "SGLang (UnifiedRadixCache, SWA component): a prefix hit ends where the SWA KV of the sliding_window_size "
        "tokens before it is still cached (the match validator accumulates the window); the radix cache may have "
        "evicted (tombstoned) older SWA KV while the full-attention KV of those tokens stays"
    ),
    "linear-attention state": (
        "SGLang (UnifiedRadixCache, Mamba component): a prefix hit ends at the deepest node holding a cached state "
        f"(states checkpointed at the end of a prefill and every {MAMBA_TRACK_INTERVAL} decode tokens with the "
        "extra_buffer strategy); the full-attention KV up to there is reused and the state copied into the "
        "request's own slot (copy-on-write), the tokens after it are recomputed"
    ),
}
"""How a prefix hit is limited by each hybrid kind on SGLang 0.5.23 (``mem_cache/unified_cache/components/``
README and ``swa.py`` / ``mamba.py``: the match validators, ``finalize_match_result_in_cache``)."""


def prefix_reuse_rules(p: PoolPlan) -> tuple[str, ...]:
    """The sentences that limit what a prefix hit reuses on this SGLang hybrid plan (empty for a uniform plan)."""
    kinds = {d.kind for pool in p.pools for d in pool.demands}
    return tuple(text for kind, text in PREFIX_REUSE.items() if kind in kinds)


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


def dsv4_sizer_for(arch: ModelArch, dep: Deployment) -> tuple[ModelArch, Dsv4Sizer, list[str]]:
    """DeepSeek-V4 as SGLang 0.5.23 serves it: a view for the memory chain (an MHA model, as SGLang's
    ModelConfig sets ``attention_arch = AttentionArch.MHA`` for V4: the mem-fraction heuristic's non-MLA branch),
    the sizer, and the notes on what SGLang overrode. Refuses (one line, exit 2) what kvplan does not plan."""
    comp = [c for layer in arch.layers for c in layer.caches if isinstance(c, CompressedAttention)]
    ratios = {c.compress_ratio for c in comp}
    if not ratios <= {0, 4, 128} or len({(c.head_dim, c.qk_rope_head_dim, c.window) for c in comp}) != 1:
        raise _engine_refuses(arch, dep, f"DeepSeek-V4 compress ratios {sorted(ratios - {0, 4, 128})} (0, 4, 128 only)")
    d = dep.speculative_num_draft_tokens
    rings = SPEC_COMPRESS_RING if d else COMPRESS_RING
    for r in (4, 128):  # DSV4PoolConfigurator._assert_ring_serves_draft_tokens (c4 / c128 layers present)
        pad = compress_state_write_pad(r, rings[r])
        if d and any(c.compress_ratio == r for c in comp) and d > pad:
            raise PlanError(
                f"SGLang refuses it: speculative_num_draft_tokens={d} exceeds what the c{r} compress state ring can "
                f"keep resident (ring_size={rings[r]} serves at most {pad} draft tokens). Lower the draft count, or "
                "grow the ring in get_compress_state_ring_size()."
            )
    if dep.dcp > 1 or dep.pp > 1:
        raise _engine_refuses(arch, dep, f"DeepSeek-V4 with dcp {dep.dcp} / pp {dep.pp}")
    if dep.gpu.vendor != "nvidia" or dep.gpu.sm // 10 == 10:
        raise _engine_refuses(
            arch, dep, f"DeepSeek-V4's pools on {dep.gpu.name} (SGLang picks the V4.1 KV layout on SM100/SM103 and "
            "other pools on ROCm; kvplan plans the V4 FlashMLA layout of the other NVIDIA GPUs)"
        )  # fmt: skip
    if dep.kv_cache_dtype not in ("auto", "fp8_e4m3", "bfloat16"):
        # overrides._deepseek_v4_kv_cache_dtype
        raise PlanError(f"SGLang refuses DeepSeek-V4: {dep.kv_cache_dtype} is not supported for DeepseekV4ForCausalLM")
    first = comp[0]
    shape = Dsv4Shape(
        layers=len(comp),
        c4_layers=sum(c.compress_ratio == 4 for c in comp),
        c128_layers=sum(c.compress_ratio == 128 for c in comp),
        head_dim=first.head_dim,
        index_head_dim=arch.index_head_dim,
        window=first.window,
        ring4=rings[4],
        ring128=rings[128],
        # one draft layer over num_layers_total (the stage's compress_ratios: every layer)
        spec_infl=(len(comp) + 1) / len(comp) if d else 1.0,
    )
    notes = []
    if dep.page_size is not None and dep.page_size != DSV4_PAGE_SIZE:
        notes.append(f"SGLang sets page_size to {DSV4_PAGE_SIZE} for DeepseekV4ForCausalLM (model_overrides/"
                     f"deepseek_v4.py) over the deployment's {dep.page_size}")  # fmt: skip
    if dep.attention_backend is not None and dep.attention_backend != "dsv4":
        notes.append(f"SGLang sets attention_backend dsv4 for DeepseekV4ForCausalLM over {dep.attention_backend}")
    ratio = DSV4_SWA_FULL_TOKENS_RATIO if dep.swa_full_tokens_ratio is None else dep.swa_full_tokens_ratio
    requested = dep.max_running_requests if dep.max_running_requests is not None else DSV4_MAX_RUNNING_REQUESTS
    sizer = Dsv4Sizer(
        full_layers=0,
        swa_full_tokens_ratio=ratio,
        shape=shape,
        requested_mrr=max(1, requested // max(dep.dp_attention, 1)),
    )
    view = replace(arch, layers=(), indexer_full=())  # FullAttention(1 kv head, head_dim): SGLang's MHA
    return view, sizer, notes


def plan_dsv4(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pools SGLang 0.5.23 builds for DeepSeek-V4 on each GPU (DSV4PoolConfigurator, ratio mode).

    The memory chain is every SGLang plan's (``_profile_available_bytes``); then
    ``calculate_pool_sizes``: the c128 compress-state pool (``(mrr + 1) × 128`` ring rows) is fixed bytes taken
    first, the rest divided by ``bytes_per_full_token`` (0.1 × an SWA token + the C4 / C128 KV and indexer a full
    token adds) gives ``full_max_total_num_tokens`` (the logged ``max_total_num_tokens``: ``rows`` /
    ``logged_tokens`` here), and the SWA pool ``int(full × 0.1) // 256 × 256``. Log: "DSV4 pool sizes: full=F,
    swa=S, c4=F//4, c128=F//128, c4_state=S//256×8, c128_state=0" (the c128 state is sized after
    max_running_requests is known: (mrr + 1) × 128).
    """
    if parse_version(dep.engine_version) != HYBRID_VERSION:
        raise _engine_refuses(arch, dep, "hybrid pools (read from SGLang 0.5.23 only: set engine_version=0.5.23)")
    view, s, said = dsv4_sizer_for(arch, dep)
    dtype = "fp8_e4m3" if dep.kv_cache_dtype == "auto" else dep.kv_cache_dtype
    run = replace(dep, page_size=DSV4_PAGE_SIZE, attention_backend=None, kv_cache_dtype=dtype)
    p = sglang.plan_pools(view, run, s)
    return _with_dsv4_pools(p, arch, dep, s, said)


def _with_dsv4_pools(p: PoolPlan, arch: ModelArch, dep: Deployment, s: Dsv4Sizer, said: list[str]) -> PoolPlan:
    """The plan of the view, told as DeepSeek-V4's: its three pools, knobs, chain terms, allocation and notes."""
    sh = s._shape()
    page = sh.page
    rows, swa = p.rows, p.extras["swa_tokens"]
    mrr = min(s.requested_mrr, rows // 2) if rows else s.requested_mrr
    budget_fixed = sh.c128_state_fixed_bytes(s.requested_mrr)
    state_alloc = sh.c128_state_fixed_bytes(mrr)  # finalize_with_max_running_requests: (mrr + 1) × 128 rows
    idx_page = page // 4 * dsv4_indexer_bytes(sh.index_head_dim) * sh.c4_layers
    main_page = sh.full_page_bytes - idx_page
    full_pages, swa_pages = rows // page, swa // page
    layers = f"C4 {sh.c4_layers} layers with the indexer, C128 {sh.c128_layers} layers"
    pools = (
        Pool(
            name=f"compressed KV ({layers})",
            unit="page",
            page_tokens=page,
            capacity=full_pages,
            unit_bytes=sh.full_page_bytes,
            demands=(Demand("compressed attention", "token"),),
        ),
        Pool(
            name=f"sliding window ({sh.layers} layers, + C4 compress state)",
            unit="page",
            page_tokens=page,
            capacity=swa_pages,
            unit_bytes=sh.swa_page_bytes,
            demands=(Demand("sliding-window", "window", window=sh.window + SWA_EVICTION_INTERVAL, extra=2),),
        ),
        Pool(
            name=f"C128 compress state ({sh.c128_layers} layers)",
            unit="slot",
            page_tokens=1,
            capacity=mrr,
            unit_bytes=sh.c128_state_slot_bytes(),
            demands=(Demand("compress state", "request"),),
        ),
    )
    mrr_origin = "set" if dep.max_running_requests is not None else "default: 256 (apply_deepseek_v4_defaults)"
    if rows and mrr < s.requested_mrr:
        mrr_origin += f"; reduced to rows // 2 = {rows // 2:,}"
    knobs: list[Knob] = []
    for k in p.knobs:
        if k.name == "page_size":
            k = Knob(
                "page_size", page, "default: 256, forced for DeepseekV4ForCausalLM (model_overrides/deepseek_v4.py)"
            )
        elif k.name == "attention_backend":
            k = Knob(
                "attention_backend", "dsv4", "default: forced for DeepseekV4ForCausalLM; dsv4_attn_backend flashmla"
            )
        elif k.name == "kv_cache_dtype" and dep.kv_cache_dtype == "auto":
            k = Knob("kv_cache_dtype", "fp8_e4m3", "default: auto -> fp8_e4m3 for DeepseekV4ForCausalLM")
        elif k.name == "max_running_requests":
            k = Knob("max_running_requests", mrr, mrr_origin)
        elif k.name == "mla_layout":
            continue
        knobs.append(k)
    ratio_origin = "set" if dep.swa_full_tokens_ratio is not None else "default: 0.1 for DeepseekV4ForCausalLM"
    knobs.append(Knob("swa_full_tokens_ratio", s.swa_full_tokens_ratio, ratio_origin))
    knobs.append(Knob("dsv4_kv_layout", "V4 (584 B, pages padded to 576 B)", "default: SGLANG_DSV4_KV_LAYOUT auto"))
    per_token = sh.bytes_per_full_token(s.swa_full_tokens_ratio)
    chain: list[Term] = []
    for t in p.chain:
        if t.label == "cell":
            chain.append(
                Term(
                    "C128 compress-state pool",
                    budget_fixed,
                    f"ceil(({s.requested_mrr} + 1) × {sh.ring128} + {sh.ring128 + 1}, 128) × 128 rows × 2 × "
                    f"{sh.head_dim} × 4 B × "
                    f"{sh.c128_layers} layers, fixed bytes taken before the token pools",
                )
            )
            t = Term(
                "cell",
                None,
                f"bytes_per_full_token {per_token:,.2f} = ({s.swa_full_tokens_ratio} × {sh.swa_page_bytes / page:,.2f}"
                f" (SWA + C4 state) + {sh.full_page_bytes / page:,.2f} (C4 KV + indexer, C128 KV))"
                + (f" × ({sh.layers} + 1) / {sh.layers} (the draft worker)" if sh.spec_infl != 1.0 else ""),
            )
        elif t.label == "pool rows per GPU":
            t = Term(
                t.label,
                None,
                f"{rows:,} = int((available − C128 state) / {per_token:,.2f}) // {page} × {page} (full); "
                f"SWA {swa:,} = int(full × {s.swa_full_tokens_ratio}) // {page} × {page}",
            )
        elif t.label == "logged max_total_num_tokens":
            t = Term(
                t.label,
                None,
                f"DSV4 pool sizes: full={rows}, swa={swa}, c4={rows // 4}, c128={rows // 128}, "
                f"c4_state={swa_pages * sh.ring4}, c128_state=0",
            )
        chain.append(t)
    full_alloc = full_pages * sh.full_page_bytes
    swa_alloc = swa_pages * sh.swa_page_bytes
    notes = [n for n in p.notes] + said
    notes.append(
        "DeepSeek-V4 on SGLang 0.5.23 (DSV4PoolConfigurator, ratio mode): the full pool's pages carry the C4 "
        "compressed KV + indexer keys (one per 4 tokens) and the C128 compressed KV (one per 128); the SWA pool "
        f"holds each layer's last {sh.window} tokens + the C4 compress-state rings; one C128 ring per running request"
    )
    notes.append(
        "ASSUMPTION: SM90-class NVIDIA GPU (V4 FlashMLA layout), SGLANG_DSV4_COMPRESS_STATE_DTYPE float32, no "
        "online c128 compression, no HiSparse (SGLang's defaults); allocated bytes are "
        "the configurator's budget figures (the pools' padding pages are not modelled)"
    )
    draft = 0
    if dep.mtp:
        # the draft worker reuses the full / SWA sizes with its own one-layer pools (no c4 / c128 / state pools:
        # KVCacheConfigurator._derive_pool_sizes zeroes them): its bytes are the inflation's share of the budget
        draft = int(rows * per_token) - int(rows * per_token / sh.spec_infl)
        notes.append(
            f"speculative decoding (MTP / NEXTN, {dep.speculative_num_draft_tokens} draft tokens): "
            f"bytes_per_full_token × ({sh.layers} + 1) / {sh.layers} reserves the draft worker's one-layer pools "
            f"(~{draft:,} B at these "
            f"sizes); the compress-state rings grow to {sh.ring4} (C4) and {sh.ring128} (C128) rows "
            "(get_compress_state_ring_size), serving at most "
            f"{compress_state_write_pad(4, sh.ring4)} draft tokens; max_running_requests stays "
            f"{DSV4_MAX_RUNNING_REQUESTS} (apply_deepseek_v4_defaults runs before the speculative hook's 48)"
        )
    allocated = full_alloc + swa_alloc + state_alloc + draft
    extras = dict(p.extras)
    extras.update(
        {
            "draft_alloc_bytes": draft,
            "swa_alloc_bytes": swa_alloc,
            "c4_tokens": rows // 4,
            "c128_tokens": rows // 128,
            "c4_state_rows": swa_pages * sh.ring4,
            "c128_state_rows": (mrr + 1) * sh.ring128,
            "c128_state_alloc_bytes": state_alloc,
            "mla_alloc_bytes": 0,
            # ReqToTokenPool as plan_pools sizes it, with the max_running_requests SGLang really uses (256)
            "req_to_token_bytes": (mrr + 1) * (p.context_len + 4) * 4,
            "indexer_alloc_bytes": full_pages * idx_page,
        }
    )
    outside = next(
        sg for sg in p.memory_map if sg.label not in {"weights", "main KV", "indexer", "draft", "reserve", "free"}
    )
    weights = next(sg.bytes for sg in p.memory_map if sg.label == "weights")
    mm = memory_map(
        nvml_total=dep.gpu.nvml_total_bytes,
        outside=(outside.label, outside.bytes),
        weights=weights,
        main=full_pages * main_page + swa_alloc + state_alloc,
        indexer=full_pages * idx_page,
        draft=draft,
        available=p.available_bytes,
    )
    return replace(
        p,
        arch=arch,
        deployment=dep,
        pools=pools,
        knobs=tuple(knobs),
        chain=tuple(chain),
        notes=tuple(notes),
        cell=Cell(main_bytes=cdiv(main_page, page), indexer_bytes=cdiv(idx_page, page)),
        mla_layout=None,
        mla_bytes_per_layer=V4_ROW_BYTES,
        main_layers=sh.layers,
        indexer_bytes_per_layer=dsv4_indexer_bytes(sh.index_head_dim),
        indexer_layers=sh.c4_layers,
        indexer_rule="compress_ratio 4 layers (C4), on their compressed tokens",
        max_running_requests=mrr,
        allocated_bytes=allocated,
        memory_map=mm,
        extras=extras,
    )
