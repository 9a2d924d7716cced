"""SGLang's hybrid sizing steps (sliding-window SWA pools, linear-attention / Mamba state slots) as SGLang 0.5.23
runs them inside its memory chain: ``HybridSizer``, the one implementation of kvplan.engines.hybrid_steps. Source:
the sglang 0.5.23 release wheel (``pip download --no-deps sglang==0.5.23``), files under ``sglang/srt/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import Knob
from kvplan.engines.sglang_requests import SPEC_MAX_RUNNING_REQUESTS as SPEC_MAX_RUNNING_REQUESTS
from kvplan.engines.sglang_swa_cap import SwaRequestCap
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import LinearState, SlidingWindow
from kvplan.models.deploy import Deployment

SWA_FULL_TOKENS_RATIO = 0.8
"""``--swa-full-tokens-ratio`` when not given (``arg_groups/fields/schedule.py``: ``fallback=0.8``)."""
SWA_EVICTION_INTERVAL = 128
"""``SGLANG_SWA_EVICTION_INTERVAL`` (``environ.py``: ``EnvInt(128)``): tokens a request runs past its window
before the SWA pool frees them."""
MAMBA_FULL_MEMORY_RATIO = 0.9
"""``--mamba-full-memory-ratio`` when not given (``arg_groups/fields/schedule.py``: ``fallback=0.9``)."""
MAMBA_BASE_SLOTS = 3
"""``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` (``mem_cache/kv_cache_configurator.py``)."""
HYBRID_VERSION = (0, 5, 23)
DRAFT_POOL_LAYERS = 1
"""``_build_hybrid_linear_kv_pool``: a draft worker's HybridLinearKVPool has ``full_attention_layer_ids = [0]``
("if draft worker, we only need 1 attention layer's kv pool")."""


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
        # resolve_max_num_reqs warns only when ``mamba_cap < max_num_reqs``: a cap equal to the 48 caps nothing
        if self.draft_tokens and mrr == self.spec_running <= slots // self.slots_per_request:
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


def engine_refuses(arch: ModelArch, dep: Deployment, why: str, layer: int | None = None) -> PlanError:
    """One line, exit 2: what kvplan does not yet plan, the model (and layer), the engine."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return PlanError(f"kvplan does not yet plan {why} ({where}) on SGLang {dep.engine_version}")
