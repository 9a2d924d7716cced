"""Cache kinds: what each layer of a model keeps per token, and how many bytes that takes (pure data).

A model is its layers; each layer owns caches of known kinds, the way vLLM's ``v1/kv_cache_interface.py``
names ``FullAttentionSpec``, ``MLAAttentionSpec``, ``SlidingWindowSpec`` and ``MambaSpec``. Each kind answers
its own size questions; engines map kinds to their pools (docs/engines.md). A new attention family (sliding
window, Mamba state, compressed attention) is a new kind here, not a new branch in every caller.

| kind          | bytes per token per layer (one rank)                                   |
|---------------|------------------------------------------------------------------------|
| FullAttention | kv_heads_per_rank × (head_dim + v_head_dim) × dtype bytes              |
| MlaLatent     | MlaLayout: (kv_lora_rank + rope) × 2 bf16, 656 fp8_ds_mla, 576 raw fp8   |
| IndexerK      | ceil((index_head_dim + index_head_dim / 128 × 4) / index_kpool)         |
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.formats import MlaLayout, indexer_bytes_per_token_layer

KV_DTYPE_BYTES = {
    "auto": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_ds_mla": 1,
}
"""Element size of a KV cache dtype as the engines spell it ('auto' is the model dtype: bf16 for every
model kvplan knows); SGLang ``torch._utils._element_size(kv_cache_dtype)``, vLLM ``STR_DTYPE_TO_TORCH_DTYPE``."""


def kv_dtype_bytes(dtype: str) -> int:
    """Bytes of one cached element in ``dtype`` (2 for bf16/fp16/auto, 1 for any fp8).

    >>> kv_dtype_bytes("fp8_e5m2"), kv_dtype_bytes("auto")
    (1, 2)
    """
    return KV_DTYPE_BYTES.get(dtype, 1 if dtype.startswith("fp8") else 2)


@dataclass(frozen=True)
class FullAttention:
    """Full (causal) attention with its own K and V per kv head: MHA, GQA or MQA.

    Under attention tensor parallel (tp / dp_attention ranks) the kv heads are split, and replicated when
    there are fewer kv heads than ranks: SGLang ``ModelConfig.get_num_kv_heads`` and vLLM
    ``ModelConfig.get_num_kv_heads`` both return ``max(1, total_num_kv_heads // tp)``.
    """

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    num_attention_heads: int = 0

    @property
    def label(self) -> str:
        """'MHA' (one kv head per query head), 'MQA' (one kv head), else 'GQA'."""
        if self.num_kv_heads == 1:
            return "MQA"
        if self.num_attention_heads and self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        return "GQA"

    def kv_heads_per_rank(self, attn_tp: int) -> int:
        return max(1, self.num_kv_heads // max(attn_tp, 1))

    def replicated(self, attn_tp: int) -> bool:
        """True when ranks hold copies of the same kv head (fewer kv heads than attention ranks)."""
        return self.num_kv_heads < attn_tp

    def k_bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        return self.kv_heads_per_rank(attn_tp) * self.head_dim * kv_dtype_bytes(dtype)

    def v_bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        return self.kv_heads_per_rank(attn_tp) * self.v_head_dim * kv_dtype_bytes(dtype)

    def bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        """K + V of one token in one layer on one rank.

        >>> FullAttention(8, 128, 128).bytes_per_token(8, "bf16")   # 1 head × (128 + 128) × 2
        512
        """
        return self.k_bytes_per_token(attn_tp, dtype) + self.v_bytes_per_token(attn_tp, dtype)

    def describe(self, attn_tp: int) -> str:
        per = self.kv_heads_per_rank(attn_tp)
        rep = " (replicated)" if self.replicated(attn_tp) else ""
        v = f"/{self.v_head_dim}" if self.v_head_dim != self.head_dim else ""
        heads = f"{self.num_kv_heads} kv heads × {self.head_dim}{v}"
        return f"{self.label}, {heads} → {per} per rank{rep} at attention tp {attn_tp}"


@dataclass(frozen=True)
class MlaLatent:
    """Multi-head latent attention: one compressed latent + rope key per token, replicated on every TP rank."""

    kv_lora_rank: int
    qk_rope_head_dim: int

    label = "MLA"

    def bytes_per_token(self, layout: MlaLayout) -> int:
        """One token of one layer in ``layout``.

        >>> MlaLatent(512, 64).bytes_per_token(MlaLayout.BF16)
        1152
        """
        return layout.bytes_per_token_layer(self.kv_lora_rank, self.qk_rope_head_dim)

    def describe(self, attn_tp: int) -> str:
        del attn_tp
        return f"MLA, latent {self.kv_lora_rank} + rope {self.qk_rope_head_dim}, replicated on every rank"


@dataclass(frozen=True)
class IndexerK:
    """The DSA indexer's K cache (fp8 + an fp32 scale per 128), on the indexer-owning ("full") layers only."""

    index_head_dim: int
    index_kpool: int = 1

    label = "indexer K"

    @property
    def bytes_per_token(self) -> int:
        """fp8 K + one fp32 scale per 128 elements, shared by ``index_kpool`` tokens.

        >>> IndexerK(128).bytes_per_token
        132
        """
        return indexer_bytes_per_token_layer(self.index_head_dim, self.index_kpool)


AttentionCache = FullAttention | MlaLatent
CacheKind = FullAttention | MlaLatent | IndexerK


@dataclass(frozen=True)
class Layer:
    """One decoder layer and the caches it owns."""

    index: int
    caches: tuple[CacheKind, ...]

    @property
    def attention(self) -> AttentionCache:
        for c in self.caches:
            if isinstance(c, FullAttention | MlaLatent):
                return c
        raise ValueError(f"layer {self.index} has no attention cache")

    @property
    def indexer(self) -> IndexerK | None:
        for c in self.caches:
            if isinstance(c, IndexerK):
                return c
        return None


def describe_kinds(layers: tuple[Layer, ...], attn_tp: int) -> tuple[str, ...]:
    """One line per cache kind the layers own, with its bytes per token on one rank (bf16 for attention).

    >>> describe_kinds(tuple(Layer(i, (FullAttention(8, 128, 128, 64),)) for i in range(80)), 8)
    ('80 × GQA, 8 kv heads × 128 → 1 per rank at tp 8 (40,960 B/token bf16)',)
    """
    counts: dict[CacheKind, int] = {}
    for layer in layers:
        for c in layer.caches:
            counts[c] = counts.get(c, 0) + 1
    out: list[str] = []
    for c, n in counts.items():
        if isinstance(c, FullAttention):
            v = f"/{c.v_head_dim}" if c.v_head_dim != c.head_dim else ""
            per = c.kv_heads_per_rank(attn_tp)
            rep = ", replicated" if c.replicated(attn_tp) else ""
            total = n * c.bytes_per_token(attn_tp, "bf16")
            out.append(
                f"{n} × {c.label}, {c.num_kv_heads} kv heads × {c.head_dim}{v} → {per} per rank{rep} at tp {attn_tp}"
                f" ({total:,} B/token bf16)"
            )
        elif isinstance(c, MlaLatent):
            bf16, fp8 = c.bytes_per_token(MlaLayout.BF16), c.bytes_per_token(MlaLayout.FP8_RAW)
            out.append(
                f"{n} × MLA, latent {c.kv_lora_rank} + rope {c.qk_rope_head_dim}, replicated on every rank"
                f" ({n * bf16:,} B/token bf16, {n * fp8:,} raw fp8)"
            )
        else:
            out.append(
                f"{n} × indexer K, head_dim {c.index_head_dim}, kpool {c.index_kpool} "
                f"({n * c.bytes_per_token:,} B/token: fp8 + fp32 scale per 128)"
            )
    return tuple(out)


def layer_groups(layers: tuple[Layer, ...]) -> tuple[tuple[int, tuple[CacheKind, ...]], ...]:
    """Runs of layers with the same caches, as (count, caches): what ``models show`` prints one line each."""
    out: list[tuple[int, tuple[CacheKind, ...]]] = []
    counts: dict[tuple[CacheKind, ...], int] = {}
    for layer in layers:
        counts[layer.caches] = counts.get(layer.caches, 0) + 1
    for caches, n in counts.items():
        out.append((n, caches))
    return tuple(out)
