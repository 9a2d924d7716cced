"""Kimi-K2.5 (``KimiK25ForConditionalGeneration``), from moonshotai/Kimi-K2.5's config.json (tests/data/hf/kimi-k2.5,
provenance in tests/data/hf/README.md): a DeepseekV3ForCausalLM ``text_config`` beside a MoonViT ``vision_config``
(kvplan.models.vlm).

What the engines build: SGLang ``models/kimi_k25.py`` ``KimiK25ForConditionalGeneration``:
``MoonViT3dPretrainedModel(config.vision_config)`` and ``K2VLMultiModalProjector(config.vision_config)`` (no
quant_config: bf16), ``DeepseekV3ForCausalLM(config.text_config, quant_config)``; ``configs/kimi_k25.py``
``KimiK25VisionConfig`` aliases ``num_hidden_layers`` / ``hidden_size`` to ``vt_num_hidden_layers`` /
``vt_hidden_size``, which ``adjust_mem_fraction_for_vlm`` reads.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import ConfigError
from kvplan.models.cache import MlaLatent
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

CONFIG = Path(__file__).resolve().parents[1] / "data" / "hf" / "kimi-k2.5" / "config.json"


@pytest.fixture(scope="module")
def arch() -> Any:
    return load_model(str(CONFIG))


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, data: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps(data), encoding="utf-8")
    return str(tmp_path / "config.json")


def _plan(arch: Any, *sets: str) -> Any:
    dep = load_deployment(None, [f"model={CONFIG}", *sets])
    return plan_pool(arch, replace(dep, kv_cache_dtype="auto"))


def test_the_text_config_is_kimi_k2s_mla(arch: Any) -> None:
    # text_config: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 (DeepseekV3Config), 262,144 positions
    assert arch.architecture == "KimiK25ForConditionalGeneration"
    assert (arch.num_layers, arch.max_position_embeddings) == (61, 262_144)
    assert {layer.caches for layer in arch.layers} == {(MlaLatent(kv_lora_rank=512, qk_rope_head_dim=64),)}


def test_moonvit_tower_and_projector_parameters(arch: Any) -> None:
    # vision_config: h = vt_hidden_size 1,152, m = vt_intermediate_size 4,304, 27 layers, patch 14, pos table
    # 64 × 64, merge 2 × 2, text_hidden_size 7,168 (SGLang kimi_k25.py):
    #   patch Conv2d(3, 1,152, 14) 3 × 14² × 1,152 + 1,152 = 678,528; pos_emb 64 × 64 × 1,152 = 4,718,592
    #   layer: norm0 + norm1 4 × 1,152, qkv 1,152 × 3,456 + 3,456, proj 1,152² + 1,152, fc0 1,152 × 4,304 + 4,304,
    #     fc1 4,304 × 1,152 + 1,152 = 15,239,504; × 27 = 411,466,608; final_layernorm 2,304
    #   projector: pre_norm 2,304, linear_1 4,608² + 4,608 = 21,238,272, linear_2 4,608 × 7,168 + 7,168 = 33,037,312
    #   -> 678,528 + 4,718,592 + 411,466,608 + 2,304 + 2,304 + 21,238,272 + 33,037,312 = 471,143,920
    vision = {g.name: g for g in arch.param_groups}["vision"]
    assert (vision.params, vision.bytes_per_param_num, vision.split) == (471_143_920, 2, "none")
    assert any("MoonViT" in a for a in arch.weights_assumptions)


def test_sglang_default_mem_fraction_is_the_logged_one(arch: Any) -> None:
    # tests/data/logs/field/sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log, ServerArgs (SGLang 0.5.8.post1,
    # 8 × MI355X, TP8): mem_fraction_static=0.8260405859375. The text model's default round((294,912 − (512 +
    # 16,384 × 1.5 + 512 × 2 + 1,024)) / 294,912, 3) = 0.908, × 0.95 × (1 − 0.1 × (27 × 1,152² / (24 × 1,024²) − 1))
    # = 0.908 × 0.95 × 0.9576171875 (adjust_mem_fraction_for_vlm, the tower's 27 layers × 1,152)
    assert arch.vision_tower == (27, 1152)
    p = _plan(arch, "engine=sglang", "engine_version=0.5.8.post1", "gpu=mi355x", "tp=8", "page_size=1",
              "attention_backend=triton")  # fmt: skip
    assert p.knob("mem_fraction_static").as_float() == 0.8260405859375


def test_sglang_on_b200_picks_trtllm_mla_as_for_deepseek_v3(arch: Any) -> None:
    # server_args _handle_deepseek_family (its registry lists KimiK25ForConditionalGeneration beside
    # DeepseekV3ForCausalLM): "Use trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM"
    p = _plan(arch, "engine=sglang", "gpu=b200", "tp=8")
    assert p.knob("attention_backend").value == "trtllm_mla"


def test_both_engines_plan_the_mla_cell(arch: Any) -> None:
    # one latent a token and layer: 61 × (512 + 64) × 2 B (bf16) = 70,272 B on each engine
    for engine in ("sglang", "vllm"):
        p = _plan(arch, f"engine={engine}", "gpu=h200", "tp=8")
        assert p.cell.total_bytes == 70_272
        assert p.logged_tokens > 0


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("text_config", None, "text_config: missing"),
        ("vision_config", None, "vision_config: missing"),
        ("vision_config", {"vt_hidden_size": 1152, "vt_intermediate_size": 4304}, "vt_num_hidden_layers"),
        ("vision_config", {**_data()["vision_config"], "merge_kernel_size": [2]}, "merge_kernel_size"),
        ("vision_config", {**_data()["vision_config"], "merge_kernel_size": [0, 2]}, "merge_kernel_size"),
        ("vision_config", {**_data()["vision_config"], "merge_kernel_size": [2, 17]}, "merge_kernel_size"),
        ("vision_config", {**_data()["vision_config"], "merge_kernel_size": [2.0, 2]}, "merge_kernel_size"),
        *[
            ("vision_config", {k: v for k, v in _data()["vision_config"].items() if k != key}, key)
            for key in ("patch_size", "init_pos_emb_height", "init_pos_emb_width", "merge_kernel_size")
        ],
    ],
)
def test_a_config_without_its_parts_is_refused_naming_the_key(tmp_path: Path, key: str, bad: Any, says: str) -> None:
    data = _data()
    if bad is None:
        del data[key]
    else:
        data[key] = bad
    with pytest.raises(ConfigError, match=says):
        load_model(_write(tmp_path, data))


def test_vllm_says_the_vision_encoders_profile_is_not_estimated(arch: Any) -> None:
    # vLLM's profile run also encodes dummy images (the multimodal encoder budget), which kvplan's non-KV model does
    # not price: the vLLM plan says so; SGLang sizes its pool by mem_fraction_static, scaled for the tower instead
    vllm = _plan(arch, "engine=vllm", "gpu=h200", "tp=8")
    assert any("vision encoder is not in the non-KV estimate" in n for n in vllm.notes)
    sglang = _plan(arch, "engine=sglang", "gpu=h200", "tp=8")
    assert not any("vision encoder" in n for n in sglang.notes)


def test_a_one_by_one_merger_projects_each_patch(tmp_path: Path) -> None:
    # merge_kernel_size [1, 1] (k = 1): linear_1 1,152 -> 1,152 (1,327,104 + 1,152) and linear_2 1,152 -> 7,168
    # (8,257,536 + 7,168) with the 2,304 of pre_norm: 9,595,264 for the projector against 54,277,888 at [2, 2], so
    # the tower and projector hold 471,143,920 − 44,682,624 = 426,461,296; the largest accepted kernel, [16, 16], loads
    data = _data()
    data["vision_config"]["merge_kernel_size"] = [1, 1]
    vision = {g.name: g for g in load_model(_write(tmp_path, data)).param_groups}["vision"]
    assert vision.params == 426_461_296
    data["vision_config"]["merge_kernel_size"] = [16, 16]
    assert load_model(_write(tmp_path, data)).vision_tower == (27, 1152)
