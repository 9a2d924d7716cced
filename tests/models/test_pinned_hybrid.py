"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/hybrid.py.

Each expected layer and field is derived in a comment from the engine's config reader (SGLang
``srt/configs/glm5_next.py`` ``Glm5NextTextConfig``, transformers / vLLM ``Qwen3NextConfig``, vLLM
``qwen3_next_mtp.py``, SGLang ``configs/kimi_linear.py``), never from kvplan's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError
from kvplan.models.cache import FullAttention, IndexerK, LinearState, MlaLatent
from kvplan.models.from_hf import load_model
from tests.models.test_hybrid_models import _glm53_flash_like, _qwen3_next_like


def test_qwen3_next_full_attention_interval_defaults_to_4(tmp_path: Path) -> None:
    # Qwen3NextConfig(full_attention_interval=4) builds layer_types "full_attention" iff (i + 1) % 4 == 0: on 8
    # layers, 3 and 7
    path = _qwen3_next_like(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    del cfg["full_attention_interval"]
    (path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(path))
    full = FullAttention(2, 256, 256, 16)
    assert [i for i, layer in enumerate(m.layers) if layer.caches == (full,)] == [3, 7]


def test_qwen3_next_builds_one_mtp_layer_when_the_config_names_none(tmp_path: Path) -> None:
    # vLLM qwen3_next_mtp.py: getattr(config, "num_nextn_predict_layers", 1); the released config names none
    assert load_model(str(_qwen3_next_like(tmp_path))).num_mtp_layers == 1


def test_kimi_linear_without_mtp_fields_has_no_mtp_layer(tmp_path: Path) -> None:
    # KimiLinearConfig(num_nextn_predict_layers=0) (vLLM transformers_utils/configs/kimi_linear.py): no MTP layer
    cfg = {"architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 4, "num_attention_heads": 32,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 1048576,
           "linear_attn_config": {"kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 32, "head_dim": 128,
                                  "short_conv_kernel_size": 4}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert m.num_mtp_layers == 0


def test_glm53_flash_kda_layer_numbers_stop_at_the_last_layer(tmp_path: Path) -> None:
    # 0-based (Glm5NextTextConfig.is_kda_layer: layer_idx in kda_layers): 8 layers are 0 .. 7
    la = {"kda_layers": [0, 1, 2, 8], "num_heads": 64, "head_dim": 128}
    with pytest.raises(ConfigError) as e:
        load_model(_glm53_flash_like(tmp_path, linear_attn_config=la))
    assert "linear_attn_config.kda_layers" in str(e.value)
    assert "expected a layer number from 0 to 7, got 8" in str(e.value)


def test_glm53_flash_state_from_the_text_defaults(tmp_path: Path) -> None:
    # no linear_attn_config and no linear_* fields: Glm5NextTextConfig linear_num_heads=64, linear_head_dim=128,
    # linear_conv_kernel_dim=4
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=None))
    assert m.layers[0].caches == (LinearState("kda", 64, 64, 128, 128, 4),)


def test_glm53_flash_index_kpool_defaults_to_one(tmp_path: Path) -> None:
    # no index_kpool: one key a token (vLLM tokens_per_state = index_kpool, 1 when the config names none)
    path = _glm53_flash_like(tmp_path)
    cfg = json.loads((Path(path) / "config.json").read_text())
    del cfg["text_config"]["index_kpool"]
    (Path(path) / "config.json").write_text(json.dumps(cfg))
    m = load_model(path)
    assert m.layers[3].caches == (MlaLatent(512, 0), IndexerK(128, 1))
    assert m.index_kpool == 1


def test_glm53_flash_mla_head_is_nope_plus_rope(tmp_path: Path) -> None:
    # DeepseekV2AttentionMLA: qk_head_dim = qk_nope_head_dim + qk_rope_head_dim = 256 (default) + 64
    m = load_model(_glm53_flash_like(tmp_path, qk_rope_head_dim=64))
    assert m.head_dim == 320
    assert m.layers[3].caches[0] == MlaLatent(512, 64)
