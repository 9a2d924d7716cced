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
``align = max(smallest kernel block, block_size)`` (MLA: at least 128 from 0.27, 64 before; 'align' mode: lcm
with the prefill checkpoint alignment), rounded up to every backend's smallest kernel block; the Mamba page is then
padded to ``block × attn_page_1_token``.

Planned here: full attention or MLA beside sliding-window layers (gpt-oss), and full attention or MLA beside
linear-attention state (Qwen3-Next Gated DeltaNet, Kimi-Linear KDA); DeepSeek-V4 and GLM-5.3-Flash (KDA + MLA with
the pooled indexer and its tail ring) as packed groups (below). Speculative decoding on Qwen3-Next
(``qwen3_next_mtp``, num_speculative_tokens S): the MTP layer's attention joins the full-attention groups, each GDN
group keeps S more state blocks a request and a conv state S columns wider (``_mamba``); on GLM-5.3-Flash the MTP
layer's MLA, indexer and tail ring join the packed groups, the ring widens to kpool × next_power_of_2(cdiv(kpool +
S, kpool)) (``_glm5_next``). Refused with one line:
sliding window and state together, a hybrid with decode context parallel, speculative decoding on the other hybrids
(their draft groups / blocks are not modelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import kvplan.engines.vllm_knobs as vllm_knobs
from kvplan.engines.common import Demand, Knob
from kvplan.errors import InputError, PlanError
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
from kvplan.models.formats import MlaLayout
from kvplan.units import cdiv
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, parse_version

FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
"""``v1/attention/backends/gdn_attn.py``: the token alignment of the FlashInfer GDN prefill checkpoints."""

QWEN3_NEXT = "Qwen3NextForCausalLM"
"""Qwen3-Next: planned with speculative decoding (``qwen3_next_mtp``) on vLLM (and GLM-5.3-Flash, ``_glm5_next``)."""

KIMI_LINEAR = "KimiLinearForCausalLM"
"""Kimi-Linear: no MTP draft in vLLM 0.33.0 (refused with the engine's error)."""

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
    packed_bytes_per_block: int = 0
    """DeepSeek-V4: the widest packed group's pages (groups of unequal pages, no unification); 0 otherwise."""
    group_layers: int = 0
    """DeepSeek-V4: the layers (cache specs) of the widest packed group; 0 otherwise."""

    @property
    def bytes_per_block(self) -> int:
        return self.packed_bytes_per_block or self.group_size * self.page_bytes

    def block_detail(self) -> str:
        """How one block id's bytes arise: 'group size × page' (unified pages) or the widest packed group."""
        if self.packed_bytes_per_block:
            return (
                f"the widest of {self.num_groups} packed KV cache groups: {self.group_layers} specs' pages "
                f"(block-outermost layout, {self.block}-token attention block)"
            )
        return f"group size {self.group_size} × page {self.page_bytes:,} B ({self.block} tokens)"

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
            page = d.page_tokens or self.block
            if d.per == "token":
                per = f"cdiv(tokens, {page}) blocks per group"
            elif d.per == "window":
                per = f"cdiv(min(tokens, {d.window:,}), {page}) + {d.extra} blocks per group"
            else:
                per = f"{d.units // max(g.count, 1)} blocks per group whatever the length ({self.mamba_cache_mode})"
            out.append(f"{g.count} × {g.kind} group{'s' if g.count > 1 else ''} ({g.layers} layers): {per}")
        return tuple(out)


def _refuse(arch: ModelArch, dep: Deployment, what: str, layer: int | None = None) -> InputError:
    """One line, exit 2: what kvplan does not yet plan, the model (and layer), the engine."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return InputError(f"kvplan does not yet plan {what} ({where}) on vLLM {dep.engine_version}")


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


def max_in_flight_tokens(dep: Deployment, mnbt: int) -> int:
    """The tokens a window must keep beside its window - 1: ``VllmConfig.max_in_flight_tokens`` =
    max_concurrent_batches × max_num_batched_tokens from 0.26.0 (``IN_FLIGHT_SINCE``), max_num_batched_tokens
    before.

    max_concurrent_batches: async scheduling (on by default, ``VllmConfig.__post_init__``; the knob
    async_scheduling) takes 2 at pp 1, else pp (the V1 model runner; ASSUMPTION: not the V2 runner, which takes
    pp + 1).
    """
    if parse_version(dep.engine_version) < IN_FLIGHT_SINCE:
        return mnbt
    return vllm_knobs.max_concurrent_batches(dep) * mnbt


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
    if CompressedAttention in kinds:
        if dep.dcp > 1:
            raise _refuse(arch, dep, "DeepSeek-V4 compressed-attention layers with decode context parallel (dcp > 1)")
        return _v4(arch, dep, block_knob, mnbt, max_model_len)
    if is_glm5_next(arch):
        return _glm5_next(arch, dep, attn_bytes_per_token, block_knob, attn_tp)
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
    if dep.mtp and arch.architecture == KIMI_LINEAR:
        # config/speculative.py: method 'mtp' needs the draft config's model_type among MTPModelTypes (or a
        # Transformers MTP); kimi_linear maps to none (only kimi_k3 -> kimi_k3_mtp), so SpeculativeConfig raises
        raise PlanError(
            "vLLM refuses it: NotImplementedError: Unsupported speculative method: 'mtp' (Kimi-Linear has no MTP "
            "draft: its model_type kimi_linear maps to no MTP model)"
        )
    if dep.mtp and (arch.architecture not in QWEN3_NEXT_FAMILY or SlidingWindow in kinds):
        raise _refuse(
            arch, dep, "speculative decoding on a hybrid model other than Qwen3-Next and GLM-5.3-Flash (draft "
            "groups, speculative state blocks)"
        )  # fmt: skip
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
    # every layer sliding: uniform specs, one group of all of them (get_kv_cache_groups, is_kv_cache_spec_uniform)
    size = group_size_of([n_full, n_sw]) if n_full else n_sw
    in_flight = max_in_flight_tokens(dep, mnbt)
    batches = in_flight // mnbt if mnbt else 1
    how = f"{batches} concurrent batches × " if batches > 1 else ""
    held = min(sw - 1 + in_flight, max_model_len)
    full_groups, sw_groups = cdiv(n_full, size), cdiv(n_sw, size)
    full = Group("full attention", n_full, full_groups, Demand("full attention", "token", units=full_groups))
    sliding = Group(
        f"sliding window {sw}",
        n_sw,
        sw_groups,
        Demand(f"sliding window {sw}", "window", window=held, units=sw_groups, extra=1),
    )
    groups = (full, sliding) if n_full else (sliding,)
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
        raise _refuse(arch, dep, "linear-attention state layers in mamba_cache_mode 'all' (vLLM 0.26-0.27)")
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


# ---------------------------------------------------------------------------------------------------------------
# DeepSeek-V4 (DeepseekV4ForCausalLM) on vLLM 0.33.0: five kinds of cache specs packed into one block id pool.
# ---------------------------------------------------------------------------------------------------------------

V4_SINCE = (0, 33, 0)
"""The one wheel whose DeepSeek-V4 code was read (vllm-0.33.0): its spec classes, block sizes and the packed
grouping below. Other versions are refused (one line) rather than planned with rules nobody read."""

V4_BLOCK = 256
"""``DeepseekV4IndexerBackend.get_supported_kernel_block_sizes`` -> [256] and ``DeepseekV4SparseMLABackend`` ->
[256] (``v1/attention/backends/mla/indexer.py``, ``models/deepseek_v4/sparse_mla.py``): the cache_config
block_size that ``Platform._preferred_block_size_for_backends`` settles on (16 is refused by the SWA backend's
``MultipleOf(32)``; the lcm candidates give 256)."""

V4_SWA_BLOCK = 64
"""``DeepseekV4SWACache.__init__``: ``block_size: int = 64`` (``v1/attention/backends/mla/sparse_swa.py``); the
attention layer does not pass one."""

V4_PAGE_ALIGNMENT = 576
"""fp8_ds_mla pages are padded to a multiple of 576 B (``alignment=576`` on every V4 spec;
``v1/kv_cache_interface.py _apply_alignment_padding``: page_size_padded = round_up(page, alignment))."""

V4_COMPRESSOR_STATE_BYTES = 4
"""``CompressorStateCache``: ``assert self.dtype == torch.float32`` (``models/deepseek_v4/compressor.py``)."""

V4_BACKEND = "FLASHMLA_SPARSE_DSV4"


def is_v4(arch: ModelArch) -> bool:
    """A DeepSeek-V4 model: its layers own ``CompressedAttention`` caches."""
    return any(isinstance(c, CompressedAttention) for layer in arch.layers for c in layer.caches)


def v4_layout(arch: ModelArch, dep: Deployment) -> tuple[str, list[Knob]]:
    """kv dtype and backend of DeepSeek-V4 on vLLM 0.33.0: (dtype, knobs).

    ``models/deepseek_v4/nvidia/model.py``: without an explicit backend SM12x takes FlashInfer, every other CUDA
    arch ``DeepseekV4FlashMLAAttention`` (backend FLASHMLA_SPARSE_DSV4, ``use_fp8_ds_mla_layout = True``);
    ``attention.py _resolve_dsv4_kv_cache_dtype`` turns 'auto' / 'fp8*' into fp8_ds_mla ("Using DeepSeek's
    fp8_ds_mla KV cache format.") and refuses anything else with the error below.
    """
    gpu = dep.gpu
    if parse_version(dep.engine_version) < V4_SINCE:
        raise _refuse(arch, dep, "DeepSeek-V4 compressed-attention layers before vLLM 0.33.0 (only that wheel read)")
    if gpu.vendor != "nvidia" or gpu.sm // 10 not in (9, 10):
        raise _refuse(arch, dep, f"DeepSeek-V4 off the FlashMLA path (SM{gpu.sm}: only SM90 / SM10x planned)")
    if dep.attention_backend and dep.attention_backend != V4_BACKEND:
        raise _refuse(arch, dep, f"DeepSeek-V4 with attention backend {dep.attention_backend}")
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: DeepSeek-V4 keeps vLLM's fp8_ds_mla 584 B entries")
    dtype = dep.kv_cache_dtype
    if not (dtype == "auto" or dtype.startswith("fp8")):
        raise PlanError(
            f"vLLM refuses it: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {dtype}. Please set "
            "`--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache."
        )
    why = "set" if dtype == "fp8_ds_mla" else f"default: {dtype} -> fp8_ds_mla (_resolve_dsv4_kv_cache_dtype)"
    knobs = [
        Knob("kv_cache_dtype", "fp8_ds_mla", why),
        Knob("attention_backend", V4_BACKEND, "set" if dep.attention_backend else f"default: SM{gpu.sm} FlashMLA"),
    ]
    return "fp8_ds_mla", knobs


@dataclass(frozen=True)
class V4Spec:
    """One layer's KV cache spec as vLLM 0.33.0 builds it for DeepSeek-V4 (fp8_ds_mla, FlashMLA path).

    ``base`` is the spec's grouping family (``UniformTypeKVCacheSpecs.is_uniform_type``): 'full' for the
    ``MLAAttentionSpec`` kinds (registered with base ``FullAttentionSpec``), 'window' for the
    ``SlidingWindowMLASpec`` kinds (uniform only with the same ``sliding_window``); and the block size must match.
    """

    layer: str
    kind: str
    base: str
    block: int
    window: int
    page: int

    @property
    def bucket_key(self) -> tuple[str, int, int]:
        return (self.base, self.block, self.window)


def _pad(n: int) -> int:
    return cdiv(n, V4_PAGE_ALIGNMENT) * V4_PAGE_ALIGNMENT


def v4_specs(arch: ModelArch, mtp_layers: int = 0) -> tuple[V4Spec, ...]:
    """Every layer's specs, in vLLM's layer order (``get_kv_cache_spec`` of each cache module):

    - ``DeepseekV4SWACache`` (every layer): SlidingWindowMLASpec, block 64, window ``sliding_window``,
      page pad(64 × 584) = 37,440 B;
    - ``DeepseekV4MLAAttention.get_kv_cache_spec`` (ratio > 1): MLAAttentionSpec, block 256,
      ``tokens_per_state`` = ratio, page pad(256 // ratio × 584): C4 37,440 B, C128 pad(1,168) = 1,728 B;
    - ``CompressorStateCache`` (ratio > 1, ``compressor.py``): SlidingWindowMLASpec, fp32 state of
      2 × coff × head_dim (coff = 2 for C4, 1 for C128), block 4 (C4) / 8 (C128), window coff × ratio (8 / 128):
      page pad(4 × 2,048 × 4) = pad(8 × 1,024 × 4) = 32,832 B;
    - ``DeepseekV4IndexerCache`` (C4): MLAAttentionSpec, 132 B (128 fp8 + fp32 scale), block 256,
      ``tokens_per_state`` 4: page pad(64 × 132) = 8,640 B; and its compressor's ``CompressorStateCache``
      (index_head_dim 128, coff 2): block 4, window 8, page pad(4 × 512 × 4) = 8,640 B;
    - with speculative decoding (MTP), each MTP layer (``nvidia/mtp.py``: a DeepseekV4DecoderLayer at layer_id
      num_hidden_layers + k) has compress_ratio 1 (``attention.py``: "MTP layer is not included in the compress
      ratio list"): its ``DeepseekV4SWACache`` only, after the target's layers.
    """
    out: list[V4Spec] = []
    for layer in arch.layers:
        att = next(c for c in layer.caches if isinstance(c, CompressedAttention))
        r, entry, i = att.compress_ratio, att.entry_bytes, layer.index
        out.append(V4Spec(f"{i}.swa", f"window {att.window}", "window", V4_SWA_BLOCK, att.window, _pad(64 * entry)))
        if r > 1:
            coff = 2 if r == 4 else 1
            out.append(V4Spec(f"{i}.c{r}", f"C{r} compressed", "full", V4_BLOCK, 0, _pad(V4_BLOCK // r * entry)))
            sblock = 4 if r == 4 else 8
            state = sblock * 2 * coff * att.head_dim * V4_COMPRESSOR_STATE_BYTES
            out.append(V4Spec(f"{i}.c{r}state", f"C{r} compressor state", "window", sblock, coff * r, _pad(state)))
        idx = layer.indexer
        if idx is not None:
            key = idx.bytes_per_state  # 132
            out.append(
                V4Spec(f"{i}.idx", "C4 indexer K", "full", V4_BLOCK, 0, _pad(V4_BLOCK // idx.compress_ratio * key))
            )
            state = 4 * 2 * 2 * idx.index_head_dim * V4_COMPRESSOR_STATE_BYTES
            out.append(V4Spec(f"{i}.idxstate", "C4 indexer compressor state", "window", 4, 8, _pad(state)))
    if mtp_layers:
        att = next(c for c in arch.layers[-1].caches if isinstance(c, CompressedAttention))
        for k in range(mtp_layers):
            i = arch.num_layers + k
            out.append(V4Spec(f"{i}.swa", f"window {att.window}", "window", V4_SWA_BLOCK, att.window,
                              _pad(64 * att.entry_bytes)))  # fmt: skip
    return tuple(out)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """``kv_cache_planning._approximate_gcd``: the d >= lower_bound that minimises Σ (ceil(x / d) × d - x), ties to
    the larger d.

    >>> approximate_gcd([43, 21, 20], 21)   # d 22: 1 + 1 + 2 = 4 padding layers (21: 20 + 0 + 1)
    22
    """
    best_d, best_pad = max(lower_bound, 1), -1
    for d in range(max(lower_bound, 1), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad < 0 or pad < best_pad or (pad == best_pad and d > best_d):
            best_d, best_pad = d, pad
    return best_d


def pack_v4_groups(specs: tuple[V4Spec, ...]) -> tuple[tuple[V4Spec, ...], ...]:
    """``kv_cache_planning._get_packed_kv_cache_groups`` (the block-outermost layout DeepSeek-V4 resolves to:
    ``DeepseekV4IndexerBackend.supported_kv_cache_layouts`` = BLHNC, BLNHC): greedy buckets of uniform-type
    specs; a bucket with one layer per page size per repeat is 'balanced' and split into groups of
    ``repeats_per_group`` pattern repeats (``_approximate_gcd`` over the balanced buckets' largest page-size
    counts, at least the largest mixed balanced bucket's); an unbalanced bucket stays one group. No Mamba or
    ring bucket exists here, and with a repeat count the window buckets are not 'state' buckets.
    """
    buckets: list[list[V4Spec]] = []
    for s in specs:
        for b in buckets:
            if b[0].bucket_key == s.bucket_key:
                b.append(s)
                break
        else:
            buckets.append([s])
    info = []
    for b in buckets:
        by_page: dict[int, list[V4Spec]] = {}
        for s in b:
            by_page.setdefault(s.page, []).append(s)
        balanced = len({len(v) for v in by_page.values()}) == 1
        info.append((b, by_page, balanced, max(len(v) for v in by_page.values())))
    floor = max((most for _, by_page, bal, most in info if bal and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for _, _, bal, most in info if bal], floor) if floor else None
    if repeats is None:
        return ()  # the state-bucket split (_get_packed_kv_cache_groups' anchor) is not modelled: refused
    groups: list[tuple[V4Spec, ...]] = []
    for b, by_page, balanced, most in info:
        n = cdiv(most, repeats) if balanced else 1
        if n == 1:
            groups.append(tuple(b))
            continue
        pattern = list(zip(*by_page.values(), strict=True))
        for i in range(n):
            groups.append(tuple(s for rep in pattern[i::n] for s in rep))
    return tuple(groups)


def _v4(arch: ModelArch, dep: Deployment, block_knob: Knob, mnbt: int, max_model_len: int) -> HybridBlocks:
    """DeepSeek-V4: the packed groups, their bytes per block id, and what one request takes of each group."""
    if not block_knob.defaulted and block_knob.as_int() != V4_BLOCK:
        raise PlanError(
            f"block_size {block_knob.as_int()}: vLLM's DEEPSEEK_V4_INDEXER and FLASHMLA_SPARSE_DSV4 backends take "
            f"kernel block size {V4_BLOCK} only (get_supported_kernel_block_sizes)"
        )
    block_knob = Knob(
        "page_size",
        V4_BLOCK,
        block_knob.origin if not block_knob.defaulted else "default: the DeepSeek-V4 backends take 256 only",
    )
    spec = dep.speculative_num_draft_tokens
    specs = v4_specs(arch, arch.num_mtp_layers if spec else 0)
    groups = pack_v4_groups(specs)
    if not groups:
        raise _refuse(arch, dep, "DeepSeek-V4 layers without a C4 / C128 repeat pattern")
    in_flight = max_in_flight_tokens(dep, mnbt)
    out: list[Group] = []
    for g in groups:
        first = g[0]
        kinds: dict[str, int] = {}
        for s in g:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        label = " + ".join(f"{n} {k}" for k, n in kinds.items())
        if first.base == "full":  # FullAttentionSpec.max_memory_usage_bytes: cdiv(max_model_len, block) pages
            d = Demand(label, "token", page_tokens=first.block)
        else:  # SlidingWindowSpec.max_admission_blocks_per_request
            held = min(first.window - 1 + in_flight, max_model_len)
            d = Demand(label, "window", window=held, extra=1, page_tokens=first.block)
        out.append(Group(label, len(g), 1, d))
    block_bytes = max(sum(s.page for s in g) for g in groups)
    widest = max(groups, key=lambda g: sum(s.page for s in g))
    pages = sorted({(s.kind, s.block, s.page) for s in specs})
    notes = [
        f"vLLM DeepSeek-V4 (0.33.0, fp8_ds_mla, block-outermost BLHNC layout): {len(specs)} cache specs in "
        f"{len(groups)} KV cache groups packed into one block id pool (_get_packed_kv_cache_groups); one block id = "
        f"the widest group's pages = {block_bytes:,} B ({len(widest)} layers' pages)",
        "vLLM DeepSeek-V4 pages (block tokens, bytes after the 576 B padding): "
        + "; ".join(f"{k} {b} tokens {p:,} B" for k, b, p in pages),
        f"vLLM sizes every window group (SWA and compressor states) for window - 1 + in-flight tokens "
        f"({in_flight:,}: max_in_flight_tokens, ASSUMPTION: async scheduling on the V1 runner) + 1 block "
        "(SlidingWindowSpec.max_admission_blocks_per_request): the compressor states, 4- and 8-token blocks, "
        "dominate a request's blocks; a running request holds far fewer once its prefill is done",
        "ASSUMPTION: every V4 spec's block stride alignment resolves to 1 (the backends' kernel block sizes equal "
        "the spec blocks), so bytes per block is not rounded further; DeepSeek-V4's top-k / prefill workspaces "
        "are not counted as non-KV memory",
        "vLLM prefix reuse on DeepSeek-V4: kvplan does not model which groups a hit can reuse (windows and "
        "compressor states are prefix-cacheable window groups in 0.33.0)",
    ]
    if spec:
        notes.append(
            f"speculative decoding (MTP, num_speculative_tokens {spec}): the {arch.num_mtp_layers} MTP layer's window "
            "cache joins the window groups (compress_ratio 1: no compressed or compressor-state spec); a measured "
            "weights point is used as is (ASSUMPTION: whether its run loaded the MTP layer is not known; an "
            "estimate adds the MTP group)"
        )
    return HybridBlocks(
        block=V4_BLOCK,
        block_knob=block_knob,
        page_bytes=block_bytes,
        attn_bytes_per_token=0,
        state_bytes=0,
        group_size=1,
        groups=tuple(out),
        mamba_cache_mode="none",
        notes=tuple(notes),
        packed_bytes_per_block=block_bytes,
        group_layers=len(widest),
    )


# ---------------------------------------------------------------------------------------------------------------
# GLM-5.3-Flash (Glm5NextForConditionalGeneration) on vLLM 0.33.0: KDA state, MLA, the pooled indexer K and its
# tail ring packed into one block id pool (``models/glm5next/``, ``v1/core/kv_cache_planning.py``).
# ---------------------------------------------------------------------------------------------------------------

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
        raise _refuse(arch, dep, "GLM-5.3-Flash's pools before or after vLLM 0.33.0 (only that source read)")
    if gpu.vendor != "nvidia" or gpu.sm // 10 != 9:
        raise _refuse(arch, dep, f"GLM-5.3-Flash off SM90 (SM{gpu.sm}: only the {GLM5_NEXT_BACKEND} path read)")
    if dep.attention_backend and dep.attention_backend != GLM5_NEXT_BACKEND:
        raise _refuse(arch, dep, f"GLM-5.3-Flash with attention backend {dep.attention_backend}")
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


def _glm5_next(arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, attn_tp: int) -> HybridBlocks:
    """GLM-5.3-Flash: the block (``_align_hybrid_block_size``), the packed groups (``_get_packed_kv_cache_groups``:
    the KDA, ring and MLA + indexer buckets, the state buckets split to the block the MLA bucket needs), their
    bytes per block id (``_get_kv_cache_bytes_per_block``, block-outermost: the widest group rounded to the lcm of
    the layers' block stride alignments) and what one request takes of each group."""
    if dep.dcp > 1:
        raise _refuse(arch, dep, "GLM-5.3-Flash with decode context parallel (dcp > 1)")
    states = {c for layer in arch.layers for c in layer.caches if isinstance(c, LinearState)}
    idx = {c for layer in arch.layers for c in layer.caches if isinstance(c, IndexerK)}
    mla_layers = [layer for layer in arch.layers if isinstance(layer.caches[0], MlaLatent)]
    if len(states) != 1 or len(idx) != 1 or any(layer.indexer is None for layer in mla_layers):
        raise _refuse(arch, dep, "GLM-5.3-Flash layers without one KDA shape and an indexer on every MLA layer")
    (state,), (indexer,) = states, idx
    # speculative decoding (``glm5_next_mtp``, num_speculative_tokens S): the MTP decoder layer
    # (``common/mtp.py`` Glm5NextMultiTokenPredictorLayer, ``is_mtp_layer=True``: an MLA (DSA) layer, never KDA)
    # brings one more MLA page, indexer page and tail ring (tagged is_draft, grouped with the target's)
    spec = dep.speculative_num_draft_tokens
    n_draft = arch.num_mtp_layers if spec else 0
    n_state, n_mla = sum(layer.state is not None for layer in arch.layers), len(mla_layers) + n_draft
    kpool = indexer.index_kpool
    # MambaSpec: conv bf16 + recurrent fp32 (kda_state_dtype); the conv state keeps conv_kernel - 1 + S columns
    # (``Glm5NextLinearAttention`` is a GatedDeltaNetAttention: num_spec = num_speculative_tokens)
    mamba_page = state.bytes_per_request(attn_tp, "vllm", spec_tokens=spec)
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
    ring = kpool << (cdiv(kpool + spec, kpool) - 1).bit_length()
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
    mla_page = block * row  # the KDA page is padded to it (mamba_page_size_padded)
    idx_page = block // kpool * indexer.bytes_per_state  # MLAAttentionSpec, tokens_per_state = kpool, uint8 132 B
    ring_page = ring * 2 * indexer.index_head_dim * 2  # CircularBufferSpec: [K, gate score] bf16 × ring slots
    # _get_packed_kv_cache_groups: balanced buckets' largest page-size counts: KDA n_state, MLA + indexer n_mla
    # (mixed: it stays whole, so at least n_mla repeats a group), ring n_mla
    repeats = approximate_gcd([n_state, n_mla, n_mla], n_mla)
    anchor = cdiv(n_mla, cdiv(n_mla, repeats)) * (mla_page + idx_page)  # the MLA + indexer group's pages
    state_groups = max(cdiv(n_state, repeats), cdiv(n_state, max(anchor // mla_page, 1)))
    ring_groups = max(1, cdiv(n_mla, max(anchor // ring_page, 1)))
    attn_groups = cdiv(n_mla, repeats)
    widest = max(anchor, cdiv(n_state, state_groups) * mla_page, cdiv(n_mla, ring_groups) * ring_page)
    # block stride alignments: MLA rows (align_blocks_to_rows: one row), the indexer's whole kernel blocks
    # (MultipleOf(kpool × 64) → a 128-token page when gcd(256, block) < block), 1 for the KDA state and the ring
    kernel = math.gcd(kpool * max(GLM5_NEXT_INDEXER_PAGES), block)
    idx_align = 1 if kernel == block else kernel // kpool * indexer.bytes_per_state
    bytes_per_block = cdiv(widest, math.lcm(row, idx_align)) * math.lcm(row, idx_align)
    # MambaSpec.max_memory_usage_bytes, 'align': 2 + one FlashKDA checkpoint block + num_speculative_blocks (S)
    per_state_group = 2 + 1 + spec
    groups = (
        Group(f"MLA + indexer K (kpool {kpool})", 2 * n_mla, attn_groups,
              Demand("MLA + indexer K", "token", units=attn_groups)),
        Group(state.label, n_state, state_groups,
              Demand(state.label, "request", units=state_groups * per_state_group)),
        Group("indexer tail ring", n_mla, ring_groups, Demand("indexer tail ring", "request", units=ring_groups)),
    )  # fmt: skip
    notes: tuple[str, ...] = (
        f"vLLM GLM-5.3-Flash (0.33.0, {GLM5_NEXT_BACKEND}, block-outermost BLHNC layout: KpoolTailBackend's only "
        f"layout): {attn_groups} MLA + indexer group of {n_mla} + {n_mla} pages ({mla_page:,} + {idx_page:,} B: "
        f"{block // kpool} pooled keys of {indexer.bytes_per_state} B), {state_groups} KDA state groups of at most "
        f"{cdiv(n_state, state_groups)} layers (a state page {mamba_page:,} B padded to {mla_page:,} B), "
        f"{ring_groups} tail ring group of {n_mla} × {ring_page:,} B; one block id = the widest group "
        f"{widest:,} B rounded to lcm({row}, {idx_align}) = {bytes_per_block:,} B (_get_kv_cache_bytes_per_block)",
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
            f"tail ring join the groups ({n_mla - n_draft} + {n_draft} MLA layers), each KDA group keeps {spec} "
            f"speculative state blocks a request and a conv state {spec} columns wider, the tail ring holds "
            f"{ring} slots ({kpool} × next_power_of_2(cdiv({kpool} + {spec}, {kpool}))); ASSUMPTION: the drafter's "
            "share of the profiling run's torch peak and of the CUDA graphs is not modelled",
        )
    return HybridBlocks(
        block=block,
        block_knob=block_knob,
        page_bytes=bytes_per_block,
        attn_bytes_per_token=row,
        state_bytes=mamba_page,
        group_size=1,
        groups=groups,
        mamba_cache_mode="align",
        notes=notes,
        packed_bytes_per_block=bytes_per_block,
        group_layers=2 * n_mla,
    )
