"""Kimi-Linear's parameter groups (kvplan/models/params_kimi_linear.py), pinned where the mutation check moved a
rule the published config does not reach: a tied vocabulary, a kda_layers entry of 0, and the dense layers.

The config is the kimi-linear-48b-a3b preset's ``config:`` block (Kimi-Linear-48B-A3B-Instruct's config.json
fields, provenance in that preset), written out as a config.json with one field changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model
from kvplan.models.weights import param_groups_from_hf

PRESET = Path(__file__).parents[2] / "kvplan" / "configs" / "models" / "kimi-linear-48b-a3b.yaml"


def _config(**changes: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = yaml.safe_load(PRESET.read_text())["config"]
    return {**cfg, **changes}


def _groups(tmp_path: Path, cfg: dict[str, Any]) -> dict[str, int]:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return {g.name: g.params for g in load_model(str(tmp_path)).param_groups if g.params}


def test_tied_embeddings_are_one_vocab_matrix(tmp_path: Path) -> None:
    # KimiLinearForCausalLM: lm_head shares embed_tokens when tie_word_embeddings (both engines' load_weights skip
    # lm_head): 163,840 × 2,304 = 377,487,360 instead of twice that
    assert _groups(tmp_path, _config(tie_word_embeddings=True))["embeddings"] == 377_487_360
    assert _groups(tmp_path, _config())["embeddings"] == 2 * 377_487_360


def test_a_kda_layer_number_of_0_is_refused(tmp_path: Path) -> None:
    # KimiLinearConfig.is_kda_layer: (layer_idx + 1) in kda_layers, 1-based: 0 names no layer of the 27 (read
    # here by the parameter count itself, as Kimi-K3's text config reaches it, not through the loader's check)
    la = {**_config()["linear_attn_config"], "kda_layers": [0, 1, 2]}
    with pytest.raises(ConfigError, match=r"expected a layer number from 1 to 27, got 0"):
        param_groups_from_hf(_config(linear_attn_config=la), "config.json")


def test_no_shared_expert_is_read(tmp_path: Path) -> None:
    # KimiLinearConfig(num_shared_experts=0): KimiMoE builds no shared expert; the routed ones stay
    # (26 MoE layers × 256 × 3 × 1,024 × 2,304 = 47,110,422,528)
    groups = _groups(tmp_path, _config(num_shared_experts=0))
    assert "shared_experts" not in groups and groups["routed_experts"] == 47_110_422_528


def test_a_dense_config_has_a_dense_mlp_on_every_layer(tmp_path: Path) -> None:
    # without num_experts (KimiLinearConfig.is_moe: num_experts is not None) every layer is KimiMLP of
    # intermediate_size: 27 × 3 × 9,216 × 2,304 = 1,719,926,784; no routed, shared or router group
    cfg = _config()
    for key in ("num_experts", "num_shared_experts", "moe_intermediate_size", "num_experts_per_token"):
        del cfg[key]
    groups = _groups(tmp_path, cfg)
    assert groups["dense_mlp"] == 1_719_926_784
    assert not {"routed_experts", "shared_experts", "router"} & groups.keys()


@pytest.mark.parametrize("key", ["qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"])
def test_the_mla_head_dims_are_required(key: str) -> None:
    # vLLM transformers_utils/configs/kimi_linear.py KimiLinearConfig: qk_nope_head_dim, qk_rope_head_dim and
    # v_head_dim default to None, and KimiMLAAttention's projections need each (kvplan assumed 128, 64, 128)
    cfg = _config()
    del cfg[key]
    with pytest.raises(ConfigError, match=f"{key}: missing"):
        param_groups_from_hf(cfg, "config.json")


def test_an_unread_moe_intermediate_size_of_0_is_accepted_on_a_dense_config(tmp_path: Path) -> None:
    # a dense config (no num_experts: KimiLinearConfig.is_moe False) never reads moe_intermediate_size (the
    # parameter count alone, as Kimi-K3's text config reaches it)
    cfg = _config(moe_intermediate_size=0)
    for key in ("num_experts", "num_shared_experts", "num_experts_per_token"):
        del cfg[key]
    groups = {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}
    assert groups["dense_mlp"] == 1_719_926_784


def test_an_ignore_pattern_naming_kv_b_proj_keeps_it_bf16(tmp_path: Path) -> None:
    # compressed-tensors ignores a layer whose module name matches (vLLM compressed_tensors should_ignore_layer);
    # with q_proj, kv_b_proj and o_proj ignored by name, the MLA attention group is bf16 throughout: 2 B a
    # parameter (194,510,848 parameters, test_params_kimi_linear)
    k3 = json.loads((Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json").read_text())
    quant = {
        **k3["text_config"]["quantization_config"],
        "ignore": [r"re:.*self_attn\.(q_proj|kv_b_proj|o_proj)$", "re:.*lm_head.*"],
    }
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization_config=quant)))
    (att,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "attention"]
    assert att.params == 194_510_848
    assert att.bytes_per_param_num == 2 * att.bytes_per_param_den


def test_the_config_class_defaults_fill_what_the_config_leaves_out() -> None:
    # vLLM transformers_utils/configs/kimi_linear.py KimiLinearConfig: vocab_size=163840, num_shared_experts=0,
    # moe_layer_freq=1 (every layer from first_k_dense_replace on is MoE)
    cfg = _config()
    for key in ("vocab_size", "num_shared_experts", "moe_layer_freq"):
        del cfg[key]
    groups = {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}
    assert groups["embeddings"] == 2 * 163_840 * 2_304  # untied: embed_tokens + lm_head
    assert "shared_experts" not in groups
    assert groups["routed_experts"] == 47_110_422_528  # 26 MoE layers × 256 × 3 × 1,024 × 2,304


def test_rope_0_and_a_kda_last_layer_are_read() -> None:
    # rope 0 (a NoPE MLA, which KimiLinearConfig allows): q_proj 32 × 128 × 2,304 = 9,437,184, kv_b_proj
    # 32 × 256 × 512 = 4,194,304, o_proj 2,304 × 4,096 = 9,437,184 -> 7 MLA layers × 23,068,672 = 161,480,704
    groups = {g.name: g.params for g in param_groups_from_hf(_config(qk_rope_head_dim=0), "config.json").groups}
    assert groups["attention"] == 161_480_704
    # KDA on the last layer (1-based 27; layer 26 full instead): still 20 KDA layers × 38,924,320
    la = {**_config()["linear_attn_config"]}
    la["kda_layers"] = [n for n in la["kda_layers"] if n != 26] + [27]
    la["full_attn_layers"] = [4, 8, 12, 16, 20, 24, 26]
    groups = {g.name: g.params for g in param_groups_from_hf(_config(linear_attn_config=la), "config.json").groups}
    assert groups["linear_attention"] == 20 * 38_924_320
