"""Parameter groups of an MLA/DSA MoE model, for a weights-per-GPU estimate.

Counts follow the module shapes of DeepSeek-V3-style checkpoints (GLM-5.x reuses them):
- MLA attention per layer: q_a (h×q_lora) + q_b (q_lora × heads × (nope+rope)) [or q_proj h × heads ×
  (nope+rope) without q_lora] + kv_a (h × (kv_lora+rope)) + kv_b (kv_lora × heads × (nope+v)) +
  o (heads × v × h); the indexer adds wq_b (q_lora × index_heads × index_dim) + wk (h × index_dim) +
  weights_proj (h × index_heads) on every layer (checkpoints ship indexer weights for all layers).
- dense MLP on the first ``first_k_dense_replace`` layers: 3 × h × intermediate;
- routed experts: 3 × h × moe_intermediate each; shared experts the same; router: n_routed × h;
- embeddings and LM head: vocab × h each (one copy when tied);
- each MTP layer: one MoE decoder layer plus eh_proj (2h × h); it shares the embeddings and head.
Norm vectors are left out (under 0.01 % of the total).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.arch import ParamGroup

FP8_BLOCK_ELEMS = 128 * 128
"""fp8 block quantization: one fp32 scale per 128×128 block."""


@dataclass(frozen=True, kw_only=True)
class MoeShape:
    hidden_size: int
    num_layers: int
    num_mtp_layers: int
    num_attention_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_n_heads: int
    index_head_dim: int
    first_k_dense_replace: int
    intermediate_size: int
    n_routed_experts: int
    n_shared_experts: int
    moe_intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool

    def attention_params(self) -> int:
        h, heads = self.hidden_size, self.num_attention_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q_lora = self.q_lora_rank
        q = h * q_lora + q_lora * heads * qk if q_lora else h * heads * qk
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * heads * (
            self.qk_nope_head_dim + self.v_head_dim
        )
        o = heads * self.v_head_dim * h
        indexer = 0
        if self.index_n_heads and self.index_head_dim:
            q_in = self.q_lora_rank or h
            indexer = q_in * self.index_n_heads * self.index_head_dim + h * self.index_head_dim + h * self.index_n_heads
        return q + kv + o + indexer

    def expert_params(self) -> int:
        return 3 * self.hidden_size * self.moe_intermediate_size


def param_groups(shape: MoeShape, *, checkpoint_dtype: str) -> tuple[ParamGroup, ...]:
    """Parameter groups with their checkpoint bytes per parameter and how they are split."""
    if checkpoint_dtype == "fp8":
        lin_num, lin_den = FP8_BLOCK_ELEMS + 4, FP8_BLOCK_ELEMS  # 1 B + 4 B per 128×128 block
    elif checkpoint_dtype == "nvfp4":
        lin_num, lin_den = 9, 16  # 4 bits + one fp8 scale per 16 values = 0.5 + 1/16 B
    elif checkpoint_dtype in ("bf16", "fp16"):
        lin_num, lin_den = 2, 1
    else:  # fp32
        lin_num, lin_den = 4, 1
    moe_layers = shape.num_layers - shape.first_k_dense_replace
    h = shape.hidden_size
    embed = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
    mtp_layer = (
        shape.attention_params() + (shape.n_routed_experts + shape.n_shared_experts) * shape.expert_params() + 2 * h * h
    )
    groups = [
        ParamGroup(
            name="attention",
            params=shape.attention_params() * shape.num_layers,
            bytes_per_param_num=lin_num,
            bytes_per_param_den=lin_den,
            split="attn",
        ),
        ParamGroup(
            name="dense_mlp",
            params=3 * h * shape.intermediate_size * shape.first_k_dense_replace,
            bytes_per_param_num=lin_num,
            bytes_per_param_den=lin_den,
        ),
        ParamGroup(
            name="routed_experts",
            params=shape.n_routed_experts * shape.expert_params() * moe_layers,
            bytes_per_param_num=lin_num,
            bytes_per_param_den=lin_den,
            split="experts",
        ),
        ParamGroup(
            name="shared_experts",
            params=shape.n_shared_experts * shape.expert_params() * moe_layers,
            bytes_per_param_num=lin_num,
            bytes_per_param_den=lin_den,
        ),
        ParamGroup(
            name="router",
            params=shape.n_routed_experts * h * moe_layers,
            bytes_per_param_num=2,
            split="none",
        ),
        ParamGroup(name="embeddings", params=embed, bytes_per_param_num=2),
        ParamGroup(
            name="mtp",
            params=mtp_layer * shape.num_mtp_layers,
            bytes_per_param_num=lin_num,
            bytes_per_param_den=lin_den,
            split="experts",
        ),
    ]
    return tuple(g for g in groups if g.params > 0)
