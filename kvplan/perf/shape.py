"""What a forward step multiplies and reads, from the model kvplan already loaded (ModelArch): GEMM parameters
(dense, routed experts, LM head) and the attention kinds with their layer counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kvplan.models.arch import ModelArch, Split

_NOT_GEMM = ("embeddings", "norms", "engine_additions", "rotary_cache", "mtp", "routed_experts")
QUANT_BYTES = {"bf16": (2, 1), "fp16": (2, 1), "fp8": (1, 1), "fp4": (9, 16), "nvfp4": (9, 16), "int4": (9, 16)}
"""Weight bytes per parameter by GEMM quant mode (num, den): NVFP4 / int4 carry an fp8 / bf16 scale per 16 or 32
values (NVIDIA's NVFP4 format: e2m1 + e4m3 per 16 = 4.5 bits), counted as 4.5 bits for both."""


@dataclass(frozen=True, kw_only=True)
class AttentionGroup:
    """Layers of one attention kind: ``kind`` is 'gqa', 'swa', 'mla', 'dsa' or 'linear'."""

    kind: str
    layers: int
    q_heads: int
    kv_heads: int = 0
    qk_dim: int = 0
    v_dim: int = 0
    window: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    index_heads: int = 0
    index_dim: int = 0
    index_topk: int = 0
    indexer_layers: int = 0
    state_bytes: int = 0
    """linear: the recurrent + conv state one request reads and writes per layer per step (bf16, whole model)."""


@dataclass(frozen=True, kw_only=True)
class StepShape:
    name: str
    hidden: int
    vocab: int
    layers: int
    dense_params: int
    """Parameters every token multiplies (attention projections, dense MLP, shared experts, router, indexer)."""
    attention_params: int = 0
    """The attention projections' and the DSA indexer's among ``dense_params``: a checkpoint may keep them at another
    format than its MLPs (NVIDIA's NVFP4 checkpoints keep them bf16: their ``exclude_modules`` / ``ignore``)."""
    routed_params: int
    num_experts: int
    experts_per_token: int
    attention: tuple[AttentionGroup, ...]

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    def active_params(self) -> int:
        """GEMM parameters one token multiplies: dense, its routed experts' share and the LM head."""
        routed = self.routed_params * self.experts_per_token // self.num_experts if self.num_experts else 0
        return self.dense_params + routed + self.lm_head_params


def _num_experts(arch: ModelArch) -> int:
    """Routed experts per MoE layer: the router holds moe_layers × E × hidden weights (+ a bias of E per layer, lost
    to the floor division), MoE layers = layers − dense layers (dense_mlp / (3 · hidden · intermediate))."""
    a = arch.activation
    groups = {g.name: g.gemm_params() for g in arch.param_groups}
    if a is None or not a.is_moe or not groups.get("router"):
        return 0
    dense_layers = (
        groups.get("dense_mlp", 0) // (3 * a.hidden_size * a.dense_intermediate) if a.dense_intermediate else 0
    )
    moe_layers = max(arch.num_layers - dense_layers, 1)
    return max(groups["router"] // a.hidden_size // moe_layers, 1)


def _mla_group(arch: ModelArch, c: Any, heads: int) -> AttentionGroup:
    dsa = arch.is_dsa
    return AttentionGroup(kind="dsa" if dsa else "mla", layers=0, q_heads=heads, kv_lora_rank=c.kv_lora_rank,
                          rope_dim=c.qk_rope_head_dim, qk_dim=arch.head_dim, v_dim=arch.v_head_dim or 128,
                          index_heads=arch.index_n_heads if dsa else 0, index_dim=arch.index_head_dim if dsa else 0,
                          index_topk=arch.index_topk if dsa else 0,
                          indexer_layers=arch.full_indexer_layers if dsa else 0)  # fmt: skip


def _swa_group(arch: ModelArch, c: Any, heads: int) -> AttentionGroup:
    return AttentionGroup(kind="swa", layers=0, q_heads=c.num_attention_heads or heads, kv_heads=c.num_kv_heads,
                          qk_dim=c.head_dim, v_dim=c.v_head_dim, window=c.window)  # fmt: skip


def _gqa_group(arch: ModelArch, c: Any, heads: int) -> AttentionGroup:
    return AttentionGroup(kind="gqa", layers=0, q_heads=c.num_attention_heads or heads, kv_heads=c.num_kv_heads,
                          qk_dim=c.head_dim, v_dim=c.v_head_dim)  # fmt: skip


def _linear_group(arch: ModelArch, c: Any, heads: int) -> AttentionGroup:
    return AttentionGroup(kind="linear", layers=0, q_heads=c.num_heads, state_bytes=c.bytes_per_request(1, "sglang"))


_GROUP_OF: dict[str, Callable[[ModelArch, Any, int], AttentionGroup]] = {
    "mla": _mla_group, "window": _swa_group, "full": _gqa_group, "state": _linear_group,
}  # fmt: skip
"""A layer's first cache, by the vLLM spec its kind says it becomes (``CacheKind.spec``), priced as one group."""


def _groups(arch: ModelArch) -> tuple[AttentionGroup, ...]:
    counts: dict[AttentionGroup, int] = {}
    for layer in arch.layers:
        c = layer.caches[0]
        price = _GROUP_OF.get(c.spec)
        if price is None:  # compressed attention (DeepSeek-V4): its compressed length is not priced yet
            raise ValueError(f"{arch.name}: perf has no step model for {type(c).__name__} layers yet")
        g = price(arch, c, arch.num_attention_heads)
        counts[g] = counts.get(g, 0) + 1
    return tuple(AttentionGroup(**{**g.__dict__, "layers": n}) for g, n in counts.items())


def step_shape(arch: ModelArch) -> StepShape:
    """The GEMM and attention shapes of ``arch``; ValueError for a model perf cannot price (one line for the CLI)."""
    a = arch.activation
    if a is None:
        raise ValueError(f"{arch.name}: no hidden_size / vocab_size read, so no GEMM shapes for perf")
    groups = {g.name: g.gemm_params() for g in arch.param_groups}  # values, not packed elements
    dense = sum(p for n, p in groups.items() if n not in _NOT_GEMM)
    return StepShape(
        name=arch.name,
        hidden=a.hidden_size,
        vocab=a.vocab_size,
        layers=arch.num_layers,
        dense_params=dense,
        attention_params=groups.get("attention", 0) + groups.get("indexer", 0),
        routed_params=groups.get("routed_experts", 0),
        num_experts=_num_experts(arch),
        experts_per_token=a.experts_per_token,
        attention=_groups(arch),
    )


@lru_cache(maxsize=256)  # asked once a step; the same for every step of a deployment
def weight_bytes_per_gpu(
    shape: StepShape, split: Split, quant: str, moe_quant: str, attention_quant: str = ""
) -> tuple[int, int]:
    """(dense + LM head, routed experts) weight bytes on one GPU at their quant modes (the LM head stays bf16); the
    attention projections at ``attention_quant`` where it is given and differs from ``quant``."""
    num, den = QUANT_BYTES[quant]
    apart = attention_apart(shape, quant, attention_quant)
    dense = -(-(shape.dense_params - apart) * num // (den * split.tp)) + -(-shape.lm_head_params * 2 // split.tp)
    dense += attention_weight_bytes(shape, split, quant, attention_quant)
    num, den = QUANT_BYTES[moe_quant]
    routed = -(-shape.routed_params * num // (den * split.experts))
    return dense, routed


def attention_apart(shape: StepShape, quant: str, attention_quant: str) -> int:
    """The attention projections' parameters priced apart from the other dense GEMMs: all of them where their format
    is given and differs from ``quant``, else none."""
    return shape.attention_params if attention_quant not in ("", quant) else 0


def attention_weight_bytes(shape: StepShape, split: Split, quant: str, attention_quant: str) -> int:
    """The bytes on one GPU of the attention projections priced apart (``attention_apart``; 0 where none are)."""
    apart = attention_apart(shape, quant, attention_quant)
    if not apart:
        return 0
    num, den = QUANT_BYTES[attention_quant]
    return -(-apart * num // (den * split.tp))
