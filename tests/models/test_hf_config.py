"""Hugging Face config.json fixtures (tests/data/hf) read through load_model.

Every expected value comes from shared/reference/peers-models-gpus.md section B; the comment on each assertion
derives it. See tests/data/hf/README.md for where each fixture value comes from.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.arch import IndexerRule, ModelArch, full_indexer_layers
from kvplan.models.from_hf import load_model

HF = Path(__file__).resolve().parent.parent / "data" / "hf"


def fixture(name: str) -> ModelArch:
    return load_model(str(HF / name / "config.json"))


def raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / name / "config.json").read_text(encoding="utf-8"))
    return data


def write_config(tmp_path: Path, name: str, config: dict[str, Any]) -> str:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


# GLM-5.2/5.3: full iff max(i - 3 + 1, 0) % 4 == 0, i.e. max(i - 2, 0) % 4 == 0: layers 0, 1, 2 (clamped
# to 0), then i - 2 = 4, 8, ..., 72 -> i = 6, 10, ..., 74 (18 layers); 3 + 18 = 21.
GLM53_FULL = (0, 1, 2, *range(6, 75, 4))
# SGLang 0.5.23 §1.4, freq 4 without an offset: full iff max(i - 1, 0) % 4 == 0: layers 0, 1 (clamped to 0),
# then i - 1 = 4, 8, ..., 76 -> i = 5, 9, ..., 77 (19 layers); 2 + 19 = 21.
FREQ4_NO_OFFSET_FULL = (0, 1, *range(5, 78, 4))

SMALL_DSA: dict[str, Any] = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 8,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "index_n_heads": 32,
    "index_head_dim": 128,
    "index_topk": 2048,
    "max_position_embeddings": 65536,
}


def test_derived_constants() -> None:
    # Section B: "full at 0,1,2,6,10,…,74 (21 full, 57 shared)".
    # SGLang 0.5.23 §1.4: "{0, 1, 5, 9, …, 77}, which is 21 layers".
    assert len(GLM53_FULL) == 21 and GLM53_FULL[-1] == 74
    assert len(FREQ4_NO_OFFSET_FULL) == 21 and FREQ4_NO_OFFSET_FULL[-1] == 77


# --------------------------------------------------------------------------- the fixtures themselves


def test_glm53_fixture_indexer_types_follow_the_rule() -> None:
    cfg = raw("glm-5.3")
    types = cfg["indexer_types"]
    # The fixture list is generated from the transformers rule with freq 4, offset 3: 78 entries, 21 "full".
    assert len(types) == cfg["num_hidden_layers"] == 78
    assert types == ["full" if max(i - 3 + 1, 0) % 4 == 0 else "shared" for i in range(78)]
    assert tuple(i for i, t in enumerate(types) if t == "full") == GLM53_FULL
    # The freq-only fixture is the GLM-5.3 config less indexer_types, nothing else.
    assert raw("glm-5.2-freq-only") == {k: v for k, v in cfg.items() if k != "indexer_types"}


def test_glm53() -> None:
    arch = fixture("glm-5.3")
    # The folder name names the model.
    assert arch.name == "glm-5.3"
    assert arch.architecture == "GlmMoeDsaForCausalLM"
    # Section B: num_hidden_layers 78, num_nextn_predict_layers 1 (the MTP layer is layer 78).
    assert (arch.num_layers, arch.num_mtp_layers) == (78, 1)
    # indexer_types is present, so it decides (SGLang priority 1): 21 "full" entries at 0, 1, 2, 6, ..., 74.
    assert arch.indexer_rule is IndexerRule.INDEXER_TYPES
    assert arch.full_indexer_layers == 21
    assert arch.shared_indexer_layers == 78 - 21
    assert arch.full_layer_ids == GLM53_FULL
    # Section B: index_n_heads / index_head_dim / index_topk = 32 / 128 / 2048.
    assert (arch.index_n_heads, arch.index_head_dim, arch.index_topk) == (32, 128, 2048)
    # Section B: MLA kv_lora_rank / qk_rope_head_dim = 512 / 64.
    assert (arch.kv_lora_rank, arch.qk_rope_head_dim) == (512, 64)
    # Section B: GLM-5.2/5.3 max_position_embeddings is 1048576 (rope_theta 8e6).
    assert arch.max_position_embeddings == 1_048_576
    # The raw rule fields are kept (vLLM reads only these): freq 4, offset 3, pattern null -> None.
    assert (arch.index_topk_freq, arch.index_skip_topk_offset, arch.index_topk_pattern) == (4, 3, None)


def test_glm5() -> None:
    arch = fixture("glm-5")
    # Section B: 78 layers, 1 MTP layer.
    assert (arch.num_layers, arch.num_mtp_layers) == (78, 1)
    # No indexer_types, pattern or freq: freq defaults to 1 and x % 1 == 0, so all 78 layers are full.
    assert arch.indexer_rule is IndexerRule.FREQ
    assert arch.full_indexer_layers == 78
    assert arch.full_layer_ids == tuple(range(78))
    # Section B: index_n_heads 32, index_head_dim 128, top-k 2048.
    assert (arch.index_n_heads, arch.index_head_dim, arch.index_topk) == (32, 128, 2048)
    # Section B: GLM-5 max_position_embeddings 202752.
    assert arch.max_position_embeddings == 202_752


def test_deepseek_v32() -> None:
    arch = fixture("deepseek-v3.2")
    assert arch.architecture == "DeepseekV32ForCausalLM"
    # Section B: 61 layers, 1 MTP layer.
    assert (arch.num_layers, arch.num_mtp_layers) == (61, 1)
    # No index_topk_freq ("every layer full"): freq 1, so all 61 layers own an indexer.
    assert arch.full_indexer_layers == 61
    assert arch.full_layer_ids == tuple(range(61))
    # Section B: index_n_heads 64 (twice GLM's 32), index_head_dim 128, top-k 2048.
    assert (arch.index_n_heads, arch.index_head_dim, arch.index_topk) == (64, 128, 2048)
    # Section B: 163840 positions (yarn factor 40 × original 4096).
    assert arch.max_position_embeddings == 163_840 == 40 * 4096


def test_glm52_freq_only() -> None:
    arch = fixture("glm-5.2-freq-only")
    assert (arch.num_layers, arch.num_mtp_layers) == (78, 1)
    # No indexer_types and index_topk_pattern null: freq 4 with offset 3 decides (SGLang priority 4).
    assert arch.indexer_rule is IndexerRule.FREQ
    # max(i - 3 + 1, 0) % 4 == 0 gives the same 21 layers the explicit list names.
    assert arch.full_indexer_layers == 21
    assert arch.full_layer_ids == GLM53_FULL == fixture("glm-5.3").full_layer_ids
    assert arch.index_n_heads == 32
    assert arch.max_position_embeddings == 1_048_576


def test_pattern() -> None:
    arch = fixture("pattern")
    # 8 layers and no MTP layer.
    assert (arch.num_layers, arch.num_mtp_layers) == (8, 0)
    # "FFSFSSFS": F at positions 0, 1, 3, 6. The fixture also has freq 4 / offset 3, which alone would give
    # max(i - 2, 0) % 4 == 0 -> 0, 1, 2, 6; the pattern outranks it (SGLang priority 3 before 4).
    assert arch.indexer_rule is IndexerRule.PATTERN
    assert arch.full_layer_ids == (0, 1, 3, 6)
    assert arch.full_indexer_layers == 4
    assert arch.index_topk_pattern == "FFSFSSFS"
    assert (arch.kv_lora_rank, arch.qk_rope_head_dim, arch.index_head_dim) == (512, 64, 128)
    assert (arch.index_n_heads, arch.index_topk) == (32, 2048)
    assert arch.max_position_embeddings == 65_536
    # No hidden_size: no weight estimate, so no parameter groups.
    assert arch.total_params == 0


def test_fp8_quantization_config_is_read() -> None:
    # quantization_config.quant_method "fp8": linear weights cost 1 B + one fp32 scale per 128×128 block.
    for name in ("glm-5.3", "glm-5", "deepseek-v3.2"):
        experts = next(g for g in fixture(name).param_groups if g.name == "routed_experts")
        # per tensor (kvplan.models.config_tensors): fp8 weights + fp32 weight_scale_inv, the scales not parameters
        assert Fraction(experts.bytes_per_param_num, experts.bytes_per_param_den) == Fraction(128 * 128 + 4, 128 * 128)


# --------------------------------------------------------------------------- presets agree with the fixtures


@pytest.mark.parametrize("name", ["glm-5.3", "glm-5", "deepseek-v3.2"])
def test_preset_matches_fixture(name: str) -> None:
    # The built-in preset of the same name was written from the same section B values, so every field the
    # cache and weight plans read must be equal.
    preset, hf = load_model(name), fixture(name)
    for field in (
        "num_layers",
        "num_mtp_layers",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "index_head_dim",
        "index_n_heads",
        "index_topk",
        "indexer_full",
        "max_position_embeddings",
    ):
        assert getattr(preset, field) == getattr(hf, field), field
    # A preset's weights are parameter groups, a config.json's every tensor (norms, biases and the indexer's
    # k_norm included): the counts agree within 0.3 % (deepseek-v3.2: 683,499,061,248 vs 685,355,329,792, the
    # MTP layer's own embed and head that the groups leave out).
    assert preset.total_params == pytest.approx(hf.total_params, rel=0.003)


# --------------------------------------------------------------------------- parameter counts


def _mtp_params(arch: ModelArch) -> int:
    return sum(g.params for g in arch.param_groups if g.name == "mtp")


def test_deepseek_v32_params() -> None:
    arch = fixture("deepseek-v3.2")
    # HF lists 685B = 671B main + 14B MTP, and total_params includes the MTP group, so compare with 685B.
    # (kvplan's MTP layer shares the embeddings and head, so it is ~1.85B (2 × 129280 × 7168) under the HF
    # count, which stores a copy of each: 683.5B, 0.2 % low.)
    assert arch.total_params == pytest.approx(685e9, rel=0.01)
    # Section B recount: 671.9B without the MTP layer.
    assert arch.total_params - _mtp_params(arch) == pytest.approx(671.9e9, rel=0.01)


def test_glm5_params() -> None:
    arch = fixture("glm-5")
    # Section B: 743.9B main + 9.96B MTP layer (no embed/head copy) = 753.9B; HF shows 754B for GLM-5.1-FP8.
    # total_params includes the MTP group, so compare with 754B, not the README's 744B (main only).
    assert arch.total_params == pytest.approx(754e9, rel=0.01)
    assert arch.total_params - _mtp_params(arch) == pytest.approx(743.9e9, rel=0.01)
    assert _mtp_params(arch) == pytest.approx(9.96e9, rel=0.01)


def test_glm53_params() -> None:
    # "same base model as GLM-5.2", 753B total (with MTP). kvplan counts indexer weights on all 78 layers
    # (section B's 753.3B recount keeps 21), a 0.07 % difference.
    assert fixture("glm-5.3").total_params == pytest.approx(753e9, rel=0.01)
    # Only the indexer rule differs from GLM-5, and weights do not depend on it.
    assert fixture("glm-5.3").total_params == fixture("glm-5").total_params


# --------------------------------------------------------------------------- SGLang resolution order


def test_priority_indexer_types_then_pattern_then_freq(tmp_path: Path) -> None:
    types = ["full", "shared", "shared", "shared", "full", "shared", "shared", "shared"]  # 0, 4
    everything = {
        **SMALL_DSA,
        "indexer_types": types,
        "index_topk_pattern": "FFSFSSFS",  # 0, 1, 3, 6
        "index_topk_freq": 4,
        "index_skip_topk_offset": 3,  # max(i - 2, 0) % 4 == 0 -> 0, 1, 2, 6
    }
    # All three present and disagreeing: indexer_types wins (SGLang dsa_layer_skips_topk checks it first).
    arch = load_model(write_config(tmp_path, "all", everything))
    assert arch.indexer_rule is IndexerRule.INDEXER_TYPES
    assert arch.full_layer_ids == (0, 4)
    # Without indexer_types the pattern wins over freq.
    no_types = {k: v for k, v in everything.items() if k != "indexer_types"}
    arch = load_model(write_config(tmp_path, "pattern", no_types))
    assert arch.indexer_rule is IndexerRule.PATTERN
    assert arch.full_layer_ids == (0, 1, 3, 6)
    # Without either, freq 4 / offset 3 decides.
    freq = {k: v for k, v in no_types.items() if k != "index_topk_pattern"}
    arch = load_model(write_config(tmp_path, "freq", freq))
    assert arch.indexer_rule is IndexerRule.FREQ
    assert arch.full_layer_ids == (0, 1, 2, 6)
    # A null pattern counts as absent (the GLM-5.3 config carries "index_topk_pattern": null).
    arch = load_model(write_config(tmp_path, "null", {**freq, "index_topk_pattern": None}))
    assert arch.full_layer_ids == (0, 1, 2, 6)


def test_freq4_without_offset_78_layers(tmp_path: Path) -> None:
    # SGLang 0.5.23 §1.4: "78 layers with freq=4 give fresh (indexer) layers {0, 1, 5, 9, …, 77}, which is
    # 21 layers"; without an offset the test is max(i - 1, 0) % 4 == 0.
    cfg = {**SMALL_DSA, "num_hidden_layers": 78, "index_topk_freq": 4}
    arch = load_model(write_config(tmp_path, "freq4", cfg))
    assert arch.indexer_rule is IndexerRule.FREQ
    assert arch.index_skip_topk_offset is None
    assert arch.full_layer_ids == FREQ4_NO_OFFSET_FULL
    assert arch.full_indexer_layers == 21
    # The same set straight from the rule function.
    flags, rule = full_indexer_layers(78, freq=4)
    assert tuple(i for i, f in enumerate(flags) if f) == FREQ4_NO_OFFSET_FULL
    assert rule is IndexerRule.FREQ


def test_unknown_hf_fields_are_ignored() -> None:
    # A config.json is read leniently: rope_theta, rms_norm_eps, hidden_act, transformers_version, ... do not
    # raise, and the fixtures carry them.
    for name in ("glm-5.3", "glm-5", "deepseek-v3.2"):
        cfg = raw(name)
        assert {"rope_theta", "rms_norm_eps", "hidden_act", "transformers_version"} <= set(cfg)
        assert fixture(name).num_layers == cfg["num_hidden_layers"]
