"""SGLang's hybrid pools (issue 13): sliding-window (SWA) and linear-attention / Mamba state models, as SGLang 0.5.23
sizes them. Source: the sglang 0.5.23 release wheel (``pip download --no-deps sglang==0.5.23``), files under
``sglang/srt/``.

A hybrid model is planned as its full-attention layers (a uniform model: kvplan.engines.sglang.plan_pools sizes
their token pool with the memory chain every SGLang plan uses) plus the steps below, each SGLang's own.

Sliding window (gpt-oss; ``model_executor/pool_configurator.py`` ``HybridSWAPoolConfigurator``):

    full_per_token = kv_heads_per_rank × (head_dim + v_head_dim) × kv bytes        (× full layers)
    swa_per_token  = swa kv_heads_per_rank × (swa_head_dim + swa_v_head_dim) × kv bytes   (× SWA layers)
    cell_size      = full_per_token × full_layers + swa_full_tokens_ratio × swa_per_token × swa_layers   (a float)
    max_total      = int(available // cell_size)
    full_tokens    = max_total // page × page          (logged max_total_num_tokens)
    swa_tokens     = int(full_tokens × swa_full_tokens_ratio) // page × page
    log: "Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}"

``swa_full_tokens_ratio`` defaults to 0.8 (``arg_groups/fields/schedule.py``: ``fallback=0.8``); DeepSeek-V4 and
Inkling set 0.1 (``arg_groups/model_overrides/``). ``validate_swa_pool_size`` refuses a SWA pool of at most
window + page tokens. The ``SWARequestCapPoolConfigurator`` (SWA pool sized from ``--max-running-requests`` with
the radix cache disabled) and ``--enable-unified-memory`` are not planned: kvplan has no radix-cache knob, and
both are off by default.

Linear-attention / Mamba state (Qwen3-Next, Kimi-Linear; ``mem_cache/kv_cache_configurator.py``):

- ``_profile_available_bytes``: rest = free after weights − pre_load_free × (1 − mem_fraction_static) (GiB
  floats), then ``_handle_max_mamba_cache`` takes the state pool out of it BEFORE the token pool is sized;
- ``_handle_max_mamba_cache`` without ``--max-mamba-cache-size`` (no speculative decoding):
  mamba_budget = rest × r / (1 + r), r = ``mamba_full_memory_ratio`` (default 0.9);
  max_mamba_cache_size K = int((mamba_budget × 2^30 − per_req) // per_req); rest −= (K + 1) × per_req / 2^30
  (+1: the pool's padding slot); K ≤ 0 is SGLang's "Not enough GPU memory for hybrid (mamba/linear-attention)
  state cache" start-up error;
- ``per_req`` = ``mamba_cache_per_req`` (``configs/mamba_utils.py``): conv + temporal state × every linear layer,
  conv bf16, temporal the config's ``mamba_ssm_dtype`` else float32 (kvplan.models.cache.LinearState);
- the token pool: ``DefaultPoolConfigurator`` with the cell over ``full_attention_layer_ids`` only;
- ``resolve_max_num_reqs``: max_running_requests = min(its usual value, K // mamba_ratio), logged as
  "max_running_requests is capped to N by the mamba state cache"; ``_calculate_mamba_ratio``: 1 with the radix
  cache disabled, else ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`` 3 + the extra-buffer tracking slots
  (``get_mamba_tracking_slots``: 2 with the overlap scheduler, 1 without). Qwen3-Next and Kimi-Linear are in
  ``_MAMBA_EXTRA_BUFFER_ARCHS`` (``arg_groups/overrides.py``), the linear-attention backend defaults to triton and
  the overlap scheduler is on, so ``_mamba_radix_cache_resolution`` picks ``extra_buffer``: 5 slots a request.
- log (``mem_cache/memory_pool.py`` ``MambaPool``): "Mamba Cache is allocated. max_mamba_cache_size: K,
  conv_state size: X GB, ssm_state size: Y GB".

Knobs: ``swa_full_tokens_ratio`` and ``max_mamba_cache_size`` (SGLang's flags; the explicit size skips the
auto-sizing, ``// attn_dp_size`` per rank as ``_handle_max_mamba_cache`` does).

What the plan's figures mean for a hybrid: ``rows`` / ``logged_tokens`` are the full-attention pool's
``max_total_num_tokens`` (the scheduler line's figure); ``usable_pages`` its pages; ``cell`` its bytes per token
(full layers only); ``pools`` the full pool, the SWA pool and the Mamba state pool, each with what one request
takes from it (kvplan.engines.common.Demand).

Not planned, each refused with one line (never a silently wrong pool): speculative decoding (draft SWA / Mamba
intermediate state), dcp, a DSA indexer beside linear state (GLM-5.3-Flash), SWA and linear state in one model,
a model without full-attention layers, DeepSeek-V4 (0.5.23 serves it with ``DSV4PoolConfigurator``: SWA, C4, C128
and compressor-state pools; kvplan does not plan those yet), other SGLang versions than 0.5.23. Not expressible:
``--mamba-full-memory-ratio`` (kvplan has no knob: 0.9 assumed, said in the knobs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines import sglang
from kvplan.engines.common import Demand, Knob, Pool, PoolPlan, Term
from kvplan.engines.versions import parse_version
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import (
    CompressedAttention,
    FullAttention,
    IndexerK,
    LinearState,
    MlaLatent,
    SlidingWindow,
)
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
MAMBA_EXTRA_BUFFER_ARCHS = frozenset({"Qwen3NextForCausalLM", "KimiLinearForCausalLM"})
"""The architectures kvplan reads whose radix cache keeps the extra state buffer (``_MAMBA_EXTRA_BUFFER_ARCHS``)."""
HYBRID_VERSION = (0, 5, 23)


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

    def state_bytes_per_request(self, attn_tp: int) -> int:
        """``mamba_cache_per_req``: one request's conv + temporal state over every linear layer, one rank."""
        if self.state is None:
            return 0
        try:
            return self.state.bytes_per_request(attn_tp, "sglang") * self.state_layers
        except ValueError as e:  # Mamba2StateShape.create: divide() asserts
            raise PlanError(f"SGLang shards the linear-attention state by attention tp {attn_tp}: {e}") from None

    def take_state(self, rest_gib: float, attn_tp: int) -> tuple[float, int, str | None]:
        """(rest left for the token pools in GiB, max_mamba_cache_size, start-up error or None)."""
        if self.state is None:
            return rest_gib, 0, None
        per = self.state_bytes_per_request(attn_tp)
        k = self.max_mamba_cache_size
        if k is None:
            k = mamba_cache_size(rest_gib, per, self.mamba_full_memory_ratio)
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
        return swa_pool_tokens(available, full_cell=full_cell, swa_cell=self.swa_cell(dtype, attn_tp),
                               ratio=self.swa_full_tokens_ratio, page=page)  # fmt: skip

    def swa_tokens_for(self, full_tokens: int, page: int) -> int:
        return int(full_tokens * self.swa_full_tokens_ratio) // page * page if self.swa is not None else 0

    def check_swa_pool(self, swa_tokens: int, page: int) -> str | None:
        return swa_pool_error(swa_tokens, self.swa.window, page) if self.swa is not None else None

    def running_cap(self, slots: int) -> int | None:
        """``resolve_max_num_reqs``: K // mamba_ratio bounds the running requests (None without state)."""
        return slots // self.slots_per_request if self.state is not None else None

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
        """MambaPool: (max_mamba_cache_size + 1 padding slot) × per_req."""
        return (slots + 1) * self.state_bytes_per_request(attn_tp)


def _engine_refuses(arch: ModelArch, dep: Deployment, why: str, layer: int | None = None) -> PlanError:
    """One line in the words of kvplan.engines.refuse_unplanned_kinds: what, the model (and layer), the engine."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return PlanError(f"kvplan does not yet plan {why} ({where}) on SGLang {dep.engine_version}: issue 13 engine rules")


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
    if IndexerK in kinds:
        # GLM-5.3-Flash: SGLang's HybridLinearKVPool with a DSA pool on the full layers
        raise _engine_refuses(arch, dep, "indexer K layers beside linear-attention state", _first_layer(arch, IndexerK))
    if SlidingWindow in kinds and LinearState in kinds:
        raise _engine_refuses(arch, dep, "sliding-window and linear-attention layers in one model")
    if dep.mtp or dep.speculative_num_draft_tokens:
        raise _engine_refuses(arch, dep, "speculative decoding with a hybrid model (draft SWA / Mamba state)")
    if dep.dcp > 1:
        raise _engine_refuses(arch, dep, f"dcp {dep.dcp} with a hybrid model")
    swa_layers = [c for layer in arch.layers for c in layer.caches if isinstance(c, SlidingWindow)]
    states = [s for layer in arch.layers if (s := layer.state) is not None]
    plain = [layer for layer in arch.layers if layer.state is None and type(layer.caches[0]) is not SlidingWindow]
    full = [layer.caches[0] for layer in plain]
    if not full:
        raise _engine_refuses(arch, dep, "a model without full-attention layers (all-SWA / all-state pools)")
    if len(set(swa_layers)) > 1 or len(set(states)) > 1 or len(set(full)) > 1:
        raise _engine_refuses(arch, dep, "layers of one kind with different shapes")
    view = replace(arch, num_layers=len(full), layers=(), indexer_full=())
    if view.attention != full[0] or not isinstance(full[0], FullAttention | MlaLatent):
        raise _engine_refuses(arch, dep, f"full-attention layers unlike the config's fields ({full[0]})")
    slots = 1
    if states:
        slots = mamba_slots_per_request(extra_buffer=arch.architecture in MAMBA_EXTRA_BUFFER_ARCHS)
    ratio = SWA_FULL_TOKENS_RATIO if dep.swa_full_tokens_ratio is None else dep.swa_full_tokens_ratio
    explicit = None if dep.max_mamba_cache_size is None else dep.max_mamba_cache_size // max(dep.dp_attention, 1)
    sizer = HybridSizer(
        full_layers=len(full),
        swa=swa_layers[0] if swa_layers else None,
        swa_layers=len(swa_layers),
        state=states[0] if states else None,
        state_layers=len(states),
        swa_full_tokens_ratio=ratio,
        slots_per_request=slots,
        max_mamba_cache_size=explicit,
    )
    return view, sizer


def plan(arch: ModelArch, dep: Deployment) -> PoolPlan:
    """The pools SGLang 0.5.23 builds for a hybrid model on each GPU (module docstring)."""
    view, sizer = sizer_for(arch, dep)
    p = sglang.plan_pools(view, dep, sizer)
    return _with_pools(p, arch, sizer)


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
        span = s.swa.window + SWA_EVICTION_INTERVAL
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
        set_ratio = p.deployment.swa_full_tokens_ratio is not None
        knobs.append(Knob("swa_full_tokens_ratio", s.swa_full_tokens_ratio, "set" if set_ratio else "default: 0.8"))
        chain.append(
            Term(
                "SWA pool",
                p.extras["swa_alloc_bytes"],
                f"swa_layer_tokens {swa_tokens:,} = int(full_layer_tokens {p.rows:,} × {s.swa_full_tokens_ratio})"
                f" // {page} × {page}; cell = full + {s.swa_full_tokens_ratio} × {s.swa_cell(p.kv_dtype, tp):,} B",
            )
        )
        notes.append(
            f"SWA pool: a request keeps at most its window {s.swa.window} + {SWA_EVICTION_INTERVAL} tokens "
            "(SGLANG_SWA_EVICTION_INTERVAL) + 2 pages there; ASSUMPTION: radix cache on and no "
            "--enable-unified-memory (SGLang's defaults; kvplan has no knob for them)"
        )
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
                p.extras["mamba_alloc_bytes"],
                f"(max_mamba_cache_size {slots:,} + 1) × {per:,} B per request, taken before the token pool",
            ),
        )
        notes.append(
            f"Mamba state: {s.slots_per_request} slots reserved per running request (3 + 2 extra-buffer tracking"
            " slots with the overlap scheduler); the radix cache keeps finished requests' states in free slots."
            " ASSUMPTION: radix cache on, overlap scheduler on, triton linear-attention backend (SGLang's defaults)"
            if s.slots_per_request == 5
            else f"Mamba state: {s.slots_per_request} slots reserved per running request"
        )
    return replace(p, arch=arch, pools=tuple(pools), knobs=tuple(knobs), chain=tuple(chain), notes=tuple(notes))


def _hybrid_rows_term(t: Term, p: PoolPlan, s: HybridSizer) -> Term:
    """The chain's rows line as the hybrid computes it (the full layers' cell; SWA: the ratio-weighted cell)."""
    if t.label == "available for the KV pool" and s.state is not None:
        return Term(t.label, t.bytes, "free after weights − slack − Mamba state pool")
    if t.label == "cell":
        return Term("cell", t.bytes, f"bytes per full-attention pool row ({s.full_layers} full layers)")
    if t.label != "pool rows per GPU" or s.swa is None:
        return t
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
