"""vLLM 0.33.0's hybrid KV cache manager: the KV cache groups of a hybrid model and its ONE shared block pool.

Source: the PyPI wheel vllm-0.33.0 (``vllm/`` paths below). A hybrid model's layers are bucketed by spec and split
into KV cache groups of equal layer count; every group draws its block ids from one pool, and one block id holds a
page of every layer of a group (the arithmetic, with the engine's functions, at ``plan_blocks``).

Planned here: full attention or MLA beside sliding-window layers (gpt-oss); beside linear-attention state
(Qwen3-Next Gated DeltaNet, Kimi-Linear KDA) in kvplan.engines.vllm_mamba; DeepSeek-V4 (vllm_dsv4) and GLM-5.3-Flash
(KDA + MLA with the pooled indexer and its tail ring, vllm_glm5_next) as packed groups; the shared pieces in
vllm_blocks. Speculative decoding: on Qwen3-Next at ``plan_mamba``, on GLM-5.3-Flash at ``plan_glm5_next``. Refused
with one line: sliding window and state together, a hybrid with decode context parallel, speculative decoding on
the other hybrids (their draft groups / blocks are not modelled)."""

from __future__ import annotations

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import (
    Group,
    HybridBlocks,
    approximate_gcd,
    caches,
    group_size_of,
    max_in_flight_tokens,
    padding_note,
    refuse,
)
from kvplan.engines.vllm_dsv4 import is_v4, pack_v4_groups, plan_v4, v4_layout, v4_specs
from kvplan.engines.vllm_families import family_of
from kvplan.engines.vllm_glm5_next import glm5_next_layout, is_glm5_next, plan_glm5_next
from kvplan.engines.vllm_mamba import HYBRID_PREFIX_CACHING_SINCE, plan_mamba
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv

__all__ = [  # what vllm.py, plan/prefix.py and the tests take from here (the sizers live in the modules above)
    "HYBRID_PREFIX_CACHING_SINCE",
    "HybridBlocks",
    "approximate_gcd",
    "glm5_next_layout",
    "group_size_of",
    "is_glm5_next",
    "is_v4",
    "pack_v4_groups",
    "plan_blocks",
    "v4_layout",
    "v4_specs",
]


# The pool, from vLLM 0.33.0's source:
#     page          = one layer's page after unification (attention: block × bytes per token per layer;
#                     Mamba: its state, padded to the attention page)
#     group_size    = min(layers per bucket), or the max when max < 1.5 × min
#                     (``v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size``)
#     groups        = cdiv(layers of each bucket, group_size) per bucket (layers[i::groups]; padding layers warned)
#     bytes_per_block = group_size × page   (``_get_kv_cache_bytes_per_block``: the largest group's pages)
#     num_blocks    = available // bytes_per_block            (``get_kv_cache_config_from_groups``)
#     per request   = Σ over groups cdiv(spec.max_memory_usage_bytes, spec.page_size_bytes)
#                     (``v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config``):
#                     full attention  cdiv(max_model_len, block)              (``FullAttentionSpec``)
#                     sliding window  cdiv(min(window - 1 + in_flight, max_model_len), block) + 1
#                                     (``SlidingWindowSpec.max_admission_blocks_per_request``; in_flight =
#                                     ``VllmConfig.max_in_flight_tokens`` = max_concurrent_batches × mnbt)
#                     Mamba / linear  2 + spec + checkpoint blocks ('align'), 1 + spec ('none')
#                                     (``MambaSpec.max_memory_usage_bytes``)
#     Maximum concurrency = num_blocks / per request (the null block included); "GPU KV cache size: N tokens" =
#                     int(concurrency × max_model_len)     (``get_kv_cache_capacity`` / ``update_kv_cache_capacity``)
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
    kinds = {c.spec for c in caches(arch)}
    if "compressed" in kinds:
        if dep.dcp > 1:
            raise refuse(arch, dep, "DeepSeek-V4 compressed-attention layers with decode context parallel (dcp > 1)")
        return plan_v4(arch, dep, block_knob, mnbt, max_model_len)
    if is_glm5_next(arch):
        return plan_glm5_next(arch, dep, attn_bytes_per_token, block_knob, attn_tp)
    for layer in arch.layers:
        for c in layer.caches:
            if c.spec not in ("full", "mla", "window", "state"):
                # GLM-5.3-Flash (Glm5Next): its pooled indexer K and tail ring (CircularBufferSpec) are groups of
                # their own beside the KDA state (shared/reference/vllm-0.33.0.md §2c): not modelled
                what = str(getattr(c, "kind_name", c.label))  # IndexerK has no kind_name: its label, 'indexer K'
                raise refuse(arch, dep, f"{what} layers beside linear-attention state or a window", layer.index)
    if {"window", "state"} <= kinds:
        raise refuse(arch, dep, "sliding-window layers beside linear-attention state")
    if dep.dcp > 1:
        if "window" in kinds:
            # SlidingWindowSpec.max_memory_usage_bytes asserts it
            raise PlanError("vLLM refuses decode context parallel with sliding window: DCP not support sliding window.")
        raise refuse(arch, dep, "linear-attention state layers with decode context parallel (dcp > 1)")
    mtp = family_of(arch).hybrid_mtp
    if dep.mtp and mtp == "no_draft":
        # config/speculative.py: method 'mtp' needs the draft config's model_type among MTPModelTypes (or a
        # Transformers MTP); kimi_linear maps to none (only kimi_k3 -> kimi_k3_mtp), so SpeculativeConfig raises
        raise PlanError(
            "vLLM refuses it: NotImplementedError: Unsupported speculative method: 'mtp' (Kimi-Linear has no MTP "
            "draft: its model_type kimi_linear maps to no MTP model)"
        )
    if dep.mtp and (mtp != "planned" or "window" in kinds):
        raise refuse(
            arch, dep, "speculative decoding on a hybrid model other than Qwen3-Next and GLM-5.3-Flash (draft "
            "groups, speculative state blocks)"
        )  # fmt: skip
    if "window" in kinds:
        return _sliding(arch, dep, attn_bytes_per_token, block_knob, attn_tp, mnbt, max_model_len)
    return plan_mamba(arch, dep, attn_bytes_per_token, block_knob, min_kernel_block, attn_tp)


def _sliding(
    arch: ModelArch, dep: Deployment, row: int, block_knob: Knob, attn_tp: int, mnbt: int, max_model_len: int
) -> HybridBlocks:
    """Full attention + sliding window (gpt-oss): both pages block × the same per-token bytes, no unification."""
    windows = {layer.window for layer in arch.layers if layer.window is not None}
    fulls = [c for c in caches(arch) if c.spec in ("full", "mla")]
    if len({c.window for c in windows}) != 1:
        raise refuse(arch, dep, "sliding-window layers of several window sizes")
    (sw,) = {c.window for c in windows}
    dtype = dep.kv_cache_dtype
    sw_row = next(iter(windows)).bytes_per_token(attn_tp, dtype)
    if sw_row != row or any(c.spec == "mla" for c in fulls):
        raise refuse(arch, dep, "sliding-window layers whose page differs from the full-attention page")
    n_sw = sum(1 for c in caches(arch) if c.spec == "window")
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
    notes += [n for n in (padding_note("full attention", n_full, size), padding_note("sliding", n_sw, size)) if n]
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
