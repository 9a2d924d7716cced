"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/sharding.py.

Each tensor's bytes on rank 0 are derived in a comment from the engines' parallel layers (vLLM / SGLang
``layers/linear.py`` ``ColumnParallelLinear`` / ``RowParallelLinear`` / ``QKVParallelLinear``,
``layers/vocab_parallel_embedding.py`` with ``DEFAULT_VOCAB_PADDING_SIZE`` 64, ``FusedMoE``), never from kvplan's
own output.
"""

from __future__ import annotations

from kvplan.models.arch import Split
from kvplan.models.safetensors import Tensor
from kvplan.models.sharding import _indices, param_groups_from_tensors, shard


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


def test_a_column_parallel_bias_splits_with_its_weight() -> None:
    # Qwen2-7B's q_proj.bias (28 heads × 128 = 3,584, bf16): ColumnParallelLinear creates the bias with
    # output_size_per_partition rows (vLLM / SGLang layers/linear.py), so at tp 4: 896 × 2 B = 1,792 B
    bias = [Tensor("model.layers.0.self_attn.q_proj.bias", "BF16", (3_584,))]
    assert shard(bias, Split.of(tp=4), num_layers=1).bytes == 1_792


def test_gptq_qweight_splits_its_last_dim_for_a_column_layer_and_its_first_for_a_row_layer() -> None:
    # GPTQ stores qweight [in / 8, out] int32 (8 4-bit values a word; vLLM gptq.py GPTQLinearMethod.create_weights
    # input_dim=0, output_dim=1): q_proj of 4,096 -> 4,096 is 512 × 4,096 × 4 B; at tp 2 the output dim halves:
    # 512 × 2,048 × 4 = 4,194,304 B
    q = [Tensor("model.layers.0.self_attn.q_proj.qweight", "I32", (512, 4_096))]
    assert shard(q, Split.of(tp=2), num_layers=1).bytes == 4_194_304
    # a row-parallel down_proj [12,288 / 8 = 1,536, 4,096] at tp 3 splits the input rows, which RowParallelLinear
    # requires to divide (12,288 / 3 = 4,096, a multiple of group 128): 512 × 4,096 × 4 B = 8,388,608 B (the
    # output dim, 4,096, does not divide by 3 and is not split)
    down = [Tensor("model.layers.0.mlp.down_proj.qweight", "I32", (1_536, 4_096))]
    assert shard(down, Split.of(tp=3), num_layers=1).bytes == 8_388_608


def test_tensors_without_a_rule_are_named_three_and_counted() -> None:
    # four tensors no rule places: the note counts 4 and names the first 3, "and 1 more"; three are all named
    odd = [Tensor(f"model.layers.0.mystery{i}.weight", "BF16", (8,)) for i in range(4)]
    (note,) = shard(odd, Split.of(tp=2), num_layers=1).assumptions
    assert note == (
        "assumed replicated: 4 tensors kvplan has no sharding rule for (model.layers.0.mystery0.weight, "
        "model.layers.0.mystery1.weight, model.layers.0.mystery2.weight and 1 more)"
    )
    (note,) = shard(odd[:3], Split.of(tp=2), num_layers=1).assumptions
    assert note.endswith("(model.layers.0.mystery0.weight, model.layers.0.mystery1.weight, "
                         "model.layers.0.mystery2.weight)")  # fmt: skip
    # replicated: 4 × 8 × 2 B = 64 B on rank 0 whatever tp
    assert shard(odd, Split.of(tp=2), num_layers=1).unrecognised_bytes == 64


def test_the_first_layer_and_expert_index_of_a_name_wins() -> None:
    # the docstring's rule: the first ``layers.N.`` and the first ``.experts.N.``, even when N is 0 and a nested
    # module list repeats the word later in the name
    assert _indices("model.layers.0.block.layers.7.experts.0.mix.experts.5.w1.weight")[1:] == (0, 0)


def test_gptq_qweight_column_split_is_its_last_dim_where_the_first_would_round_otherwise() -> None:
    # q_proj of 48 heads × 128 = 6,144 outputs, GPTQ qweight [4,096 / 8 = 512, 6,144] int32 (gptq.py
    # create_weights: output_dim=1): tp 3 leaves 16 heads a rank, 512 × 2,048 × 4 B = 4,194,304 B. The packed input
    # rows are not split (ceil(512 / 3) = 171 rows would be 4,202,496 B)
    q = [Tensor("model.layers.0.self_attn.q_proj.qweight", "I32", (512, 6_144))]
    assert shard(q, Split.of(tp=3), num_layers=1).bytes == 4_194_304


def test_float_tensors_take_the_model_dtype_and_scales_keep_theirs() -> None:
    # engines/model_dtype.py: both engines build every parameter in the model dtype (set_default_torch_dtype) and
    # copy the checkpoint in. A float32 checkpoint's o_proj (4,096 × 4,096) under --dtype auto (2 B):
    # 33,554,432 B whole, 4,096 × 1,024 × 2 = 8,388,608 B at tp 4 (RowParallelLinear); its fp32 weight_scale_inv
    # (32 × 32 blocks, Fp8LinearMethod creates it float32 whatever the model dtype) keeps 4 B: 4,096 B more, and
    # splits with its weight (BlockQuantScaleParameter, input_dim 1): 32 × 8 × 4 B = 1,024 B at tp 4
    fp32 = [
        Tensor("model.layers.0.self_attn.o_proj.weight", "F32", (4_096, 4_096)),
        Tensor("model.layers.0.self_attn.o_proj.weight_scale_inv", "F32", (32, 32)),
    ]
    (attn,) = param_groups_from_tensors(fp32, num_layers=1)
    assert attn.bytes_per_gpu(Split.of(tp=1)) == 4 * 4_096 * 4_096 + 4_096
    cast = attn.in_dtype(4, 2)
    assert cast.bytes_per_gpu(Split.of(tp=1)) == 33_554_432 + 4_096
    assert cast.bytes_per_gpu(Split.of(tp=4)) == 8_388_608 + 1_024
    # a bf16 checkpoint under --dtype float32: 4,096 × 4,096 × 4 B = 67,108,864 B
    bf16 = [Tensor("model.layers.0.self_attn.o_proj.weight", "BF16", (4_096, 4_096))]
    (attn,) = param_groups_from_tensors(bf16, num_layers=1)
    assert attn.in_dtype(2, 4).bytes_per_gpu(Split.of(tp=1)) == 67_108_864


def test_a_group_owns_the_decoder_layers_its_names_hold() -> None:
    # pipeline stages split the decoder layers (vLLM get_pp_indices / SGLang get_layer_id): a group's tensors of
    # layers 1 and 2 own layers [1, 3); a layer index at or past the model's layers (an MTP layer, 5 of 4) is no
    # decoder layer; a group whose names hold no ``layers.N.`` (the final norm) spans every layer, [0, 4)
    tensors = [
        Tensor("model.layers.1.self_attn.o_proj.weight", "BF16", (64, 64)),
        Tensor("model.layers.2.self_attn.o_proj.weight", "BF16", (64, 64)),
        Tensor("model.layers.5.self_attn.o_proj.weight", "BF16", (64, 64)),
        Tensor("model.norm.weight", "BF16", (64,)),
    ]
    groups = {g.name: g for g in param_groups_from_tensors(tensors, num_layers=8)}
    assert groups["attention"].layers_owned(4) == (1, 3)
    assert groups["norms"].layers_owned(4) == (0, 4)


def test_an_unknown_suffix_on_a_known_module_is_said_not_guessed() -> None:
    # fresh seed 57252. compressed-tensors NVFP4 stores a per-tensor "weight_global_scale", a suffix kvplan's
    # parameter list does not name: the whole name is the module, no rule matches it, and the fp32 scalar is
    # counted whole (4 B) and named in the note, not silently read as the down_proj weight's
    t = [Tensor("model.layers.0.mlp.down_proj.weight_global_scale", "F32", (1,))]
    s = shard(t, Split.of(tp=2), num_layers=1)
    assert s.unrecognised_bytes == 4
    assert s.assumptions == (
        "assumed replicated: 1 tensors kvplan has no sharding rule for "
        "(model.layers.0.mlp.down_proj.weight_global_scale)",
    )


def test_a_row_parallel_weight_splits_its_input_dim() -> None:
    # fresh seed 57252. RowParallelLinear (vLLM / SGLang layers/linear.py) shards the weight's input dim, dim 1 of
    # [out, in] (input_dim=1 in weight_loader): an o_proj of [6, 8] bf16 at tp 4 keeps 6 × 8 / 4 = 12 elements,
    # 24 B, on rank 0; its output dim, 6, is not split (split on it, a rank would hold cdiv(6, 4) × 8 = 16)
    t = [Tensor("model.layers.0.self_attn.o_proj.weight", "BF16", (6, 8))]
    assert shard(t, Split.of(tp=4), num_layers=1).bytes == 24


def test_kv_heads_equal_to_the_ranks_give_one_head_each() -> None:
    # fresh seed 57252's neighbour. QKVParallelLinear: num_kv_heads // tp heads a rank when tp <= num_kv_heads.
    # Llama-3.1-8B's k_proj [8 heads × 128, 4,096] bf16 at tp 8: one head, 128 × 4,096 × 2 B = 1,048,576 B
    t = [Tensor("model.layers.0.self_attn.k_proj.weight", "BF16", (1_024, 4_096))]
    assert shard(t, Split.of(tp=8), num_layers=1, num_kv_heads=8).bytes == 1_048_576
