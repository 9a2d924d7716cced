"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/params_glm5_next.py.

A config.json may leave fields out: SGLang fills them from ``Glm5NextTextConfig.__init__``'s defaults
(``srt/configs/glm5_next.py``: linear_head_dim 128, linear_num_heads 64, linear_conv_kernel_dim 4, v_head_dim 256,
n_shared_experts 1) and the vision tower from ``GlmOcrVisionConfig`` (vLLM ``transformers_utils/configs``:
in_channels 3, temporal_patch_size 2). Each expected count is derived in a comment from the modules SGLang builds
(``srt/models/glm5_next.py``; the layout in kvplan/models/params_glm5_next.py's comment), on a small config.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.weights import param_groups_from_hf

# 4 layers: KDA on 0, 1, 2 (i % 4 != 3), MLA on 3; h 256; KDA 2 heads × 32 (p 64); MLA 4 heads, q_lora 64,
# kv_lora 64, nope 32, rope 0, v 32; 4 routed experts of 64 on every layer; no MTP
TINY: dict[str, Any] = {
    "architectures": ["Glm5NextForConditionalGeneration"],
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "q_lora_rank": 64,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 0,
    "v_head_dim": 32,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "moe_intermediate_size": 64,
    "first_k_dense_replace": 0,
    "intermediate_size": 512,
    "num_nextn_predict_layers": 0,
    "vocab_size": 100,
    "linear_num_heads": 2,
    "linear_head_dim": 32,
    "linear_conv_kernel_dim": 4,
}
# a KDA layer: q, k, v 3 × 64 × 256 = 49,152; b_proj 2 × 256 = 512; f_b, g_b 2 × 64 × 32 = 4,096; o 256 × 64 =
# 16,384; conv1d 3 × 64 × 4 = 768, A_log 2, dt_bias 64 → 70,978, × 3 KDA layers
KDA_P64 = 3 * 70_978


def _params(cfg: dict[str, Any]) -> dict[str, int]:
    return {g.name: g.params for g in param_groups_from_hf(cfg, "tiny/config.json").groups}


def _without(*keys: str, **more: Any) -> dict[str, Any]:
    return {**{k: v for k, v in TINY.items() if k not in keys}, **more}


def test_kda_shape_from_the_text_fields_without_linear_attn_config() -> None:
    assert _params(TINY)["linear_attention"] == KDA_P64 == 212_934
    # f_a, g_a (ReplicatedLinear) 2 × 32 × 256 = 16,384 a layer
    assert _params(TINY)["linear_attention_replicated"] == 3 * 16_384


def test_a_linear_attn_config_without_the_shape_keys_takes_them_from_the_text_fields() -> None:
    # SGLang builds linear_attn_config with num_heads, head_dim and short_conv_kernel_size only when the config
    # has none; kvplan reads the text fields for a key the given one lacks: the same 2 × 32, kernel 4
    cfg = _without(linear_attn_config={"kda_layers": [0, 1, 2]})
    assert _params(cfg)["linear_attention"] == KDA_P64


def test_linear_head_dim_defaults_to_128() -> None:
    # Glm5NextTextConfig linear_head_dim=128: p = 2 × 128 = 256. A KDA layer: q, k, v 3 × 256 × 256 = 196,608;
    # b_proj 512; f_b, g_b 2 × 256 × 128 = 65,536; o 256 × 256 = 65,536; conv1d 3 × 256 × 4 = 3,072, A_log 2,
    # dt_bias 256 → 331,522 × 3 = 994,566
    assert _params(_without("linear_head_dim"))["linear_attention"] == 994_566


def test_v_head_dim_defaults_to_256() -> None:
    # Glm5NextTextConfig v_head_dim=256, on the MLA layer 3: q_b 4 × 32 × 64 = 8,192; kv_b 4 × (32 + 256) × 64
    # = 73,728; o 256 × 4 × 256 = 262,144 → 344,064 (with v 32: 8,192 + 16,384 + 32,768 = 57,344)
    assert _params(TINY)["attention"] == 57_344
    assert _params(_without("v_head_dim"))["attention"] == 344_064


def test_n_shared_experts_defaults_to_one() -> None:
    # Glm5NextTextConfig n_shared_experts=1, and the model builds shared_experts unless it is None (vLLM
    # glm5next Glm5NextMoE `if config.n_shared_experts is None: self.shared_experts = None`): a config that leaves
    # the key out serves one shared expert of moe_intermediate_size, 3 × 64 × 256 = 49,152 a layer × 4
    assert _params(TINY)["shared_experts"] == 196_608
    assert _params(_without("n_shared_experts"))["shared_experts"] == 196_608
    # an explicit 0 or null serves none
    assert "shared_experts" not in _params(_without(n_shared_experts=0))
    assert "shared_experts" not in _params(_without(n_shared_experts=None))


def test_missing_mlp_sizes_are_refused_with_the_key() -> None:
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(_without("moe_intermediate_size"), "tiny/config.json")
    assert (e.value.key, str(e.value).endswith("missing (required for a MoE model)")) == ("moe_intermediate_size", True)
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(_without("intermediate_size", first_k_dense_replace=1), "tiny/config.json")
    assert e.value.key == "intermediate_size" and "missing (required for the dense MLP layers)" in str(e.value)


def test_a_kda_layer_past_the_last_names_the_range() -> None:
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(_without(linear_attn_config={"kda_layers": [0, 4]}), "tiny/config.json")
    assert e.value.key == "linear_attn_config.kda_layers"
    assert "expected a list of layer numbers from 0 to 3" in str(e.value)  # 4 layers: 0 .. 3


VISION: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "out_hidden_size": 64,
    "num_heads": 4,
    "depth": 1,
    "patch_size": 2,
}


def test_vision_patch_embedding_defaults_to_3_channels_and_2_frames() -> None:
    # GlmOcrVisionConfig in_channels=3, temporal_patch_size=2: the Conv3d patch embedding holds
    # hidden × in_channels × temporal × patch² weights: 64 × 3 × 2 × 4 = 1,536 (+ 64 bias)
    default = _params(_without(vision_config=VISION))["vision"]
    explicit = _params(_without(vision_config={**VISION, "in_channels": 3, "temporal_patch_size": 2}))["vision"]
    assert default == explicit
    # one channel, one frame: 64 × 1 × 1 × 4 = 256 weights, 1,280 fewer
    single = _params(_without(vision_config={**VISION, "in_channels": 1, "temporal_patch_size": 1}))["vision"]
    assert default - single == 1_536 - 256 == 1_280


def test_tied_embeddings_count_once_and_rope_defaults_to_0() -> None:
    # tie_word_embeddings: one vocab × h matrix, 100 × 256 = 25,600 (untied: 51,200)
    assert _params(TINY)["embeddings"] == 51_200
    assert _params(_without(tie_word_embeddings=True))["embeddings"] == 25_600
    # Glm5NextTextConfig qk_rope_head_dim=0: the same MLA counts as the explicit 0 (57,344, above)
    assert _params(_without("qk_rope_head_dim"))["attention"] == 57_344


def test_no_indexer_without_index_topk() -> None:
    # the pooled indexer is built on DSA configs only (index_topk set); TINY names index_n_heads nowhere either
    assert "indexer" not in _params(TINY)
    assert "indexer" not in _params(_without(index_n_heads=8))


def test_mtp_layers_are_numbered_after_the_decoder_layers() -> None:
    # MTP layer k is checkpoint layer num_hidden_layers + k (SGLang Glm5NextTextConfig.nextn_layer_ids): with 2 MTP
    # layers on 4, layers 4 and 5. An fp8 (per-tensor) checkpoint that keeps layer 5's eh_proj in bf16 holds
    # 256 × 512 × 2 B = 262,144 B there instead of 131,072 + 4 (its fp32 scale): 131,068 B more than one naming
    # layer 3's eh_proj (a decoder layer has none)
    def mtp_bytes(keep: str) -> int:
        cfg = _without(
            num_nextn_predict_layers=2,
            quantization_config={"quant_method": "fp8", "modules_to_not_convert": [keep]},
        )
        (g,) = (g for g in param_groups_from_hf(cfg, "tiny/config.json").groups if g.name == "mtp")
        return g.bytes_per_gpu(Split(tp=1, attention=1, experts=1))

    layer5 = mtp_bytes("model.language_model.layers.5.eh_proj")
    assert layer5 - mtp_bytes("model.language_model.layers.3.eh_proj") == 131_068


def test_the_every_fourth_default_places_the_mla_layer() -> None:
    # no linear_attn_config, no layer_types: Glm5NextTextConfig kda_layers = [i for i in range(7) if i % 4 != 3] =
    # 0, 1, 2, 4, 5, 6: 6 KDA layers × 70,978 and one MLA layer (57,344, above)
    groups = _params(_without(num_hidden_layers=7))
    assert (groups["linear_attention"], groups["attention"]) == (6 * 70_978, 57_344)


def test_layer_types_pick_the_kda_layers() -> None:
    # Glm5NextTextConfig without linear_attn_config: kda_layers are the "linear_attention" entries of layer_types,
    # one a layer: 2 KDA (2 × 70,978) and 2 MLA layers (2 × 57,344) here
    types = ["linear_attention", "full_attention", "full_attention", "linear_attention"]
    groups = _params(_without(layer_types=types))
    assert (groups["linear_attention"], groups["attention"]) == (2 * 70_978, 2 * 57_344)
    with pytest.raises(ConfigError, match="expected 4 layer type names"):
        param_groups_from_hf(_without(layer_types=types[:3]), "tiny/config.json")


def test_linear_num_heads_defaults_to_64() -> None:
    # Glm5NextTextConfig linear_num_heads=64: p = 64 × 32 = 2,048. A KDA layer: q, k, v 3 × 2,048 × 256 =
    # 1,572,864; b_proj 64 × 256 = 16,384; f_b, g_b 2 × 2,048 × 32 = 131,072; o 256 × 2,048 = 524,288; conv1d
    # 3 × 2,048 × 4 = 24,576, A_log 64, dt_bias 2,048 → 2,271,296 × 3 = 6,813,888
    assert _params(_without("linear_num_heads"))["linear_attention"] == 6_813_888


def test_the_indexer_reads_index_head_dim_128_and_needs_its_heads() -> None:
    # index_topk set: the MLA layer 3 builds the indexer (index_head_dim 128, the only width SGLang's
    # NSATokenToKVPool takes: `assert index_head_dim == 128`): wq_b 2 × 128 × 64 (q_lora) = 16,384; wk 128 × 256
    # = 32,768; weights_proj 2 × 256 = 512; the compress gate 128 × 256 + k_norm 2 × 128 = 33,024 → 82,688
    assert _params(_without(index_topk=64, index_n_heads=2))["indexer"] == 82_688
    # Glm5NextTextConfig(index_n_heads=None) and the indexer needs it: a top-k without it is refused (was 0 heads)
    with pytest.raises(ConfigError, match="index_n_heads: missing"):
        param_groups_from_hf(_without(index_topk=64), "tiny/config.json")


def test_the_mla_rope_dims_without_q_lora() -> None:
    # q_lora_rank null (SGLang Glm5NextTextConfig: Optional[int], `if self.q_lora_rank is not None` builds q_a/q_b,
    # else q_proj) and rope 16: q_proj 4 × (32 + 16) × 256 = 49,152, kv_b 4 × (32 + 32) × 64 = 16,384, o 256 × 4 ×
    # 32 = 32,768 → 98,304; the latent kv_a_proj_with_mqa (64 + 16) × 256 = 20,480
    groups = _params(_without(q_lora_rank=None, qk_rope_head_dim=16))
    assert (groups["attention"], groups["attention_latent"]) == (98_304, 20_480)
    # absent, it is the config class's 1536 (SGLang Glm5NextTextConfig(q_lora_rank=1536), transformers 5.16.1-5.20
    # q_lora_rank: int = 1536): q_b 4 × 48 × 1,536 = 294,912 + kv_b 16,384 + o 32,768 = 344,064; latent q_a
    # 1,536 × 256 = 393,216 + kv_a 20,480 = 413,696
    groups = _params(_without("q_lora_rank", qk_rope_head_dim=16))
    assert (groups["attention"], groups["attention_latent"]) == (344_064, 413_696)


def test_a_dense_config_without_mtp_layers_has_none() -> None:
    # num_nextn_predict_layers 0: Glm5NextTextConfig.nextn_layer_ids is empty, no MTP layer is counted
    dense = _without("n_routed_experts", "n_shared_experts", "moe_intermediate_size")
    assert "mtp" not in _params(dense) and "dense_mlp" in _params(dense)


def test_a_pooled_indexer_counts_its_compress_ape() -> None:
    # index_kpool > 1 pools the index keys and adds index_kpool_compress_ape, kpool × index_head_dim (fp32): at
    # kpool 2, 2 × 128 = 256 beside the 82,688 above (kpool 1 pools nothing and has none)
    assert _params(_without(index_topk=64, index_n_heads=2, index_kpool=2))["indexer"] == 82_688 + 256


def test_qk_nope_head_dim_defaults_to_256() -> None:
    # Glm5NextTextConfig(qk_nope_head_dim=256) (SGLang python/sglang/srt/configs/glm5_next.py, vLLM's alike), on
    # the MLA layer 3 (q_lora 64, rope 0, v 32): q_b 4 × 256 × 64 = 65,536; kv_b 4 × (256 + 32) × 64 = 73,728; o
    # 256 × 4 × 32 = 32,768 → 172,032 (with nope 32: 57,344)
    assert _params(_without("qk_nope_head_dim"))["attention"] == 172_032


def test_the_q_b_proj_holds_the_rope_dims() -> None:
    # q_lora 64 and rope 16: q_b_proj 4 × (32 + 16) × 64 = 12,288, kv_b 4 × (32 + 32) × 64 = 16,384, o 256 × 4 ×
    # 32 = 32,768 → 61,440; the latent q_a_proj 64 × 256 = 16,384 + kv_a_proj_with_mqa (64 + 16) × 256 = 20,480
    groups = _params(_without(qk_rope_head_dim=16))
    assert (groups["attention"], groups["attention_latent"]) == (61_440, 36_864)


def test_the_vision_attention_biases_follow_attention_bias() -> None:
    # attention_bias (default True, as a GLM-5.3 port's Glm5NextVisionConfig(attention_bias=True)): each block's
    # qkv bias (3 × 64) and proj bias (64), 256 a block; attention_bias False drops exactly those 256 of the one
    # block
    default = _params(_without(vision_config=VISION))["vision"]
    assert default == _params(_without(vision_config={**VISION, "attention_bias": True}))["vision"]
    assert default - _params(_without(vision_config={**VISION, "attention_bias": False}))["vision"] == 256


def test_vocab_size_defaults_to_154880() -> None:
    # Glm5NextTextConfig(vocab_size=154880) (SGLang python/sglang/srt/configs/glm5_next.py, vLLM's
    # transformers_utils/configs alike): without the key the engines still build embed_tokens and lm_head,
    # 2 × 154,880 × 256 = 79,298,560 here (kvplan counted no embeddings)
    assert _params(_without("vocab_size"))["embeddings"] == 79_298_560


def test_the_text_defaults_both_engines_share() -> None:
    # Glm5NextTextConfig (SGLang and vLLM): kv_lora_rank 512, linear_conv_kernel_dim 4. Without kv_lora_rank the
    # MLA layer 3: q_b 4 × 32 × 64 = 8,192, kv_b 4 × (32 + 32) × 512 = 131,072, o 256 × 4 × 32 = 32,768 → 172,032;
    # the latent q_a 64 × 256 = 16,384 + kv_a_proj_with_mqa (512 + 0) × 256 = 131,072 → 147,456
    groups = _params(_without("kv_lora_rank"))
    assert (groups["attention"], groups["attention_latent"]) == (172_032, 147_456)
    # without linear_conv_kernel_dim, kernel 4: the KDA layers as TINY's explicit 4 (conv1d 3 × 64 × 4 = 768)
    assert _params(_without("linear_conv_kernel_dim"))["linear_attention"] == KDA_P64


def test_mhc_only_with_mhc_and_hc_mult_defaults_to_4() -> None:
    # no mhc flag: no hyper-connection parameters at all
    assert "mhc" not in _params(TINY)
    # mhc with hc_mult 4 (SGLang Glm5NextTextConfig hc_mult=4; vLLM mhc_num_residual_streams=4, read from hc_mult):
    # 2 × ((2 + 4) × 4 × 4 × 256 + (2 + 4) × 4 + 3) = 2 × 24,603 = 49,206 a layer, × 4 layers = 196,824
    assert _params(_without(mhc=True))["mhc"] == 196_824
    assert _params(_without(mhc=True, hc_mult=4))["mhc"] == 196_824


def test_the_every_fourth_default_and_layer_types_at_8_layers() -> None:
    # Glm5NextTextConfig kda_layers = [i for i in range(8) if i % 4 != 3]: MLA on 3 and 7, 6 KDA layers
    groups = _params(_without(num_hidden_layers=8))
    assert (groups["linear_attention"], groups["attention"]) == (6 * 70_978, 2 * 57_344)
    # layer_types: only the "linear_attention" entries are KDA (3 here), the other one MLA
    types = ["linear_attention", "linear_attention", "full_attention", "linear_attention"]
    groups = _params(_without(layer_types=types))
    assert (groups["linear_attention"], groups["attention"]) == (3 * 70_978, 57_344)


def test_unread_mlp_widths_of_0_are_accepted() -> None:
    # every layer MoE (first_k_dense_replace 0): no dense MLP is built, so intermediate_size 0 is never read
    assert "dense_mlp" not in _params(_without(intermediate_size=0))
    # a dense config (no n_routed_experts) never reads moe_intermediate_size: 0 is accepted; 4 dense layers × 3 ×
    # 512 × 256 = 1,572,864
    dense = _without("n_routed_experts", "n_shared_experts", moe_intermediate_size=0)
    assert _params(dense)["dense_mlp"] == 1_572_864


def test_the_vision_spatial_merge_defaults_to_2() -> None:
    # Glm5NextVisionConfig spatial_merge_size=2 (vLLM; SGLang's GlmOcrVisionConfig base): the downsample Conv2d
    # holds out × hidden × s² = 64 × 64 × 4 = 16,384 weights; at s 1, 4,096: 12,288 fewer
    default = _params(_without(vision_config=VISION))["vision"]
    assert default == _params(_without(vision_config={**VISION, "spatial_merge_size": 2}))["vision"]
    assert default - _params(_without(vision_config={**VISION, "spatial_merge_size": 1}))["vision"] == 12_288


def test_first_k_dense_replace_defaults_to_0_as_vllm() -> None:
    # vLLM Glm5NextTextConfig(first_k_dense_replace=0): without the key every layer is MoE, 4 × 3 × 4 experts ×
    # 64 × 256 = 786,432 routed parameters and no dense MLP (SGLang's class says 3; every published config names it)
    groups = _params(_without("first_k_dense_replace"))
    assert groups["routed_experts"] == 786_432 and "dense_mlp" not in groups
