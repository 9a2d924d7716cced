"""vLLM 0.33.0's hybrid KV cache manager: the KV cache groups of a hybrid model and its ONE shared block pool.

Source: the PyPI wheel vllm-0.33.0 (``vllm/`` paths below). A hybrid model's layers are bucketed by spec and split
into KV cache groups of equal layer count; every group draws its block ids from one pool, and one block id holds a
page of every layer of a group, so:

    page          = one layer's page after unification (attention: block × bytes per token per layer;
                    Mamba: its state, padded to the attention page)
    group_size    = min(layers per bucket), or the max when max < 1.5 × min
                    (``v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size``)
    groups        = cdiv(layers of each bucket, group_size) per bucket (layers[i::groups]; padding layers warned)
    bytes_per_block = group_size × page   (``_get_kv_cache_bytes_per_block``: the largest group's pages)
    num_blocks    = available // bytes_per_block            (``get_kv_cache_config_from_groups``)
    per request   = Σ over groups cdiv(spec.max_memory_usage_bytes, spec.page_size_bytes)
                    (``v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config``):
                    full attention  cdiv(max_model_len, block)              (``FullAttentionSpec``)
                    sliding window  cdiv(min(window - 1 + in_flight, max_model_len), block) + 1
                                    (``SlidingWindowSpec.max_admission_blocks_per_request``; in_flight =
                                    ``VllmConfig.max_in_flight_tokens`` = max_concurrent_batches × mnbt)
                    Mamba / linear  2 + spec + checkpoint blocks ('align'), 1 + spec ('none')
                                    (``MambaSpec.max_memory_usage_bytes``)
    Maximum concurrency = num_blocks / per request (the null block included); "GPU KV cache size: N tokens" =
                    int(concurrency × max_model_len)     (``get_kv_cache_capacity`` / ``update_kv_cache_capacity``)

Mamba alignment (``platforms/interface.py _align_hybrid_block_size``): the attention block grows until one
attention page holds a Mamba state: ``block = align × cdiv(mamba_page, align × attn_page_1_token)`` with
``align = max(smallest kernel block, block_size)`` (MLA: at least 128; 'align' mode: lcm with the prefill
checkpoint alignment), rounded up to every backend's smallest kernel block; the Mamba page is then padded to
``block × attn_page_1_token``.

Planned here: full attention or MLA beside sliding-window layers (gpt-oss), and full attention or MLA beside
linear-attention state (Qwen3-Next Gated DeltaNet, Kimi-Linear KDA). Refused with one line: a pooled indexer or
compressed attention in a hybrid (GLM-5.3-Flash, DeepSeek-V4), sliding window and state together, a hybrid with
decode context parallel or speculative decoding (their extra groups / blocks are not modelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.common import Demand, Knob
from kvplan.engines.versions import parse_version
from kvplan.errors import InputError, PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import FullAttention, IndexerK, LinearState, MlaLatent, SlidingWindow
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv

FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
"""``v1/attention/backends/gdn_attn.py``: the token alignment of the FlashInfer GDN prefill checkpoints."""

MLA_MAMBA_BLOCK_ALIGNMENT = 128
"""``_align_hybrid_block_size``: TRTLLM / FlashInfer MLA decode kernels need the manager block a multiple of 128
for hybrid MLA / Mamba models."""


@dataclass(frozen=True)
class Group:
    """One bucket of same-spec layers, split into ``count`` KV cache groups of at most ``group_size`` layers."""

    kind: str
    layers: int
    count: int
    demand: Demand


@dataclass(frozen=True)
class HybridBlocks:
    """How vLLM lays out a hybrid model's shared block pool on one rank (before the memory budget)."""

    block: int
    """Tokens of one attention block (after the Mamba alignment)."""
    block_knob: Knob
    page_bytes: int
    """One layer's page after unification (every group's layers share it)."""
    attn_bytes_per_token: int
    """Attention bytes of one token in one layer on one rank (the unpadded per-token page)."""
    state_bytes: int
    """One linear-attention layer's state of one request on one rank, unpadded (0 without state layers)."""
    group_size: int
    groups: tuple[Group, ...]
    mamba_cache_mode: str
    notes: tuple[str, ...]

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page_bytes

    @property
    def demands(self) -> tuple[Demand, ...]:
        return tuple(g.demand for g in self.groups)

    @property
    def num_groups(self) -> int:
        return sum(g.count for g in self.groups)

    def blocks_per_request(self, tokens: int) -> int:
        """Blocks one request of ``tokens`` takes from the pool: the sum over groups (vLLM's per-request bound)."""
        return sum(d.need(tokens, self.block) for d in self.demands)

    def max_concurrency(self, num_blocks: int, max_model_len: int) -> float:
        """``get_max_concurrency_for_kv_cache_config``: num_blocks (null block included) / blocks per request."""
        return num_blocks / self.blocks_per_request(max_model_len)

    def kv_cache_size_tokens(self, num_blocks: int, max_model_len: int, version: str) -> int:
        """The 'GPU KV cache size: N tokens' figure: int(max_concurrency × max_model_len) from 0.20.1
        (``get_kv_cache_capacity``), num_blocks // groups × block before (``TOKENS_FROM_CONCURRENCY_SINCE``)."""
        if parse_version(version) < TOKENS_FROM_CONCURRENCY_SINCE:
            return num_blocks // self.num_groups * self.block
        return int(self.max_concurrency(num_blocks, max_model_len) * max_model_len)

    def estimated_max_len(self, check_bytes: int, max_model_len: int) -> int:
        """``_estimate_max_model_len_from_groups``: the binary search for the longest length whose blocks fit."""

        def fits(n: int) -> bool:
            return self.bytes_per_block * self.blocks_per_request(n) <= check_bytes

        if not fits(1):
            return 0
        lo, hi, best = 1, max_model_len, 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(mid):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def describe(self) -> tuple[str, ...]:
        """One line per bucket: its groups, layers and what one request takes."""
        out = []
        for g in self.groups:
            d = g.demand
            if d.per == "token":
                per = f"cdiv(tokens, {self.block}) blocks per group"
            elif d.per == "window":
                per = f"cdiv(min(tokens, {d.window:,}), {self.block}) + {d.extra} blocks per group"
            else:
                per = f"{d.units // max(g.count, 1)} blocks per group whatever the length ({self.mamba_cache_mode})"
            out.append(f"{g.count} × {g.kind} group{'s' if g.count > 1 else ''} ({g.layers} layers): {per}")
        return tuple(out)


def _refuse(arch: ModelArch, dep: Deployment, what: str, layer: int | None = None) -> InputError:
    """One line, exit 2, in the words of ``kvplan.engines.refuse_unplanned_kinds``."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return InputError(f"kvplan does not yet plan {what} ({where}) on vLLM {dep.engine_version}: issue 13 engine rules")


IN_FLIGHT_SINCE = (0, 26, 0)
"""vLLM 0.26.0 sizes a window with ``max_in_flight_tokens`` (``SlidingWindowSpec.max_admission_blocks_per_request``);
0.25.0 and before with ``max_num_batched_tokens`` (``SlidingWindowSpec.max_memory_usage_bytes``; wheels read)."""

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

TOKENS_FROM_CONCURRENCY_SINCE = (0, 20, 1)
"""vLLM 0.20.1 logs 'GPU KV cache size' = int(max_concurrency × max_model_len); 0.20.0 and before
``_report_kv_cache_config`` logged num_blocks // len(groups) × min(block sizes) (wheels 0.19.0, 0.20.0 read)."""


def max_in_flight_tokens(dep: Deployment, mnbt: int) -> int:
    """The tokens a window must keep beside its window - 1: ``VllmConfig.max_in_flight_tokens`` =
    max_concurrent_batches × max_num_batched_tokens from 0.26.0 (``IN_FLIGHT_SINCE``), max_num_batched_tokens
    before.

    max_concurrent_batches: async scheduling (on by default, ``VllmConfig.__post_init__``) takes 2 at pp 1, else
    pp (the V1 model runner; ASSUMPTION: not the V2 runner, which takes pp + 1).
    """
    if parse_version(dep.engine_version) < IN_FLIGHT_SINCE:
        return mnbt
    batches = 2 if dep.pp <= 1 else dep.pp
    return batches * mnbt


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


def plan_blocks(
    arch: ModelArch,
    dep: Deployment,
    *,
    attn_bytes_per_token: int,
    block_knob: Knob,
    min_kernel_block: int,
    attn_tp: int,
    mnbt: int,
    max_model_len: int,
) -> HybridBlocks:
    """The groups and block of a hybrid model on vLLM; refuses (exit 2, one line) what is not planned."""
    kinds = {type(c) for layer in arch.layers for c in layer.caches}
    planned = (FullAttention, MlaLatent, SlidingWindow, LinearState)
    for layer in arch.layers:
        for c in layer.caches:
            if type(c) not in planned:
                # GLM-5.3-Flash (Glm5Next): its pooled indexer K and tail ring (CircularBufferSpec) are groups of
                # their own beside the KDA state (shared/reference/vllm-0.33.0.md §2c): not modelled
                what = "indexer K" if isinstance(c, IndexerK) else str(getattr(c, "kind_name", c.label))
                raise _refuse(arch, dep, f"{what} layers beside linear-attention state or a window", layer.index)
    if SlidingWindow in kinds and LinearState in kinds:
        raise _refuse(arch, dep, "sliding-window layers beside linear-attention state")
    if dep.dcp > 1:
        if SlidingWindow in kinds:
            # SlidingWindowSpec.max_memory_usage_bytes asserts it
            raise PlanError("vLLM refuses decode context parallel with sliding window: DCP not support sliding window.")
        raise _refuse(arch, dep, "linear-attention state layers with decode context parallel (dcp > 1)")
    if dep.speculative_num_draft_tokens or dep.mtp:
        raise _refuse(arch, dep, "speculative decoding on a hybrid model (draft groups, speculative state blocks)")
    if SlidingWindow in kinds:
        return _sliding(arch, dep, attn_bytes_per_token, block_knob, attn_tp, mnbt, max_model_len)
    return _mamba(arch, dep, attn_bytes_per_token, block_knob, min_kernel_block, attn_tp)


def _caches(arch: ModelArch) -> list[object]:
    return [c for layer in arch.layers for c in layer.caches]


def group_size_of(counts: list[int]) -> int:
    """``_get_kv_cache_groups_uniform_page_size``: the smallest bucket, or the largest when it is under 1.5 × the
    smallest (fewer padding layers).

    >>> group_size_of([18, 18]), group_size_of([12, 36]), group_size_of([12, 13])
    (18, 12, 13)
    """
    lo, hi = min(counts), max(counts)
    return hi if hi < lo * 1.5 else lo


def _padding_note(kind: str, layers: int, size: int) -> str | None:
    pad = size - layers % size
    if pad == size:
        return None
    return (
        f"vLLM: Add {pad} padding layers, may waste at most {pad / layers * 100:.2f}% KV cache memory "
        f"({kind}: {layers} layers in groups of {size})"
    )


def _sliding(
    arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, attn_tp: int, mnbt: int, max_model_len: int
) -> HybridBlocks:
    """Full attention + sliding window (gpt-oss): both pages block × the same per-token bytes, no unification."""
    windows = {c for c in _caches(arch) if isinstance(c, SlidingWindow)}
    fulls = [c for c in _caches(arch) if type(c) in (FullAttention, MlaLatent)]
    if len({c.window for c in windows}) != 1:
        raise _refuse(arch, dep, "sliding-window layers of several window sizes")
    (sw,) = {c.window for c in windows}
    dtype = dep.kv_cache_dtype
    sw_row = next(iter(windows)).bytes_per_token(attn_tp, dtype)
    if sw_row != row or any(isinstance(c, MlaLatent) for c in fulls):
        raise _refuse(arch, dep, "sliding-window layers whose page differs from the full-attention page")
    n_sw = sum(1 for c in _caches(arch) if isinstance(c, SlidingWindow))
    n_full = len(fulls)
    block = block_knob.as_int()
    size = group_size_of([n_full, n_sw])
    in_flight = max_in_flight_tokens(dep, mnbt)
    async_note = "2 concurrent batches (ASSUMPTION: async scheduling, the default, on the V1 model runner) × "
    how = async_note if in_flight != mnbt else ""
    held = min(sw - 1 + in_flight, max_model_len)
    full_groups, sw_groups = cdiv(n_full, size), cdiv(n_sw, size)
    groups = (
        Group("full attention", n_full, full_groups, Demand("full attention", "token", units=full_groups)),
        Group(
            f"sliding window {sw}",
            n_sw,
            sw_groups,
            Demand(f"sliding window {sw}", "window", window=held, units=sw_groups, extra=1),
        ),
    )
    notes = [
        f"vLLM hybrid KV cache manager: {full_groups + sw_groups} KV cache groups of {size} layers share one block "
        f"pool; a sliding-window group keeps at most window - 1 + in-flight tokens = {sw} - 1 + {in_flight:,} "
        f"({how}max_num_batched_tokens {mnbt:,}), at most max_model_len: {held:,} tokens + 1 block "
        "(SlidingWindowSpec.max_memory_usage_bytes)",
    ]
    notes += [n for n in (_padding_note("full attention", n_full, size), _padding_note("sliding", n_sw, size)) if n]
    notes.append(
        f"vLLM prefix reuse on a hybrid: the hit is the longest length every group accepts "
        "(HybridKVCacheCoordinator.find_longest_cache_hit); full attention needs every block of the prefix cached, a "
        f"sliding-window group only the blocks of its last {sw} tokens (SlidingWindowManager.find_longest_cache_hit: "
        f"contiguous blocks, whole {block}-token blocks)"
    )
    return HybridBlocks(
        block=block,
        block_knob=block_knob,
        page_bytes=block * row,
        attn_bytes_per_token=row,
        state_bytes=0,
        group_size=size,
        groups=groups,
        mamba_cache_mode="none",
        notes=tuple(notes),
    )


def _mamba(
    arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, min_kernel_block: int, attn_tp: int
) -> HybridBlocks:
    """Attention (full or MLA) + linear-attention state (Qwen3-Next GDN, Kimi-Linear KDA)."""
    states = {c for c in _caches(arch) if isinstance(c, LinearState)}
    if len(states) != 1:
        raise _refuse(arch, dep, "linear-attention layers of several state shapes")
    (state,) = states
    n_state = sum(1 for c in _caches(arch) if isinstance(c, LinearState))
    attn = [c for c in _caches(arch) if type(c) in (FullAttention, MlaLatent)]
    n_attn = len(attn)
    mla = any(isinstance(c, MlaLatent) for c in attn)
    # MambaSpec.page_size_bytes: conv + recurrent state in vLLM's dtypes (MambaStateDtypeCalculator)
    mamba_page = state.bytes_per_request(attn_tp, "vllm")
    version = parse_version(dep.engine_version)
    if HYBRID_PREFIX_CACHING_SINCE <= version < MAMBA_ALIGN_ONLY_SINCE:
        raise _refuse(arch, dep, "linear-attention state layers in mamba_cache_mode 'all' (vLLM 0.26-0.27)")
    # from 0.28.0 prefix caching is on by default for hybrids (CacheConfig.enable_prefix_caching = True), so
    # MambaModelConfig sets mamba_cache_mode 'align' (ASSUMPTION: the deployment does not pass
    # --no-enable-prefix-caching); before 0.26.0 hybrids ran without prefix caching: 'none'
    mode = "align" if version >= MAMBA_ALIGN_ONLY_SINCE else "none"
    checkpoint = gdn_checkpoint_alignment(arch, dep, state) if version >= CHECKPOINT_BLOCKS_SINCE else None
    user_block = block_knob.as_int()
    align = max(min_kernel_block, user_block)
    if mla and version >= MLA_ALIGNMENT_SINCE:
        align = max(align, MLA_MAMBA_BLOCK_ALIGNMENT)
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
            f"default: vLLM _align_hybrid_block_size: {align} × cdiv(mamba page {mamba_page:,} B, {align} × "
            f"{row:,} B a token) = {attn_block} tokens, so that one attention page holds a state "
            f"(was {user_block}: {block_knob.origin})",
        )
    per_group = 2 + (1 if checkpoint else 0) if mode == "align" else 1  # MambaSpec.max_memory_usage_bytes
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
            f"'align' (2 + {1 if checkpoint else 0} prefill checkpoint; ASSUMPTION: prefix caching on, the vLLM "
            "default for hybrids from 0.26)"
            if mode == "align"
            else "'none' (prefix caching off: the default for hybrids before vLLM 0.26)"
        ),
    ]
    if checkpoint and dep.gpu.sm // 10 in (10, 12):
        notes.append(
            "vLLM picks the FlashInfer GDN prefill (one checkpoint block a group) on SM10x / SM12x only with a CUDA 13 "
            "runtime (ASSUMPTION: CUDA 13; with Triton a request takes 2 state blocks a group)"
        )
    notes += [n for n in (_padding_note(label, n_attn, size), _padding_note(state.label, n_state, size)) if n]
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
