"""DeepSeek-VL2's nested language model and vision tower (kvplan/models/vlm.py), pinned where the mutation check
moved a default or a term that deepseek-ai's config.json does not reach.

The defaults are SGLang's ``configs/deepseekvl2.py`` config classes (vLLM's ``configs/deepseek_vl2.py`` copies
them): ``DeepseekVL2VisionEncoderConfig`` (image_size 384, patch_size 16, width 1024, layers 24, mlp_ratio 4),
``DeepseekVL2MlpProjectorConfig`` (downsample_mlp_gelu, input_dim 1152, n_embed 2048, depth 2, mlp_ratio 1,
downsample_ratio 2) and ``DeepseekV2Config.__init__`` (q_lora_rank 1536). The parameter counts follow the modules
the engines build: timm ``VisionTransformer`` (no class token, ``global_pool="map"``: ``AttentionPoolLatent``) and
``MlpProjector`` (``models/deepseek_vl2.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.models.from_hf import load_model

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
VL2 = HF / "deepseek-vl2" / "config.json"


def _load(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_model(str(path))


def _groups(arch: Any) -> dict[str, int]:
    return {g.name: g.params for g in arch.param_groups if g.params}


def _vl2() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VL2.read_text(encoding="utf-8"))
    return data


def test_vision_tower_and_projector_from_the_config_classes_defaults(tmp_path: Path) -> None:
    # empty vision_config / projector_config: every field from the config classes' defaults.
    # tower (w 1,024, mlp 4 × 1,024 = 4,096, 24 blocks, patch 16, grid 384 // 16 = 24):
    #   patch_embed Conv2d(3, 1,024, 16, 16) 3 × 16² × 1,024 + 1,024 = 787,456; pos_embed 24² × 1,024 = 589,824
    #   block: norm1 + norm2 2 × 2,048, qkv 1,024 × 3,072 + 3,072, proj 1,024² + 1,024, fc1 1,024 × 4,096 + 4,096,
    #     fc2 4,096 × 1,024 + 1,024 = 12,596,224; × 24 = 302,309,376; final norm 2,048
    #   attn_pool: latent 1,024, q 1,024² + 1,024, kv 1,024 × 2,048 + 2,048, proj 1,024² + 1,024, norm 2,048,
    #     mlp 4,194,304 + 4,096 + 4,194,304 + 1,024 = 12,595,200
    #   -> 787,456 + 589,824 + 302,309,376 + 2,048 + 12,595,200 = 316,283,904
    # projector (depth 2): Linear(1,152 × 2², 2,048) 9,437,184 + 2,048, GELU, Linear(2,048, 2,048) 4,194,304
    #   + 2,048 = 13,635,584; image_newline + view_seperator 2 × 2,048 = 4,096
    data = {**_vl2(), "vision_config": {}, "projector_config": {}}
    assert _groups(_load(tmp_path, data))["vision"] == 316_283_904 + 13_635_584 + 4_096


def test_projector_of_three_layers_adds_a_hidden_to_hidden_linear(tmp_path: Path) -> None:
    # MlpProjector downsample_mlp_gelu: ``for _ in range(1, mlp_depth - 1)`` adds Linear(n_embed × mlp_ratio,
    # n_embed × mlp_ratio): depth 3 with the published n_embed 2,560 adds 2,560² + 2,560 = 6,556,160 to depth 2
    data = _vl2()
    two = _groups(_load(tmp_path, data))["vision"]
    data["projector_config"] = {**data["projector_config"], "depth": 3}
    assert _groups(_load(tmp_path, data))["vision"] - two == 6_556_160


def test_language_config_without_q_lora_rank_gets_1536(tmp_path: Path) -> None:
    # DeepseekV2Config.__init__ q_lora_rank=1536 (the published config writes null: q_proj full, 31,883,264 a
    # layer in test_deepseek_vl2). Left out: q_a_proj 2,560 × 1,536 = 3,932,160, q_b_proj 1,536 × 32 × (128 + 64)
    # = 9,437,184, kv_a 2,560 × (512 + 64) = 1,474,560, kv_b 512 × 32 × (128 + 128) = 4,194,304, o_proj 32 × 128 ×
    # 2,560 = 10,485,760 -> 29,523,968 a layer (norms left out, as there) × 30 = 885,719,040
    data = _vl2()
    data["language_config"] = {k: v for k, v in data["language_config"].items() if k != "q_lora_rank"}
    assert _groups(_load(tmp_path, data))["attention"] == 885_719_040


def test_a_config_without_architectures_is_not_taken_for_deepseek_vl2(tmp_path: Path) -> None:
    # only model_type deepseek_vl_v2 marks the wrapper when architectures is absent: llama-3.1-8b's config without
    # it stays a full-attention decoder (32 layers, 8 KV heads × 128: 2 × 8 × 128 × 2 B = 4,096 B a token and
    # layer in bf16), not "language_config: missing"
    data = json.loads((HF / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8"))
    del data["architectures"]
    arch = _load(tmp_path, data)
    assert arch.num_layers == 32
    assert arch.layers[0].caches[0].bytes_per_token(1, "bf16") == 4_096


def test_vision_mlp_ratio_of_one(tmp_path: Path) -> None:
    # timm Mlp hidden_features = int(width × mlp_ratio): mlp_ratio 1 gives 1,024 (a ratio of 1 is a real ViT width,
    # not the 4 × width fall-back). block: norms 4,096, qkv 3,148,800, proj, fc1, fc2 1,049,600 each = 6,301,696;
    # × 24 = 151,240,704; attn_pool: latent 1,024, q 1,049,600, kv 2,099,200, proj 1,049,600, norm 2,048, mlp
    # 2 × 1,049,600 = 6,300,672; + patch_embed 787,456, pos_embed 589,824, final norm 2,048 = 158,920,704;
    # + the default projector 13,635,584 and the two separators 4,096
    data = {**_vl2(), "vision_config": {"mlp_ratio": 1}, "projector_config": {}}
    assert _groups(_load(tmp_path, data))["vision"] == 158_920_704 + 13_635_584 + 4_096
