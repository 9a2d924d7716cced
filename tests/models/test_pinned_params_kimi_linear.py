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


@pytest.mark.parametrize("key", ["num_experts", "routed_expert_hidden_size", "attn_res_block_size"])
def test_a_moe_of_no_experts_or_no_width_is_refused(key: str) -> None:
    # SGLang configs/kimi_linear.py KimiLinearConfig.is_moe: `num_experts is not None`, and models/kimi_k3.py
    # KimiK3MoE.use_latent_moe: `routed_expert_hidden_size is not None`: a 0 is not "no MoE" / "no latent" to
    # the engines but a MoE of 0 experts / experts 0 wide, which neither builds (kvplan read 0 as absent);
    # likewise vLLM models/kimi_k3 KimiLinearModel: use_attn_res = `attn_res_block_size is not None`, then
    # cdiv(end_layer, attn_res_block_size), a division by 0
    with pytest.raises(ConfigError, match=f"{key}: expected an integer from 1 to"):
        param_groups_from_hf(_config(**{key: 0}), "config.json")


def test_one_expert_and_every_layer_moe_are_read() -> None:
    # one routed expert: 26 MoE layers × 1 × 3 × 1,024 × 2,304 = 184,025,088; the router gate.weight (1 × 2,304)
    # + e_score_correction_bias (1) a layer: 26 × 2,305 = 59,930
    groups = {g.name: g.params for g in param_groups_from_hf(_config(num_experts=1), "config.json").groups}
    assert (groups["routed_experts"], groups["router"]) == (184_025_088, 59_930)
    # first_k_dense_replace 0 (KimiLinearConfig's own default): KimiDecoderLayer's `layer_idx >=
    # first_k_dense_replace` holds from layer 0, so all 27 layers are MoE: 27 × 256 × 3 × 1,024 × 2,304 =
    # 48,922,361,856, and no dense MLP is built
    groups = {g.name: g.params for g in param_groups_from_hf(_config(first_k_dense_replace=0), "config.json").groups}
    assert groups["routed_experts"] == 48_922_361_856 and "dense_mlp" not in groups


def test_an_ignore_pattern_naming_f_a_proj_keeps_it_bf16(tmp_path: Path) -> None:
    # compressed-tensors matches an ignore entry against the module's full name (vLLM compressed_tensors
    # should_ignore_layer); the replicated attention group is KDA's f_a_proj and g_a_proj (20 layers × 2 × 128 ×
    # 2,304 = 11,796,480) and MLA's kv_a_proj_with_mqa (7 × 576 × 2,304 = 9,289,728): with all three named, the
    # group is bf16 throughout, 2 B a parameter over 21,086,208
    k3 = json.loads((Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json").read_text())
    quant = {
        **k3["text_config"]["quantization_config"],
        "ignore": [r"re:.*self_attn\.(f_a_proj|g_a_proj|kv_a_proj_with_mqa)$", "re:.*lm_head.*"],
    }
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization_config=quant)))
    (rep,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "replicated_attention"]
    assert rep.params == 21_086_208
    assert rep.bytes_per_param_num == 2 * rep.bytes_per_param_den
    # with q_lora_rank 1,536 (Kimi-K3's) each MLA layer adds the replicated q_a_proj (1,536 × 2,304): 7 ×
    # 3,538,944 more = 45,858,816, bf16 only when q_a_proj is named too
    quant["ignore"] = [r"re:.*self_attn\.(f_a_proj|g_a_proj|kv_a_proj_with_mqa|q_a_proj)$", "re:.*lm_head.*"]
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization_config=quant, q_lora_rank=1_536)))
    (rep,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "replicated_attention"]
    assert rep.params == 45_858_816
    assert rep.bytes_per_param_num == 2 * rep.bytes_per_param_den


def test_an_ignore_pattern_naming_the_kda_projections_keeps_them_bf16(tmp_path: Path) -> None:
    # KDA's sharded projections q/k/v_proj, b_proj, f_b_proj, g_b_proj and o_proj, all named: the
    # linear_attention group (20 layers × 38,924,320 = 778,486,400, its convs, dt_bias and A_log counted in the
    # checkpoint dtype) is bf16 throughout; o_proj left out would be quantized
    k3 = json.loads((Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json").read_text())
    named = r"re:.*self_attn\.(q_proj|k_proj|v_proj|b_proj|f_b_proj|g_b_proj|o_proj)$"
    quant = {**k3["text_config"]["quantization_config"], "ignore": [named, "re:.*lm_head.*"]}
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization_config=quant)))
    (lin,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "linear_attention"]
    assert lin.params == 778_486_400
    assert lin.bytes_per_param_num == 2 * lin.bytes_per_param_den


def test_the_latent_moe_norm_only_with_latent_moe_use_norm() -> None:
    # K3's latent MoE at routed_expert_hidden_size 1,024 (KimiK3MoE): routed_expert_down_proj (1,024 × 2,304) and
    # routed_expert_up_proj (2,304 × 1,024) a MoE layer: 26 × 4,718,592 = 122,683,392; the latent RMSNorm (1,024)
    # only when latent_moe_use_norm (KimiLinearConfig default False): 26 × 1,024 more = 122,710,016
    for norm, want in ((False, 122_683_392), (True, 122_710_016)):
        cfg = _config(routed_expert_hidden_size=1_024, latent_moe_use_norm=norm)
        groups = {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}
        assert groups["latent_moe"] == want


def test_intermediate_size_0_is_unread_when_every_layer_is_moe() -> None:
    # first_k_dense_replace 0 and moe_layer_freq 1: no layer builds KimiMLP (KimiDecoderLayer), so the engines
    # never read intermediate_size; 27 MoE layers × 256 × 3 × 1,024 × 2,304 = 48,922,361,856
    cfg = _config(first_k_dense_replace=0, intermediate_size=0)
    groups = {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}
    assert groups["routed_experts"] == 48_922_361_856 and "dense_mlp" not in groups


def test_the_short_conv_kernel_size_is_required(tmp_path: Path) -> None:
    # SGLang configs/kimi_linear.py KimiLinearConfig.mamba2_cache_params and vLLM's KDA layer read
    # linear_attn_config["short_conv_kernel_size"] by subscript, no default: a config without it does not load
    # there (kvplan assumed 4), neither in the parameter count nor in the state's shape (models/hybrid.py)
    la = {k: v for k, v in _config()["linear_attn_config"].items() if k != "short_conv_kernel_size"}
    with pytest.raises(ConfigError, match=r"short_conv_kernel_size: missing"):
        param_groups_from_hf(_config(linear_attn_config=la), "config.json")
    (tmp_path / "config.json").write_text(json.dumps(_config(linear_attn_config=la)))
    with pytest.raises(ConfigError, match=r"short_conv_kernel_size"):
        load_model(str(tmp_path))


def test_an_ignore_pattern_naming_q_b_proj_keeps_it_bf16(tmp_path: Path) -> None:
    # with q_lora_rank 1,536 (Kimi-K3's) the MLA query is q_b_proj: 32 × (128 + 64) × 1,536 = 9,437,184, beside
    # kv_b_proj 32 × 256 × 512 = 4,194,304 and o_proj 2,304 × 4,096 = 9,437,184: 7 layers × 23,068,672 =
    # 161,480,704, bf16 throughout when the ignore list names all three
    k3 = json.loads((Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json").read_text())
    named = r"re:.*self_attn\.(q_b_proj|kv_b_proj|o_proj)$"
    quant = {**k3["text_config"]["quantization_config"], "ignore": [named, "re:.*lm_head.*"]}
    (tmp_path / "config.json").write_text(json.dumps(_config(quantization_config=quant, q_lora_rank=1_536)))
    (att,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "attention"]
    assert att.params == 161_480_704
    assert att.bytes_per_param_num == 2 * att.bytes_per_param_den


def _k3_quant(named: str) -> dict[str, Any]:
    k3 = json.loads((Path(__file__).parents[1] / "data" / "hf" / "kimi-k3" / "config.json").read_text())
    return {**k3["text_config"]["quantization_config"], "ignore": [named, "re:.*lm_head.*"]}


def test_a_full_rank_kda_gate_is_g_proj_and_its_name_is_read(tmp_path: Path) -> None:
    # use_full_rank_gate (vLLM / SGLang kda.py KimiDeltaAttention): g_proj (proj 4,096 × h 2,304 = 9,437,184) in
    # place of g_a_proj + g_b_proj; the sharded KDA layer: q/k/v 3 × 4,096 × 2,304 = 28,311,552, b_proj 32 ×
    # 2,304 = 73,728, f_b_proj 4,096 × 128 = 524,288, g_proj 9,437,184, o_proj 2,304 × 4,096 = 9,437,184, convs
    # 3 × 4,096 × 4 + dt_bias 4,096 + A_log 32 = 53,280: 47,837,216 a layer, × 20 = 956,744,320; bf16 throughout
    # only when the compressed-tensors ignore list (should_ignore_layer: the module's full name) names g_proj too
    named = r"re:.*self_attn\.(q_proj|k_proj|v_proj|b_proj|f_b_proj|g_proj|o_proj)$"
    la = {**_config()["linear_attn_config"], "use_full_rank_gate": True}
    (tmp_path / "config.json").write_text(
        json.dumps(_config(quantization_config=_k3_quant(named), linear_attn_config=la))
    )
    (lin,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "linear_attention"]
    assert lin.params == 956_744_320
    assert lin.bytes_per_param_num == 2 * lin.bytes_per_param_den


def test_the_mla_output_gate_is_g_proj_and_its_name_is_read(tmp_path: Path) -> None:
    # mla_use_output_gate (KimiMLAAttention): g_proj, heads × v_head_dim = 32 × 128 = 4,096 rows of h 2,304 =
    # 9,437,184 a layer; the MLA attention group of the 7 layers: 194,510,848 + 7 × 9,437,184 = 260,571,136, bf16
    # throughout when the ignore list names q_proj, kv_b_proj, o_proj and g_proj
    named = r"re:.*self_attn\.(q_proj|kv_b_proj|o_proj|g_proj)$"
    cfg = _config(quantization_config=_k3_quant(named), mla_use_output_gate=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (att,) = [g for g in load_model(str(tmp_path)).param_groups if g.name == "attention"]
    assert att.params == 260_571_136
    assert att.bytes_per_param_num == 2 * att.bytes_per_param_den


def test_a_moe_without_its_widths_is_refused_not_read_as_1() -> None:
    # KimiLinearConfig (vLLM transformers_utils/configs/kimi_linear.py) leaves moe_intermediate_size None: KimiMoE
    # cannot build experts of no width, so a MoE config without it is refused (not experts 1 wide)
    cfg = _config()
    del cfg["moe_intermediate_size"]
    with pytest.raises(ConfigError, match=r"moe_intermediate_size: missing \(required for a MoE model\)"):
        param_groups_from_hf(cfg, "config.json")
    # first_k_dense_replace 1: layer 0 is KimiMLP of intermediate_size; without the key the dense layer's width is
    # not the config's to read (the class default 11,008 belongs to no Kimi checkpoint): refused, never 1 wide
    cfg = _config()
    del cfg["intermediate_size"]
    with pytest.raises(ConfigError, match=r"intermediate_size: missing \(required for the dense MLP layers\)"):
        param_groups_from_hf(cfg, "config.json")


def test_a_linear_attn_config_without_kda_layers_is_refused_in_one_line() -> None:
    # KimiLinearConfig.__init__ (vLLM transformers_utils/configs/kimi_linear.py): `assert
    # linear_attn_config["kda_layers"] is not None`: a linear_attn_config without the list does not load
    la = {k: v for k, v in _config()["linear_attn_config"].items() if k != "kda_layers"}
    with pytest.raises(ConfigError, match=r"kda_layers: expected a list of layer numbers \(1-based\)"):
        param_groups_from_hf(_config(linear_attn_config=la), "config.json")


def test_the_config_class_defaults_of_q_lora_rank_and_first_k_dense_replace() -> None:
    # KimiLinearConfig(q_lora_rank=None, first_k_dense_replace=0) (vLLM transformers_utils/configs/kimi_linear.py)
    cfg = _config()
    del cfg["q_lora_rank"], cfg["first_k_dense_replace"]
    groups = {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}
    # no q_lora_rank: the MLA query is q_proj (32 × 192 × 2,304), no q_a_proj / q_b_proj: the attention group is
    # the preset's (q_lora_rank null) 194,510,848, and the replicated group holds no q_a_proj (21,086,208)
    assert (groups["attention"], groups["replicated_attention"]) == (194_510_848, 21_086_208)
    # first_k_dense_replace 0: KimiDecoderLayer's `layer_idx >= 0` makes all 27 layers MoE: 27 × 256 × 3 × 1,024 ×
    # 2,304 = 48,922,361,856 routed parameters and no dense MLP
    assert groups["routed_experts"] == 48_922_361_856 and "dense_mlp" not in groups


def test_a_q_lora_rank_of_0_is_refused_and_1_is_a_rank_1_query() -> None:
    # the engines build q_a_proj / q_b_proj where `q_lora_rank is not None` (vLLM DeepseekV2Attention): 0 is not
    # "no q_lora" there but a rank-0 projection no engine serves (kvplan read it as q_proj): refused
    with pytest.raises(ConfigError, match=r"q_lora_rank: expected an integer from 1 to"):
        param_groups_from_hf(_config(q_lora_rank=0), "config.json")
    # rank 1: q_b_proj 32 × 192 × 1 = 6,144 + kv_b_proj 4,194,304 + o_proj 9,437,184 = 13,637,632 a layer, × 7 =
    # 95,463,424; the replicated q_a_proj 1 × 2,304 a layer: 21,086,208 + 7 × 2,304 = 21,102,336
    groups = {g.name: g.params for g in param_groups_from_hf(_config(q_lora_rank=1), "config.json").groups}
    assert (groups["attention"], groups["replicated_attention"]) == (95_463_424, 21_102_336)
