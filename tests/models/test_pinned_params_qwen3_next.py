"""Qwen3-Next's parameter groups (kvplan/models/params_qwen3_next.py), pinned where the mutation check moved a rule
the published config does not reach: a tied vocabulary and a model without a shared expert.

The config is the qwen3-next-80b-a3b preset's ``config:`` block (Qwen/Qwen3-Next-80B-A3B's config.json fields:
hidden 2,048, vocab 151,936, shared_expert_intermediate_size 512), with one field changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.presets import resolve_preset
from kvplan.models.weights import param_groups_from_hf


def _groups(**changes: Any) -> dict[str, int]:
    cfg = {**resolve_preset("models", "qwen3-next-80b-a3b").data["config"], **changes}
    return {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}


def test_tied_embeddings_are_one_vocab_matrix() -> None:
    # Qwen3NextForCausalLM ties lm_head to embed_tokens when tie_word_embeddings: 151,936 × 2,048 = 311,164,928
    assert _groups(tie_word_embeddings=True)["embeddings"] == 311_164_928
    assert _groups()["embeddings"] == 2 * 311_164_928


def test_no_shared_expert_when_its_width_is_0() -> None:
    # vLLM qwen3_next.py Qwen3NextSparseMoeBlock: a shared expert only when shared_expert_intermediate_size > 0
    # the routed experts stay: 48 MoE layers × 512 experts × 3 × 512 × 2,048 = 77,309,411,328
    groups = _groups(shared_expert_intermediate_size=0)
    assert "shared_experts" not in groups and groups["routed_experts"] == 77_309_411_328


def test_rope_parameters_without_a_factor_keep_the_default_quarter() -> None:
    # transformers Qwen3NextConfig: kwargs.setdefault("partial_rotary_factor", 0.25); a rope_parameters block
    # that does not name it changes nothing: the rotary cache is 262,144 positions × (256 × 0.25 = 64) × 2 B
    cfg = {**resolve_preset("models", "qwen3-next-80b-a3b").data["config"], "rope_parameters": {"rope_theta": 1e7}}
    del cfg["partial_rotary_factor"]
    (rotary,) = [g for g in param_groups_from_hf(cfg, "config.json").groups if g.name == "rotary_cache"]
    assert rotary.bytes_per_gpu(Split.of(tp=1)) == 33_554_432


def test_a_moe_config_without_its_expert_width_is_refused() -> None:
    # 512 experts and no moe_intermediate_size: kvplan names the key rather than count experts of any width
    # (transformers' Qwen3NextConfig would fill 512; the published configs all name it)
    cfg = dict(resolve_preset("models", "qwen3-next-80b-a3b").data["config"])
    del cfg["moe_intermediate_size"]
    with pytest.raises(ConfigError, match="moe_intermediate_size: missing"):
        param_groups_from_hf(cfg, "config.json")


def test_a_config_without_vocab_size_takes_transformers_default() -> None:
    # vLLM and SGLang read hf_config.vocab_size from transformers' config object, whose Qwen3NextConfig declares
    # vocab_size: int = 151936 (configuration_qwen3_next.py): embeddings + LM head 2 × 151,936 × 2,048 =
    # 622,329,856, as with the key written (was 0: no embeddings counted)
    cfg = dict(resolve_preset("models", "qwen3-next-80b-a3b").data["config"])
    del cfg["vocab_size"]
    (emb,) = [g for g in param_groups_from_hf(cfg, "config.json").groups if g.name == "embeddings"]
    assert emb.params == 2 * 151_936 * 2_048 == 622_329_856


def test_a_qwen3_5_config_without_vocab_size_takes_248320(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # transformers Qwen3_5TextConfig (configuration_qwen3_5.py): vocab_size: int = 248320; Qwen3.6-27B's
    # text_config without it: embeddings + head 2 × 248,320 × 5,120 = 2,542,796,800 (the published figure)
    import json
    from pathlib import Path

    from kvplan.models.from_hf import load_model

    src = Path(__file__).resolve().parents[1] / "data" / "hf" / "qwen3.6-27b" / "config.json"
    cfg = json.loads(src.read_text())
    del cfg["text_config"]["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    groups = {g.name: g.params for g in load_model(str(tmp_path)).param_groups}
    assert groups["embeddings"] == 2 * 248_320 * 5_120 == 2_542_796_800


def test_an_all_moe_config_may_write_intermediate_size_0() -> None:
    # every Qwen3-Next layer is sparse (decoder_sparse_step 1, no mlp_only_layers): vLLM's Qwen3NextDecoderLayer
    # builds Qwen3NextMLP(intermediate_size) only on a dense layer, so 0 is never read; transformers' strict
    # `intermediate_size: int` takes 0. The count is the published one without a dense group.
    groups = _groups(intermediate_size=0)
    assert "dense_mlp" not in groups and groups == _groups()


def _without(*keys: str, **changes: Any) -> dict[str, int]:
    cfg = {**resolve_preset("models", "qwen3-next-80b-a3b").data["config"], **changes}
    for k in keys:
        del cfg[k]
    return {g.name: g.params for g in param_groups_from_hf(cfg, "config.json").groups}


def test_without_layer_types_or_interval_every_4th_layer_is_full() -> None:
    # transformers Qwen3NextConfig.__post_init__: kwargs.pop("full_attention_interval", 4): of 48 layers, 12 full
    # (gated attention: 2 × 16 × 256 × 2,048 q+gate + 2,048 × 4,096 o = 25,165,824 a layer), 36 Gated DeltaNet
    assert _without("full_attention_interval")["attention"] == 12 * 25_165_824 == 301_989_888


def test_moe_layers_are_every_step_th_from_layer_step_minus_1() -> None:
    # vLLM qwen3_next.py Qwen3NextDecoderLayer: MoE iff layer_idx not in mlp_only_layers and (layer_idx + 1) %
    # decoder_sparse_step == 0: step 3 -> layers 2, 5, ..., 47 (16), less mlp_only_layers [2]: 15 MoE layers of
    # 512 experts × 3 × 512 × 2,048 = 1,610,612,736; 33 dense layers of 3 × 5,120 × 2,048 = 31,457,280
    groups = _without(decoder_sparse_step=3, mlp_only_layers=[2])
    assert groups["routed_experts"] == 15 * 1_610_612_736 == 24_159_191_040
    assert groups["dense_mlp"] == 33 * 31_457_280


def test_a_dense_config_may_write_moe_width_0_and_no_mtp_layers() -> None:
    # transformers' strict ints take 0; vLLM reads moe_intermediate_size only for a MoE layer (num_experts 0: none)
    # and builds range(num_nextn_predict_layers) MTP layers (qwen3_next_mtp.py): 0 -> no mtp group
    dense = _without(num_experts=0, moe_intermediate_size=0)
    assert "routed_experts" not in dense and dense["dense_mlp"] == 48 * 31_457_280
    assert "mtp" not in _without(num_nextn_predict_layers=0) and "mtp" in _without()


def test_a_second_mtp_layer_adds_one_decoder_layer_not_the_shared_norms() -> None:
    # the published mtp.* count, 1,650,471,424 (module comment) = one MTP decoder layer + mtp.fc (2,048 × 4,096 =
    # 8,388,608) + pre_fc_norm_embedding, pre_fc_norm_hidden, mtp.norm (3 × 2,048): the layer is 1,642,076,672
    # (q+gate 16,777,216, o 8,388,608, k/v 2,097,152, 512 experts 1,610,612,736, shared expert 3,145,728, gate and
    # shared gate 1,050,624, q/k norms and two layer norms 4,608). num_nextn_predict_layers 2: one more layer only
    assert _without()["mtp"] == 1_642_076_672 + 8_388_608 + 3 * 2_048 == 1_650_471_424
    assert _without(num_nextn_predict_layers=2)["mtp"] == 1_650_471_424 + 1_642_076_672


def test_a_config_without_max_position_embeddings_takes_32768() -> None:
    # transformers Qwen3NextConfig (and Qwen3_5TextConfig): max_position_embeddings: int = 32768; the rotary cache
    # both engines build (get_rope, rotary_dim 256 × 0.25 = 64) is 32,768 × 64 × 2 B = 4,194,304 B on each GPU
    cfg = dict(resolve_preset("models", "qwen3-next-80b-a3b").data["config"])
    del cfg["max_position_embeddings"]
    (rotary,) = [g for g in param_groups_from_hf(cfg, "config.json").groups if g.name == "rotary_cache"]
    assert rotary.bytes_per_gpu(Split.of(tp=1)) == 32_768 * 64 * 2 == 4_194_304
