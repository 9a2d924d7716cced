"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/config_tensors.py.

Each tensor's name and shape is derived in a comment from the module vLLM builds and the checkpoint name it loads
(vllm/model_executor/models/: mixtral.py, qwen3_moe.py, glm4_moe.py and glm4_moe_mtp.py, deepseek_v2.py and
deepseek_mtp.py), or from a published ``model.safetensors.index.json`` total, never from kvplan's own output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.config_tensors import config_tensors

HF = Path(__file__).parents[1] / "data" / "hf"


def _config(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return config


def _layout(config: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    tensors = config_tensors(config)
    assert tensors is not None
    return {t.name: (t.dtype, t.shape) for t in tensors}


def test_mixtral_8x7b_is_the_published_total_and_w1_w3_w2() -> None:
    # mistralai/Mixtral-8x7B-v0.1 model.safetensors.index.json "total_size": 93405585408. From the config:
    # embed + lm_head 2 × 32,000 × 4,096 = 262,144,000; a layer: q, o 2 × 4,096² + k, v 2 × 1,024 × 4,096 =
    # 41,943,040, experts 8 × 3 × 4,096 × 14,336 = 1,409,286,144, gate 8 × 4,096 = 32,768, 2 norms 8,192 →
    # 1,451,270,144 × 32 = 46,440,644,608; + final norm 4,096 → 46,702,792,704 params × 2 B = 93,405,585,408 B
    tensors = config_tensors(_config("mixtral-8x7b"))
    assert tensors is not None
    assert sum(t.nbytes for t in tensors) == 93_405_585_408
    t = _layout(_config("mixtral-8x7b"))
    # mixtral.py MixtralForCausalLM expert_params_mapping: w1 (gate) and w3 (up) are 14,336 × 4,096, w2 (down)
    # 4,096 × 14,336
    e = "model.layers.0.block_sparse_moe.experts.7."
    assert t[e + "w1.weight"] == t[e + "w3.weight"] == ("BF16", (14_336, 4_096))
    assert t[e + "w2.weight"] == ("BF16", (4_096, 14_336))


def test_qwen3_moe_decoder_sparse_step_2_alternates_dense_and_moe() -> None:
    # qwen3_moe.py Qwen3MoeDecoderLayer: MoE iff layer_idx not in mlp_only_layers and
    # (layer_idx + 1) % decoder_sparse_step == 0 — with step 2, layer 1 is MoE and layers 0 and 2 dense
    t = _layout({**_config("qwen3-30b-a3b"), "decoder_sparse_step": 2})
    assert t["model.layers.1.mlp.experts.127.gate_proj.weight"] == ("BF16", (768, 2_048))
    assert t["model.layers.1.mlp.experts.127.up_proj.weight"] == ("BF16", (768, 2_048))
    assert t["model.layers.1.mlp.experts.127.down_proj.weight"] == ("BF16", (2_048, 768))
    assert t["model.layers.0.mlp.gate_proj.weight"] == ("BF16", (6_144, 2_048))
    assert t["model.layers.2.mlp.down_proj.weight"] == ("BF16", (2_048, 6_144))
    assert "model.layers.0.mlp.experts.0.gate_proj.weight" not in t


def test_glm_45_air_shared_expert_and_mtp_layer() -> None:
    t = _layout(_config("glm-4.5-air"))
    # glm4_moe.py Glm4MoE: shared_experts = Glm4MoeMLP(intermediate_size=moe_intermediate_size × n_shared_experts)
    # = 1,408 × 1
    s = "model.layers.1.mlp.shared_experts."
    assert t[s + "gate_proj.weight"] == t[s + "up_proj.weight"] == ("BF16", (1_408, 4_096))
    assert t[s + "down_proj.weight"] == ("BF16", (4_096, 1_408))
    # 46 decoder layers (0-45) and one MTP layer, checkpoint layer 46 (glm4_moe_mtp.py Glm4MoeMultiTokenPredictor
    # Layer: enorm, hnorm, eh_proj Linear(2 × hidden, hidden), shared_head.norm)
    m = "model.layers.46."
    assert t[m + "eh_proj.weight"] == ("BF16", (4_096, 8_192))
    assert t[m + "enorm.weight"] == t[m + "hnorm.weight"] == t[m + "shared_head.norm.weight"] == ("BF16", (4_096,))
    assert "model.layers.45.eh_proj.weight" not in t and "model.layers.45.enorm.weight" not in t
    # GLM ships no embed or head of the MTP layer's own
    assert m + "embed_tokens.weight" not in t


def test_deepseek_v3_mla_layer_and_mtp_names() -> None:
    t = _layout(_config("deepseek-v3"))
    a = "model.layers.0.self_attn."
    # deepseek_v2.py DeepseekV2MLAAttention (q_lora_rank 1536): q_b_proj 128 heads × (128 + 64) = 24,576 outputs;
    # kv_a_layernorm of kv_lora_rank 512; o_proj 7,168 × 128 × 128 = 16,384 inputs (fp8, 128 × 128 blocks)
    assert t[a + "q_b_proj.weight"] == ("F8_E4M3", (24_576, 1_536))
    assert t[a + "q_b_proj.weight_scale_inv"] == ("F32", (192, 12))
    assert t[a + "kv_a_layernorm.weight"] == ("BF16", (512,))
    assert t[a + "o_proj.weight"] == ("F8_E4M3", (7_168, 16_384))
    assert t["model.layers.0.post_attention_layernorm.weight"] == ("BF16", (7_168,))
    # the 3 dense layers' MLP (intermediate 18,432), then the MoE layers' router (256 × 7,168, bf16)
    assert t["model.layers.2.mlp.up_proj.weight"] == ("F8_E4M3", (18_432, 7_168))
    assert t["model.layers.2.mlp.down_proj.weight"] == ("F8_E4M3", (7_168, 18_432))
    assert t["model.layers.3.mlp.gate.weight"] == ("BF16", (256, 7_168))
    # n_shared_experts 1 × moe_intermediate 2,048
    assert t["model.layers.3.mlp.shared_experts.gate_proj.weight"] == ("F8_E4M3", (2_048, 7_168))
    # the MTP layer (checkpoint layer 61, deepseek_mtp.py DeepSeekMultiTokenPredictorLayer): hnorm, eh_proj
    # Linear(2 × 7,168, 7,168) in bf16, and its own embed_tokens and shared_head.head
    m = "model.layers.61."
    assert t[m + "hnorm.weight"] == ("BF16", (7_168,))
    assert t[m + "eh_proj.weight"] == ("BF16", (7_168, 14_336))
    assert t[m + "shared_head.head.weight"] == ("BF16", (129_280, 7_168))


def test_mla_without_v_head_dim_takes_128() -> None:
    # transformers DeepseekV2Config / DeepseekV3Config default v_head_dim=128: kv_b_proj 128 heads × (128 + 128)
    # = 32,768 outputs of kv_lora_rank 512; o_proj 128 × 128 = 16,384 inputs
    config = {k: v for k, v in _config("deepseek-v3").items() if k != "v_head_dim"}
    t = _layout(config)
    assert t["model.layers.0.self_attn.kv_b_proj.weight"] == ("F8_E4M3", (32_768, 512))
    assert t["model.layers.0.self_attn.o_proj.weight"] == ("F8_E4M3", (7_168, 16_384))


def test_mla_without_q_lora_has_a_plain_q_proj() -> None:
    # DeepSeek-V2-Lite (q_lora_rank null): q_proj = Linear(hidden, heads × (nope + rope)) = 128 × 192 = 24,576
    config = {**_config("deepseek-v3"), "q_lora_rank": None}
    assert _layout(config)["model.layers.0.self_attn.q_proj.weight"] == ("F8_E4M3", (24_576, 7_168))


def test_a_config_past_the_module_bound_is_not_laid_out() -> None:
    # limits.MAX_CONFIG_MODULES = 100,000 linear modules: 61 layers + 1 MTP = 62, × (536 routed + 1 shared + 1
    # dense) = 538, × 3 projections = 100,068 > 100,000 — the parameter groups stand (None)
    config = {**_config("deepseek-v3"), "n_routed_experts": 536}
    assert config_tensors(config) is None


def test_a_field_out_of_range_says_the_range_and_the_value() -> None:
    # limits.MAX_DIM = 1 << 24 = 16,777,216
    with pytest.raises(ConfigError) as e:
        config_tensors({**_config("mixtral-8x7b"), "hidden_size": 16_777_217})
    assert e.value.key == "hidden_size"
    assert "expected an integer 0 .. 16,777,216, got 16777217" in str(e.value)


def test_shared_experts_are_moe_intermediate_times_n_shared() -> None:
    # DeepseekV2MoE / Glm4MoE: shared_experts MLP of intermediate_size = moe_intermediate_size × n_shared_experts
    # (DeepSeek-V2 ships n_shared_experts 2): 2 × 2,048 = 4,096 rows on DeepSeek-V3's dims
    t = _layout({**_config("deepseek-v3"), "n_shared_experts": 2})
    assert t["model.layers.3.mlp.shared_experts.up_proj.weight"] == ("F8_E4M3", (4_096, 7_168))
    assert t["model.layers.3.mlp.shared_experts.down_proj.weight"] == ("F8_E4M3", (7_168, 4_096))
    # GLM-4.5-Air's dims with 2 shared experts: 2 × 1,408 = 2,816
    t = _layout({**_config("glm-4.5-air"), "n_shared_experts": 2})
    s = "model.layers.1.mlp.shared_experts."
    assert t[s + "gate_proj.weight"] == t[s + "up_proj.weight"] == ("BF16", (2_816, 4_096))
    assert t[s + "down_proj.weight"] == ("BF16", (4_096, 2_816))


def test_nvfp4_and_fp8_per_tensor_layouts() -> None:
    # modelopt NVFP4 (nvidia/DeepSeek-V3.2-NVFP4): weight U8 (two e2m1 a byte) n_out × n_in / 2, weight_scale
    # F8_E4M3 one per 16 inputs, weight_scale_2 and input_scale fp32 scalars. An expert's gate_proj 2,048 × 7,168:
    # weight (2,048, 3,584), weight_scale (2,048, 448)
    q = json.loads((HF / "deepseek-v3.2-nvfp4" / "hf_quant_config.json").read_text())
    t = _layout({**_config("deepseek-v3.2-nvfp4"), "quantization_config": q})
    e = "model.layers.3.mlp.experts.0.gate_proj."
    assert t[e + "weight"] == ("U8", (2_048, 3_584))
    assert t[e + "weight_scale"] == ("F8_E4M3", (2_048, 448))
    assert t[e + "weight_scale_2"] == t[e + "input_scale"] == ("F32", ())
    # fp8 per tensor (quant_method fp8, no weight_block_size; vLLM fp8.py: a PerTensorScaleParameter fp32):
    # Mixtral's w1 14,336 × 4,096 e4m3 and one fp32 weight_scale
    t = _layout({**_config("mixtral-8x7b"), "quantization_config": {"quant_method": "fp8"}})
    w1 = "model.layers.0.block_sparse_moe.experts.0.w1."
    assert t[w1 + "weight"] == ("F8_E4M3", (14_336, 4_096))
    assert t[w1 + "weight_scale"] == ("F32", ())


def test_decoder_sparse_step_0_is_read_as_every_layer_and_does_not_raise() -> None:
    # a 0 would be a modulo by zero in (i + 1) % step (vLLM qwen3_moe.py raises at load); kvplan reads it as
    # Qwen3MoeConfig's default 1 instead of failing with a traceback: the same layout as step 1
    step1 = _layout({**_config("qwen3-30b-a3b"), "decoder_sparse_step": 1})
    assert _layout({**_config("qwen3-30b-a3b"), "decoder_sparse_step": 0}) == step1


def test_configs_kvplan_does_not_lay_out() -> None:
    # no hidden_size, no layers or no vocabulary: nothing to derive; an architecture outside LAID_OUT: the
    # parameter groups stand
    mixtral = _config("mixtral-8x7b")
    for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
        assert config_tensors({k: v for k, v in mixtral.items() if k != key}) is None, key
    assert config_tensors({**mixtral, "architectures": ["GptOssForCausalLM"]}) is None


# --- fresh seed 3728 (issue 26): survivors of the second sample


def test_a_float32_checkpoint_is_laid_out_in_f32() -> None:
    # torch_dtype float32: every linear is a 32-bit weight stored F32 (safetensors' dtype name), and the total is
    # Llama-3.1-8B's 8,030,261,248 parameters (the weights.py doctest's count: 32 layers of q, o 4,096² and k, v
    # 1,024 × 4,096, MLP 3 × 4,096 × 14,336, 2 norms; embed + lm_head 2 × 128,256 × 4,096; the final norm) × 4 B
    config = {**_config("llama-3.1-8b"), "torch_dtype": "float32"}
    t = _layout(config)
    assert t["model.layers.0.self_attn.q_proj.weight"] == ("F32", (4_096, 4_096))
    assert t["model.layers.31.mlp.down_proj.weight"] == ("F32", (4_096, 14_336))
    tensors = config_tensors(config)
    assert tensors is not None and sum(t.nbytes for t in tensors) == 8_030_261_248 * 4


def test_compressed_tensors_per_channel_scales_are_a_column_a_row() -> None:
    # RedHatAI Llama-3.3-70B-Instruct-FP8-dynamic's weights: float 8 bits, strategy channel. vLLM
    # compressed_tensors_w8a8_fp8.py create_weights: weight_scale ChannelQuantScaleParameter
    # (sum(output_partition_sizes), 1) in float32: q_proj 8,192 × 8,192 e4m3 and an (8,192, 1) F32 scale
    t = _layout(_config("llama-3.3-70b-fp8-dynamic"))
    q = "model.layers.0.self_attn.q_proj."
    assert t[q + "weight"] == ("F8_E4M3", (8_192, 8_192))
    assert t[q + "weight_scale"] == ("F32", (8_192, 1))
    # an int8 channel scale with no scale_dtype is the model dtype's (compressed_tensors_w8a8_int8.py's
    # ChannelQuantScaleParameter is created in params_dtype): (8,192, 1) BF16
    ct = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}
        },
    }
    t = _layout({**_config("llama-3.3-70b-fp8-dynamic"), "quantization_config": ct})
    assert t[q + "weight_scale"] == ("BF16", (8_192, 1))


def test_a_4_bit_per_channel_scheme_is_not_laid_out() -> None:
    # GPTQ int4 with group_size -1 packs eight values an int32 with a scale, zero and g_idx kvplan does not lay
    # out per tensor: None (the parameter groups stand), not an fp8 layout
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True}
    assert config_tensors({**_config("llama-3.1-8b"), "quantization_config": gptq}) is None


def test_a_bad_field_shows_its_value_to_40_characters() -> None:
    with pytest.raises(ConfigError) as e:
        config_tensors({**_config("mixtral-8x7b"), "hidden_size": "9" * 100})
    assert str(e.value).endswith("expected an integer 0 .. 16,777,216, got " + "9" * 40)


def test_mla_without_qk_nope_head_dim_takes_128() -> None:
    # transformers DeepseekV2Config / DeepseekV3Config default qk_nope_head_dim=128: q_b_proj 128 heads × (128 +
    # rope 64) = 24,576 outputs of q_lora_rank 1,536; kv_b_proj 128 × (128 + v 128) = 32,768 of kv_lora_rank 512
    config = {k: v for k, v in _config("deepseek-v3").items() if k != "qk_nope_head_dim"}
    t = _layout(config)
    assert t["model.layers.0.self_attn.q_b_proj.weight"] == ("F8_E4M3", (24_576, 1_536))
    assert t["model.layers.0.self_attn.kv_b_proj.weight"] == ("F8_E4M3", (32_768, 512))


def test_a_float16_checkpoint_is_laid_out_in_f16() -> None:
    # meta-llama/Llama-2-7b-hf's config: torch_dtype float16, and its safetensors hold F16 tensors (not BF16):
    # q_proj 4,096 × 4,096, the embeddings 32,000 × 4,096
    t = _layout(_config("llama-2-7b"))
    assert t["model.layers.0.self_attn.q_proj.weight"] == ("F16", (4_096, 4_096))
    assert t["model.embed_tokens.weight"] == ("F16", (32_000, 4_096))


# --- second fresh seed 37736


def test_mla_kv_a_proj_holds_the_latent_and_the_rope_key() -> None:
    # deepseek_v2.py DeepseekV2MLAAttention: kv_a_proj_with_mqa = ReplicatedLinear(hidden, kv_lora_rank +
    # qk_rope_head_dim): DeepSeek-V3's 512 + 64 = 576 rows × 7,168, fp8 with ceil(576 / 128) = 5 × 56 block scales
    t = _layout(_config("deepseek-v3"))
    a = "model.layers.0.self_attn.kv_a_proj_with_mqa."
    assert t[a + "weight"] == ("F8_E4M3", (576, 7_168))
    assert t[a + "weight_scale_inv"] == ("F32", (5, 56))


def test_deepseek_v3_names_every_mlp_projection_and_the_mtp_head_norm() -> None:
    # deepseek_v2.py DeepseekV2MLP (the 3 dense layers): gate_proj and up_proj (18,432 × 7,168), down_proj back;
    # DeepseekV2MoE's experts each a DeepseekV2MLP of moe_intermediate 2,048: down_proj 7,168 × 2,048;
    # deepseek_mtp.py SharedHead: its norm of hidden 7,168 (bf16), beside the head
    t = _layout(_config("deepseek-v3"))
    assert t["model.layers.0.mlp.gate_proj.weight"] == ("F8_E4M3", (18_432, 7_168))
    assert t["model.layers.3.mlp.experts.0.down_proj.weight"] == ("F8_E4M3", (7_168, 2_048))
    assert t["model.layers.3.mlp.experts.255.gate_proj.weight"] == ("F8_E4M3", (2_048, 7_168))
    assert t["model.layers.61.shared_head.norm.weight"] == ("BF16", (7_168,))
    # two shared experts: the gate projection is 2 × 2,048 = 4,096 rows too, as up_proj
    two = _layout({**_config("deepseek-v3"), "n_shared_experts": 2})
    assert two["model.layers.3.mlp.shared_experts.gate_proj.weight"] == ("F8_E4M3", (4_096, 7_168))


def test_a_config_just_under_the_module_bound_is_laid_out() -> None:
    # 62 layers × (535 routed + 1 shared + 1 dense) × 3 projections = 99,882 <= limits.MAX_CONFIG_MODULES 100,000
    # (one expert more is 100,068, above: not laid out)
    tensors = config_tensors({**_config("deepseek-v3"), "n_routed_experts": 535})
    assert tensors is not None
    assert any(t.name == "model.layers.61.mlp.experts.534.down_proj.weight" for t in tensors)


def test_deepseek_v32_indexer_and_expert_tensors_by_name_and_shape() -> None:
    # DeepSeek-V3.2-Exp inference/model.py Indexer: wq_b = Linear(q_lora_rank, n_heads × head_dim), wk = Linear(dim,
    # head_dim), k_norm = LayerNorm(head_dim) (a weight and a bias), weights_proj = Linear(dim, n_heads); its
    # config: index_n_heads 64, index_head_dim 128, q_lora_rank 1,536, hidden_size 7,168 (fp8 block weights)
    t = _layout(_config("deepseek-v3.2"))
    a = "model.layers.0.self_attn.indexer."
    assert t[a + "wq_b.weight"] == ("F8_E4M3", (64 * 128, 1536))
    assert t[a + "wk.weight"] == ("F8_E4M3", (128, 7168))
    assert t[a + "k_norm.weight"][1] == t[a + "k_norm.bias"][1] == (128,)
    assert t[a + "weights_proj.weight"][1] == (64, 7168)
    # first_k_dense_replace 3: layer 3 is the first MoE layer; MoE.experts[e] is an MLP(dim, moe_inter_dim):
    # w1 / w3 (gate_proj / up_proj) moe_intermediate_size 2,048 × 7,168
    assert t["model.layers.3.mlp.experts.0.up_proj.weight"] == ("F8_E4M3", (2048, 7168))
    assert t["model.layers.3.mlp.experts.0.gate_proj.weight"] == ("F8_E4M3", (2048, 7168))


@pytest.mark.parametrize("archs", [[], {"x": 1}, [7], [["DeepseekV32ForCausalLM"]]])
def test_an_architectures_value_that_names_no_family_lays_out_nothing(archs: object) -> None:
    # untrusted input: an empty list or a value that is not a name gives no per-tensor layout (the caller falls back
    # to parameter groups) instead of a TypeError from the family lookup
    assert config_tensors({**_config("deepseek-v3.2"), "architectures": archs}) is None


def test_architectures_as_a_bare_name_is_the_list_of_that_name() -> None:
    # transformers writes a list; a bare string names the same family (config.get("architectures") read as is)
    c = _config("deepseek-v3.2")
    assert config_tensors({**c, "architectures": "DeepseekV32ForCausalLM"}) == config_tensors(c)


def test_qwen3_moe_step_3_lays_out_experts_on_layers_2_and_5() -> None:
    # qwen3_moe.py Qwen3MoeDecoderLayer: MoE iff (layer_idx + 1) % decoder_sparse_step == 0: with step 3, layer 2
    # holds the router and experts, layers 0, 1 and 3 a dense MLP (a step of 2 cannot tell + 1 from − 1)
    t = _layout({**_config("qwen3-30b-a3b"), "decoder_sparse_step": 3})
    assert "model.layers.2.mlp.experts.0.up_proj.weight" in t and "model.layers.2.mlp.gate.weight" in t
    assert all(f"model.layers.{i}.mlp.up_proj.weight" in t for i in (0, 1, 3))
    assert "model.layers.5.mlp.experts.0.up_proj.weight" in t and "model.layers.4.mlp.up_proj.weight" in t


def test_a_dsa_config_without_index_head_dim_takes_128() -> None:
    # DeepSeek-V3.2-Exp inference/model.py ModelArgs: index_head_dim = 128 when the config leaves it out: the
    # indexer's wk is 128 × hidden 7,168
    c = {k: v for k, v in _config("deepseek-v3.2").items() if k != "index_head_dim"}
    assert _layout(c)["model.layers.0.self_attn.indexer.wk.weight"] == ("F8_E4M3", (128, 7168))
