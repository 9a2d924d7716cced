"""The widths the engines' loaders split (kvplan/models/shards.py ``shard_dims``), read from real config.json files
and pinned where the mutation check moves them.

Which layers are MoE is the models' own rule: DeepSeek-V3 / GLM ``first_k_dense_replace`` dense layers first
(vLLM ``deepseek_v2.py`` ``DeepseekV2DecoderLayer``: MoE where ``layer_idx >= first_k_dense_replace``), Qwen-MoE
``decoder_sparse_step`` and ``mlp_only_layers`` (vLLM ``qwen3_moe.py``: MoE where ``layer_idx not in mlp_only_layers
and (layer_idx + 1) % decoder_sparse_step == 0``), Mixtral every layer (``num_local_experts`` of
``intermediate_size``). Full attention splits ``num_key_value_heads`` (else every head: MHA) of ``head_dim`` (else
hidden / heads); MLA replicates its latent and splits heads of (qk_nope, qk_rope, v), qk_nope and v 128 when the
config leaves them out. fp8 blocks: ``quantization_config.weight_block_size`` [n, k], one value a square.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.shards import ShardDims, shard_dims

HF = Path(__file__).parents[1] / "data" / "hf"


def _config(name: str, **changes: Any) -> dict[str, Any]:
    return {**json.loads((HF / name / "config.json").read_text()), **changes}


def _dims(config: dict[str, Any]) -> ShardDims:
    d = shard_dims(config)
    assert d is not None
    return d


def test_llama_dense_gqa() -> None:
    d = _dims(_config("llama-3.1-8b"))
    # 8 kv heads of 4,096 / 32 = 128 (no head_dim in its config.json); one dense MLP of 14,336 a layer
    assert (d.num_attention_heads, d.num_kv_heads, d.head_dim, d.mla_head_dims) == (32, 8, 128, (0, 0, 0))
    assert (d.dense_intermediate, d.expert_intermediate, d.num_experts, d.first_layer_dense) == (14_336, 0, 0, True)
    assert (d.moe_block_precheck, d.attention_block, d.dense_block, d.expert_block) == (None, None, None, None)


def test_deepseek_v3_mla_with_three_dense_layers_in_fp8_blocks() -> None:
    d = _dims(_config("deepseek-v3"))
    assert (d.num_attention_heads, d.num_kv_heads, d.head_dim, d.mla_head_dims) == (128, 0, 0, (128, 64, 128))
    assert (d.dense_intermediate, d.expert_intermediate, d.num_experts, d.first_layer_dense) == (
        18_432,
        2_048,
        256,
        True,
    )
    assert d.moe_block_precheck == (2_048, 128)
    assert d.attention_block == d.dense_block == d.expert_block == (128, 128)


def test_qwen3_every_layer_moe_in_fp8_blocks() -> None:
    # Qwen3-235B-A22B-FP8: decoder_sparse_step 1, mlp_only_layers []: every layer MoE, no dense MLP; its ignore list
    # keeps layernorms, the router (mlp.gate) and lm_head out of fp8, so attention and experts are in blocks
    d = _dims(_config("qwen3-235b-a22b-fp8"))
    assert (d.num_kv_heads, d.head_dim, d.dense_intermediate, d.expert_intermediate, d.num_experts) == (
        4,
        128,
        0,
        1_536,
        128,
    )
    assert not d.first_layer_dense
    assert (d.moe_block_precheck, d.attention_block, d.dense_block, d.expert_block) == (
        (1_536, 128),
        (128, 128),
        None,
        (128, 128),
    )


def test_mixtral_experts_are_intermediate_size_wide() -> None:
    d = _dims(_config("mixtral-8x7b"))
    assert (d.num_kv_heads, d.head_dim, d.dense_intermediate, d.expert_intermediate, d.num_experts) == (
        8,
        128,
        0,
        14_336,
        8,
    )
    assert not d.first_layer_dense


def test_one_dense_layer_first() -> None:
    # GLM-4.5-Air: first_k_dense_replace 1 -> layer 0 dense (10,944), layer 1 on MoE
    d = _dims(_config("glm-4.5-air"))
    assert (d.first_layer_dense, d.dense_intermediate, d.expert_intermediate, d.num_experts) == (
        True,
        10_944,
        1_408,
        128,
    )
    # no dense layer at all: every layer from 0 is MoE
    d = _dims(_config("deepseek-v3", first_k_dense_replace=0))
    assert (d.first_layer_dense, d.dense_intermediate) == (False, 0)


@pytest.mark.parametrize(
    ("changes", "first_dense", "dense"),
    [
        ({"decoder_sparse_step": 2}, True, 6_144),  # layers 1, 3, ... MoE; 0, 2, ... dense
        ({"decoder_sparse_step": 1, "mlp_only_layers": [0]}, True, 6_144),
        ({"decoder_sparse_step": 1, "mlp_only_layers": [5]}, False, 6_144),
        ({"decoder_sparse_step": 0}, False, 0),  # 0 is no step: every layer (the `or 1`)
    ],
)
def test_qwen_moe_step_and_mlp_only_layers(changes: dict[str, Any], first_dense: bool, dense: int) -> None:
    d = _dims(_config("qwen3-30b-a3b", **changes))
    assert (d.first_layer_dense, d.dense_intermediate, d.expert_intermediate, d.num_experts) == (
        first_dense,
        dense,
        768,
        128,
    )


@pytest.mark.parametrize(("field", "count"), [("num_experts", 60), ("n_routed_experts", 64), ("num_local_experts", 8)])
def test_each_expert_count_field(field: str, count: int) -> None:
    cfg = {"num_attention_heads": 16, "hidden_size": 2_048, "num_hidden_layers": 2, "intermediate_size": 5_632,
           "moe_intermediate_size": 1_408, field: count}  # fmt: skip
    d = _dims(cfg)
    width = 5_632 if field == "num_local_experts" else 1_408  # Mixtral's experts are intermediate_size wide
    assert (d.num_experts, d.expert_intermediate) == (count, width)


def test_experts_without_a_width_are_dense() -> None:
    d = _dims({"num_attention_heads": 16, "hidden_size": 2_048, "num_hidden_layers": 2, "intermediate_size": 5_632,
               "num_experts": 8})  # fmt: skip
    assert (d.num_experts, d.expert_intermediate, d.dense_intermediate, d.first_layer_dense) == (0, 0, 5_632, True)


def test_mha_and_mla_defaults() -> None:
    # no num_key_value_heads: MHA, every head its own kv head; no head_dim: hidden / heads = 2,048 / 16 = 128
    d = _dims({"num_attention_heads": 16, "hidden_size": 2_048, "num_hidden_layers": 2})
    assert (d.num_kv_heads, d.head_dim) == (16, 128)
    # MLA from kv_lora_rank >= 1; qk_nope and v default to 128 (the loader's defaults), rope as given
    cfg = {
        "num_attention_heads": 16,
        "hidden_size": 2_048,
        "num_hidden_layers": 2,
        "kv_lora_rank": 1,
        "qk_rope_head_dim": 64,
    }
    assert _dims(cfg).mla_head_dims == (128, 64, 128) and _dims(cfg).num_kv_heads == 0
    assert _dims({**cfg, "qk_nope_head_dim": 192, "v_head_dim": 256}).mla_head_dims == (192, 64, 256)


@pytest.mark.parametrize(
    ("block", "read"),
    [([128, 128], (128, 128)), ([64], (64, 64)), ([1, 1], (1, 1)), ([], None), ([128, 128, 128], None),
     ([0, 128], None), ([True, 128], None), ("128", None)],
)  # fmt: skip
def test_the_fp8_block(block: object, read: tuple[int, int] | None) -> None:
    cfg = _config("deepseek-v3")
    cfg["quantization_config"] = {**cfg["quantization_config"], "weight_block_size": block}
    assert _dims(cfg).attention_block == read


def test_a_block_only_for_fp8() -> None:
    cfg = _config("deepseek-v3")
    cfg["quantization_config"] = {**cfg["quantization_config"], "quant_method": "awq"}
    d = _dims(cfg)
    assert (d.attention_block, d.dense_block, d.expert_block) == (None, None, None)
    # SGLang 0.5.4-0.5.5's pre-check reads moe_intermediate_size and weight_block_size[0] whatever the method
    assert d.moe_block_precheck == (2_048, 128)
    assert _dims({**cfg, "quantization_config": {"weight_block_size": [0, 128]}}).moe_block_precheck is None
    assert _dims({**cfg, "quantization_config": {"weight_block_size": [256]}}).moe_block_precheck == (2_048, 256)


def test_no_heads_no_dims() -> None:
    assert shard_dims({"hidden_size": 2_048}) is None
    assert shard_dims({"num_attention_heads": True}) is None  # a bool is not a count


def test_a_step_past_the_layers_leaves_no_moe_layer() -> None:
    # decoder_sparse_step 3 over 2 layers: (0 + 1) % 3 and (1 + 1) % 3 are not 0, so both layers are dense (their
    # down_proj in fp8 blocks: the ignore list names only norms, routers and lm_head) and no expert is built;
    # over 3 layers layer 2 is MoE ((2 + 1) % 3 == 0)
    cfg = {**_config("qwen3-235b-a22b-fp8"), "decoder_sparse_step": 3, "num_hidden_layers": 2}
    assert (_dims(cfg).expert_block, _dims(cfg).dense_block) == (None, (128, 128))
    assert _dims({**cfg, "num_hidden_layers": 3}).expert_block == (128, 128)


def test_a_rectangular_block_is_n_by_k() -> None:
    # weight_block_size [128, 64]: one scale a 128 × 64 tile (n output rows, k input columns)
    cfg = _config("deepseek-v3")
    cfg["quantization_config"] = {**cfg["quantization_config"], "weight_block_size": [128, 64]}
    d = _dims(cfg)
    assert d.attention_block == d.dense_block == d.expert_block == (128, 64)


def test_the_precheck_reads_the_blocks_n() -> None:
    # SGLang 0.5.4-0.5.5's ModelRunner pre-check divides moe_intermediate_size by weight_block_size[0] (block_n),
    # so a 128 × 64 block is checked against 128, not 64
    cfg = _config("deepseek-v3")
    cfg["quantization_config"] = {**cfg["quantization_config"], "weight_block_size": [128, 64]}
    assert _dims(cfg).moe_block_precheck == (2_048, 128)
    cfg["quantization_config"] = {**cfg["quantization_config"], "weight_block_size": [64, 128]}
    assert _dims(cfg).moe_block_precheck == (2_048, 64)
    assert _dims(cfg).attention_block == (64, 128)
    # a block of 1 is a block (0 < n): every width divides by it, the pre-check reads it all the same
    cfg["quantization_config"] = {**cfg["quantization_config"], "weight_block_size": [1, 128]}
    assert _dims(cfg).moe_block_precheck == (2_048, 1)
