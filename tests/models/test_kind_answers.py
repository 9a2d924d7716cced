"""Each cache kind answers its own cost on one GPU (``kind_costs``, asked by kvplan.plan.budget.kind_costs) and how
TP splits its kv heads (``heads``, asked by plan/transfer, probes/tensors and the doctor's implied shapes), so that
no caller outside models/ and engines/ branches on the kind's type. Figures derived from the engines' formulas:

- full attention: kv heads per rank = max(1, num_kv_heads // attn_tp) (SGLang and vLLM
  ``ModelConfig.get_num_kv_heads``); K + V per token per layer = heads × (head_dim + v_head_dim) × dtype bytes;
- MLA: one latent row per token, replicated on every TP rank (vLLM ``MLAAttentionSpec``; SGLang
  ``MLATokenToKVPool``): (kv_lora_rank + rope) × 2 B in bf16;
- indexer K: index_head_dim fp8 + one fp32 scale per 128 (SGLang ``NSATokenToKVPool``: 128 + 4 = 132 B);
- Gated DeltaNet state: conv (kernel − 1) × conv_dim / tp + heads / tp × dk × dv (vLLM
  ``MambaStateShapeCalculator.gated_delta_net_state_shape``), SGLang conv bf16 and recurrent fp32.
"""

from __future__ import annotations

from kvplan.models.cache import FullAttention, IndexerK, LinearState, MlaLatent, SlidingWindow
from kvplan.models.costs import CostBasis, KvHeads
from kvplan.models.formats import MlaLayout

ON = CostBasis(attn_tp=8, kv_dtype="bf16", engine="sglang", mla_layout=MlaLayout.BF16)


def test_full_attention_costs_per_token_over_its_layers() -> None:
    # 8 kv heads over 8 ranks: 1 a rank × (128 + 128) × 2 B = 512 B a token a layer; 10 layers: 5,120 B
    (cost,) = FullAttention(8, 128, 128, 64).kind_costs(10, ON)
    assert (cost.kind, cost.per, cost.layers, cost.bytes_per_token, cost.request_max_bytes) == (
        "GQA", "token", 10, 5_120, 0
    )  # fmt: skip


def test_sliding_window_holds_at_most_its_window() -> None:
    # the same 512 B a token a layer, 12 layers (6,144 B), at most 128 tokens: 786,432 B a request
    (cost,) = SlidingWindow(8, 128, 128, window=128, sinks=True).kind_costs(12, ON)
    assert (cost.kind, cost.per, cost.bytes_per_token, cost.window) == (
        "sliding window 128 + sinks",
        "window",
        6_144,
        128,
    )
    assert cost.request_max_bytes == 128 * 6_144 == 786_432


def test_mla_costs_its_row_and_nothing_without_a_layout() -> None:
    # (512 + 64) × 2 = 1,152 B a token a layer in bf16; 61 layers: 70,272 B
    (cost,) = MlaLatent(512, 64).kind_costs(61, ON)
    assert (cost.kind, cost.bytes_per_token) == ("MLA", 61 * 1_152)
    assert MlaLatent(512, 64).kind_costs(61, CostBasis(8, "bf16", "sglang", None)) == ()


def test_indexer_and_state_costs() -> None:
    (idx,) = IndexerK(128).kind_costs(21, ON)  # 21 indexer layers × 132 B
    assert (idx.kind, idx.bytes_per_token) == ("indexer K", 21 * 132)
    # GDN, 32 value heads, 16 k heads of 128, v 128, kernel 4, tp 1 on SGLang: conv 3 × (2 × 16 × 128 + 32 × 128)
    # × 2 B = 49,152 B; recurrent 32 × 128 × 128 × 4 B = 2,097,152 B: 2,146,304 B a layer a request
    state = LinearState("gated_deltanet", 32, 16, 128, 128, 4)
    (cost,) = state.kind_costs(3, CostBasis(1, "bf16", "sglang", None))
    assert (cost.per, cost.bytes_per_token, cost.request_max_bytes) == ("request", 0, 3 * 2_146_304)


def test_heads_split_by_tp_and_mla_has_none() -> None:
    # 8 kv heads at attention tp 16: max(1, 8 // 16) = 1 a rank (replicated); at tp 4: 2 a rank
    assert FullAttention(8, 128, 96).heads(16) == KvHeads(8, 1, 128, 96)
    assert FullAttention(8, 128, 96).heads(4) == KvHeads(8, 2, 128, 96)
    assert MlaLatent(512, 64).heads(8) is None
