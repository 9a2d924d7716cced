"""vLLM's hybrid KV cache manager, its shared pieces: the KV cache groups of a hybrid model, the one block pool
they draw from (``HybridBlocks``), and the rules every hybrid sizer uses (``v1/core/kv_cache_planning.py``,
``v1/core/kv_cache_utils.py``). The sizers are kvplan.engines.vllm_hybrid (dispatch, sliding window),
vllm_mamba, vllm_dsv4 and vllm_glm5_next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import kvplan.engines.vllm_knobs as vllm_knobs
from kvplan.engines.common import Demand, Knob
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import CacheKind
from kvplan.models.deploy import Deployment
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, parse_version

MLA_MAMBA_BLOCK_ALIGNMENT = 128
"""``_align_hybrid_block_size``: TRTLLM / FlashInfer MLA decode kernels need the manager block a multiple of 128
for hybrid MLA / Mamba models."""


MambaCacheMode = Literal["none", "align"]
"""``CacheConfig.mamba_cache_mode`` as kvplan plans it ('all', vLLM 0.26-0.27, is refused)."""


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
    mamba_cache_mode: MambaCacheMode
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


def refuse(arch: ModelArch, dep: Deployment, what: str, layer: int | None = None) -> InputError:
    """One line, exit 2: what kvplan does not yet plan, the model (and layer), the engine."""
    where = f"{arch.name}, layer {layer}" if layer is not None else arch.name
    return InputError(f"kvplan does not yet plan {what} ({where}) on vLLM {dep.engine_version}")


IN_FLIGHT_SINCE = (0, 26, 0)
"""vLLM 0.26.0 sizes a window with ``max_in_flight_tokens`` (``SlidingWindowSpec.max_admission_blocks_per_request``);
0.25.0 and before with ``max_num_batched_tokens`` (``SlidingWindowSpec.max_memory_usage_bytes``; wheels read)."""


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


def caches(arch: ModelArch) -> list[CacheKind]:
    return [c for layer in arch.layers for c in layer.caches]


def group_size_of(counts: list[int]) -> int:
    """``_get_kv_cache_groups_uniform_page_size``: the smallest bucket, or the largest when it is under 1.5 × the
    smallest (fewer padding layers).

    >>> group_size_of([18, 18]), group_size_of([12, 36]), group_size_of([12, 13])
    (18, 12, 13)
    """
    lo, hi = min(counts), max(counts)
    return hi if hi < lo * 1.5 else lo


def padding_note(kind: str, layers: int, size: int) -> str | None:
    pad = size - layers % size
    if pad == size:
        return None
    return (
        f"vLLM: Add {pad} padding layers, may waste at most {pad / layers * 100:.2f}% KV cache memory "
        f"({kind}: {layers} layers in groups of {size})"
    )


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
