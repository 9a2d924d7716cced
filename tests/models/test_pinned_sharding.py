"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/sharding.py.

Each tensor's bytes on rank 0 are derived in a comment from the engines' parallel layers (vLLM / SGLang
``layers/linear.py`` ``ColumnParallelLinear`` / ``RowParallelLinear`` / ``QKVParallelLinear``,
``layers/vocab_parallel_embedding.py`` with ``DEFAULT_VOCAB_PADDING_SIZE`` 64, ``FusedMoE``), never from kvplan's
own output.
"""

from __future__ import annotations

from kvplan.models.arch import Split
from kvplan.models.safetensors import Tensor
from kvplan.models.sharding import _indices, shard


def test_layer_and_expert_indices_of_a_name() -> None:
    # the first layers.N. and .experts.N. (N of at most 9 digits, never the last part)
    assert _indices("model.layers.12.mlp.experts.7.up_proj.weight") == ("model.layers.#.mlp.experts.#.up_proj.weight",
                                                                       12, 7)  # fmt: skip
    assert _indices("model.layers.0.mlp.experts.0.w2.weight")[1:] == (0, 0)
    # 9 digits are an index, 10 are not (the name part is still numbered '#')
    assert _indices("model.layers.123456789.mlp.gate.weight")[1] == 123_456_789
    assert _indices("model.layers.1234567890.mlp.gate.weight") == ("model.layers.#.mlp.gate.weight", -1, -1)
    # a numeric last part is no layer: "model.layers.3"
    assert _indices("model.layers.3") == ("model.layers.#", -1, -1)
    # "experts" as the first part is no expert list (i >= 2: an expert index follows a module path)
    assert _indices("experts.4.w1.weight") == ("experts.#.w1.weight", -1, -1)
    assert _indices("mlp.experts.4.w1.weight")[2] == 4


def test_gqa_kv_heads_replicate_past_the_attention_ranks() -> None:
    # QKVParallelLinear: max(kv_heads / tp, 1) heads a rank. 8 kv heads × 128 = 1,024 rows × 4,096, bf16:
    # tp 2 → 4 heads, 512 × 4,096 × 2 B = 4,194,304 B; tp 16 → 1 head (replicated), 128 × 4,096 × 2 = 1,048,576 B
    k = [Tensor("model.layers.0.self_attn.k_proj.weight", "BF16", (1_024, 4_096))]
    assert shard(k, Split.of(tp=2), num_layers=1, num_kv_heads=8).bytes == 4_194_304
    assert shard(k, Split.of(tp=16), num_layers=1, num_kv_heads=8).bytes == 1_048_576


def test_vocab_rows_pad_to_64_then_split() -> None:
    # 32,001 rows pad to 32,064 (64 × 501); tp 8 → 4,008 rows × 4,096 × 2 B = 32,833,536 B
    lm = [Tensor("lm_head.weight", "BF16", (32_001, 4_096))]
    assert shard(lm, Split.of(tp=8), num_layers=1).bytes == 4_008 * 4_096 * 2 == 32_833_536


def test_row_parallel_splits_the_input_dim_and_experts_go_whole_under_ep() -> None:
    # o_proj 4,096 × 4,096 bf16, RowParallelLinear at tp 4: 4,096 × 1,024 × 2 B = 8,388,608 B
    o = [Tensor("model.layers.0.self_attn.o_proj.weight", "BF16", (4_096, 4_096))]
    assert shard(o, Split.of(tp=4), num_layers=1).bytes == 8_388_608
    # 8 experts' down_proj (4,096 × 1,408 bf16 = 11,534,336 B each) at tp 4 with ep 4: rank 0 holds experts 0-1
    # whole (moe_tp = 4 / 4 = 1) → 23,068,672 B; ep 1: all 8 sliced 4 ways on the input dim → 8 × 2,883,584
    downs = [Tensor(f"model.layers.0.mlp.experts.{e}.down_proj.weight", "BF16", (4_096, 1_408)) for e in range(8)]
    assert shard(downs, Split.of(tp=4, ep=4), num_layers=1, ep=4).bytes == 2 * 11_534_336
    assert shard(downs, Split.of(tp=4), num_layers=1).bytes == 8 * 2_883_584
