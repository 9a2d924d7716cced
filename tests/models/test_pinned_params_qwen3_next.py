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
