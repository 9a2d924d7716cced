"""DeepSeek-VL2 (``model_type: deepseek_vl_v2``): the language model's fields in a nested ``language_config``
(kvplan.models.vlm), from deepseek-ai/deepseek-vl2's config.json (tests/data/hf/deepseek-vl2, provenance in
tests/data/hf/README.md).

What the engines build (both read the same nested section):
- SGLang ``configs/deepseekvl2.py``: ``DeepseekVL2Config.language_config = DeepseekV2Config(**language_config)``,
  ``architectures = ["DeepseekVL2ForCausalLM"]``; ``models/deepseek_vl2.py`` builds ``DeepseekV2ForCausalLM``
  (MLA) when ``use_mla`` (default True) else ``DeepseekForCausalLM`` ("deepseek-vl2-tiny forbids mla");
  ``configs/model_config.py``: ``"DeepseekVL2ForCausalLM" in architectures and getattr(hf_text_config,
  "use_mla", True)`` -> AttentionArch.MLA with the text config's ``kv_lora_rank`` / ``qk_rope_head_dim``, else MHA.
- vLLM ``transformers_utils/configs/deepseek_vl2.py``: ``text_config = DeepseekV2Config(**language_config)``;
  ``models/deepseek_vl2.py``: DeepseekV3ForCausalLM (``topk_method`` noaux_tc), DeepseekForCausalLM (not
  ``use_mla``) or DeepseekV2ForCausalLM; ``ModelConfig.is_deepseek_mla``: model_type deepseek_v2 and
  ``kv_lora_rank`` not None.
deepseek-vl2's ``language_config`` names neither its layers nor its heads: DeepseekV2Config's defaults (SGLang's
copy and transformers' agree): 30 layers, 32 heads, kv_lora_rank 512, qk_rope 64, qk_nope 128, v 128; its
``q_lora_rank`` is null (q_proj full). The checkpoint index of the same repository copy lists layers 0 .. 29.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.cache import FullAttention, MlaLatent
from kvplan.models.formats import MlaLayout
from kvplan.models.from_hf import load_model

CONFIG = Path(__file__).resolve().parents[1] / "data" / "hf" / "deepseek-vl2" / "config.json"

# deepseek-vl2-tiny's language_config fields (use_mla false), as transcribed from the published config.json in
# alibaba/rtp-llm's test "test_official_sparse_configs_preserve_variant_defaults" (the same values appear in the
# DeepSeek-OCR configs, which reuse VL2-tiny's decoder): not a verbatim file, so the test writes it.
TINY_LANGUAGE = {
    "hidden_size": 1280, "intermediate_size": 6848, "num_hidden_layers": 12, "num_attention_heads": 10,
    "num_key_value_heads": 10, "vocab_size": 129280, "max_position_embeddings": 4096, "n_routed_experts": 64,
    "num_experts_per_tok": 6, "moe_intermediate_size": 896, "n_shared_experts": 2, "first_k_dense_replace": 1,
    "n_group": 1, "topk_group": 1, "topk_method": "greedy", "q_lora_rank": None, "kv_lora_rank": None,
    "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0, "use_mla": False, "torch_dtype": "bfloat16",
}  # fmt: skip


@pytest.fixture(scope="module")
def arch() -> Any:
    return load_model(str(CONFIG))


def _write(tmp_path: Path, data: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps(data), encoding="utf-8")
    return str(tmp_path / "config.json")


def test_mla_language_model_from_the_nested_section(arch: Any) -> None:
    # was: "num_hidden_layers: missing (required)" (the top level has no decoder fields)
    assert arch.architecture == "DeepseekVLV2ForCausalLM"
    assert (arch.num_layers, arch.num_attention_heads, arch.max_position_embeddings) == (30, 32, 4096)
    assert {layer.caches for layer in arch.layers} == {(MlaLatent(kv_lora_rank=512, qk_rope_head_dim=64),)}
    # one latent a token and layer, replicated over TP: (512 + 64) × 2 B (bf16) = 1,152 B; × 30 layers
    assert arch.layers[0].caches[0].bytes_per_token(MlaLayout.BF16) == 1_152
    assert 30 * 1_152 == 34_560


def test_parameters_against_the_published_checkpoint(arch: Any) -> None:
    # h = 2,560, 30 layers, first_k_dense_replace 1, 72 routed + 2 shared experts of 1,536, vocab 129,280 untied:
    #   attention (MLA, q_lora null): q 32 × 192 × 2,560 + kv_a 576 × 2,560 + kv_b 32 × 256 × 512 + o 2,560 × 4,096
    #     = 31,883,264 a layer × 30 = 956,497,920
    #   dense MLP (layer 0): 3 × 12,288 × 2,560 = 94,371,840
    #   routed: 72 × 3 × 1,536 × 2,560 × 29 = 24,631,050,240; shared: 2 × 3 × 1,536 × 2,560 × 29 = 684,195,840
    #   router 72 × 2,560 × 29 = 5,345,280; embeddings + head 2 × 129,280 × 2,560 = 661,913,600
    # vision (SigLIP-SO400M/14 at 384, timm; vision_config width 1,152, 27 layers, mlp_ratio 3.7362 -> 4,304):
    #   patch 3 × 14² × 1,152 + 1,152 = 678,528; positions 27² × 1,152 = 839,808;
    #   block 4 × 1,152² + 2 × 4,304 × 1,152 + 9 × 1,152 + 4,304 = 15,239,504 × 27 = 411,466,608; norm 2,304;
    #   attn_pool 1,152 + 4 × (1,152² + 1,152) + 2,304 + 2 × 4,304 × 1,152 + 4,304 + 1,152 = 15,238,352
    #   projector (downsample_mlp_gelu, n_embed 2,560): 4,608 × 2,560 + 2,560 + 2,560² + 2,560 = 18,355,200;
    #   image_newline + view_seperator 2 × 2,560 -> 446,585,920 in all
    groups = {g.name: g.params for g in arch.param_groups if g.params}
    assert groups == {
        "attention": 956_497_920, "dense_mlp": 94_371_840, "routed_experts": 24_631_050_240,
        "shared_experts": 684_195_840, "router": 5_345_280, "embeddings": 661_913_600, "vision": 446_585_920,
    }  # fmt: skip
    # + what kvplan leaves out (norms 2 × 2,560 × 30 + 2,560 = 156,160; kv_a_layernorm 512 × 30 = 15,360;
    # e_score_correction_bias 72 × 29 = 2,088) = the checkpoint's model.safetensors.index.json total_size
    # 54,960,268,496 B / 2 B (bf16), to the parameter (the index beside the same copy of the config)
    assert sum(groups.values()) + 156_160 + 15_360 + 2_088 == 54_960_268_496 // 2


def test_vision_tower_is_replicated_and_sglang_adds_its_absorbed_mla_copies(arch: Any) -> None:
    split = Split(tp=8, attention=8, experts=8)
    by = {g.name: g for g in arch.param_groups}
    assert by["vision"].bytes_on(split, engine="sglang", with_mtp=False) == 446_585_920 * 2  # timm, not sharded
    # SGLang DeepseekV2ForCausalLM.post_load_weights: w_kc / w_vc bf16 copies of kv_b_proj, 30 layers × 512 ×
    # (32 / 8 heads) × (128 + 128) × 2 B = 31,457,280; + the rotary cos/sin cache 4,096 × 64 × 2 B = 524,288
    assert by["engine_additions"].bytes_on(split, engine="sglang", with_mtp=False) == 31_457_280 + 524_288
    assert by["engine_additions"].bytes_on(split, engine="vllm", with_mtp=False) == 524_288  # bf16 kv_b: no copy


def test_sglang_vlm_factor_reads_the_default_tower(arch: Any) -> None:
    # memory_hook.adjust_mem_fraction_for_vlm: getattr(vision_config, "num_hidden_layers", 24), "hidden_size",
    # 1024: VL2's vision config names them layers / width, so the ratio is 1 and the factor 0.95
    assert arch.vision_tower == (24, 1024)


def test_mha_language_model_when_use_mla_is_false(tmp_path: Path) -> None:
    path = _write(tmp_path, {"model_type": "deepseek_vl_v2", "language_config": TINY_LANGUAGE})
    tiny = load_model(path)
    assert tiny.architecture == "DeepseekVLV2ForCausalLM" and tiny.num_layers == 12
    # DeepseekForCausalLM (both engines): head_dim = hidden_size // num_attention_heads = 128, 10 kv heads; the
    # 0-wide MLA fields are not read (they would fail the width checks: qk_nope_head_dim / v_head_dim >= 1)
    assert {layer.caches for layer in tiny.layers} == {(FullAttention(10, 128, 128, 10),)}
    assert tiny.kv_lora_rank == 0
    # K and V: 2 × 10 heads × 128 × 2 B = 5,120 B a token and layer at TP1; TP2: 5 heads a rank, 2,560 B
    assert tiny.layers[0].caches[0].bytes_per_token(1, "bf16") == 5_120
    assert tiny.layers[0].caches[0].bytes_per_token(2, "bf16") == 2_560


def test_architectures_name_reads_the_same(tmp_path: Path, arch: Any) -> None:
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    for name in ("DeepseekVLV2ForCausalLM", "DeepseekVL2ForCausalLM"):  # vLLM's, SGLang's
        named = load_model(_write(tmp_path, {**data, "architectures": [name]}))
        assert named.layers == arch.layers and named.param_groups == arch.param_groups


def test_a_wrapper_without_language_config_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="language_config: missing"):
        load_model(_write(tmp_path, {"model_type": "deepseek_vl_v2", "vision_config": {}}))


@pytest.mark.parametrize(
    ("where", "key", "value", "said"),
    [
        ("language_config", "use_mla", "yes", "language_config.use_mla"),  # a JSON boolean, as both configs read it
        ("language_config", "kv_lora_rank", None, "language_config.kv_lora_rank: missing"),  # MLA without a latent
        ("language_config", "num_hidden_layers", 0, "language_config.num_hidden_layers"),
        ("vision_config", "width", "1152", "vision_config.width"),
    ],
)
def test_bad_values_are_refused_naming_the_nested_key(
    tmp_path: Path, where: str, key: str, value: Any, said: str
) -> None:
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    data[where] = {**data[where], key: value}
    with pytest.raises(ConfigError) as e:
        load_model(_write(tmp_path, data))
    assert said in str(e.value)
