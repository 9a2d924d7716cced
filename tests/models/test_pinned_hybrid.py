"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/hybrid.py.

Each expected layer and field is derived in a comment from the engine's config reader (SGLang
``srt/configs/glm5_next.py`` ``Glm5NextTextConfig``, transformers / vLLM ``Qwen3NextConfig``, vLLM
``qwen3_next_mtp.py``, SGLang ``configs/kimi_linear.py``), never from kvplan's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

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
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "max_position_embeddings": 1048576,
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


QWEN36 = Path(__file__).resolve().parents[1] / "data" / "hf" / "qwen3.6-27b" / "config.json"
V4_FLASH = Path(__file__).resolve().parents[1] / "data" / "hf" / "deepseek-v4-flash" / "config.json"


def test_qwen3_5_mtp_num_hidden_layers_0_is_no_mtp_layer(tmp_path: Path) -> None:
    # vLLM qwen3_5_mtp.py: getattr(config, "mtp_num_hidden_layers", 1) -> range(0) builds no MTP layer; the
    # published Qwen3.6-27B text_config names 1
    cfg = json.loads(QWEN36.read_text())
    assert load_model(str(QWEN36)).num_mtp_layers == 1
    cfg["text_config"]["mtp_num_hidden_layers"] = 0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).num_mtp_layers == 0


def test_deepseek_v4_with_two_kv_heads_is_refused_naming_the_count(tmp_path: Path) -> None:
    # DeepSeek-V4 attention (vLLM DeepseekV4MultiHeadLatentAttentionWrapper) has one 512-wide KV head a layer
    cfg = json.loads(V4_FLASH.read_text())
    cfg["num_key_value_heads"] = 2
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError) as e:
        load_model(str(tmp_path))
    assert "num_key_value_heads: 2: DeepSeek-V4 attention has one KV head" in str(e.value)


def test_glm53_flash_linear_attn_config_heads_fall_back_to_the_text_fields(tmp_path: Path) -> None:
    # Glm5NextTextConfig: linear_attn_config's num_heads / head_dim / short_conv_kernel_size default to the
    # text config's linear_num_heads (64), linear_head_dim (128), linear_conv_kernel_dim (4)
    la = {"kda_layers": [0, 1, 2, 4, 5, 6], "full_attn_layers": [3, 7]}
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=la))
    assert m.layers[0].caches == (LinearState("kda", 64, 64, 128, 128, 4),)
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=la, linear_num_heads=32, linear_head_dim=64))
    assert m.layers[0].caches == (LinearState("kda", 32, 32, 64, 64, 4),)


def test_glm53_flash_kv_lora_rank_defaults_to_512(tmp_path: Path) -> None:
    # Glm5NextTextConfig(kv_lora_rank=512): a config without it holds a 512-wide latent (no rope) on full layers
    path = _glm53_flash_like(tmp_path)
    cfg = json.loads((Path(path) / "config.json").read_text())
    del cfg["text_config"]["kv_lora_rank"]
    (Path(path) / "config.json").write_text(json.dumps(cfg))
    m = load_model(path)
    assert m.kv_lora_rank == 512 and m.layers[3].caches[0] == MlaLatent(512, 0)


@pytest.mark.parametrize("freq", [1, 2])
def test_glm53_flash_index_topk_freq_above_1_is_refused(tmp_path: Path, freq: int) -> None:
    # freq 1: every full layer owns its indexer (no sharing rule to read); 2 and up: shared indexer layers, whose
    # count over GLM-5.3-Flash's KDA layers kvplan does not read from the engines yet
    if freq == 1:
        assert load_model(_glm53_flash_like(tmp_path, index_topk_freq=1)).full_indexer_layers == 2
        return
    with pytest.raises(ConfigError, match=r"text_config\.index_topk_freq: GLM-5\.3-Flash's shared indexer layers"):
        load_model(_glm53_flash_like(tmp_path, index_topk_freq=freq))


def _kimi_linear_config(**changes: object) -> dict[str, object]:
    preset = Path(__file__).parents[2] / "kvplan" / "configs" / "models" / "kimi-linear-48b-a3b.yaml"
    cfg: dict[str, object] = yaml.safe_load(preset.read_text())["config"]
    return {**cfg, **changes}


def test_kimi_linear_mla_head_is_nope_plus_rope_and_rope_may_be_0(tmp_path: Path) -> None:
    # vLLM kimi_linear.py KimiMLAAttention: qk_head_dim = qk_nope_head_dim + qk_rope_head_dim = 128 + 64
    (tmp_path / "config.json").write_text(json.dumps(_kimi_linear_config()))
    assert load_model(str(tmp_path)).head_dim == 192
    # KimiLinearConfig takes any qk_rope_head_dim (its MLA is NoPE, mla_use_nope): 0 leaves a 512-wide latent row
    (tmp_path / "config.json").write_text(json.dumps(_kimi_linear_config(qk_rope_head_dim=0)))
    m = load_model(str(tmp_path))
    assert m.head_dim == 128 and m.layers[3].caches == (MlaLatent(512, 0),)


def test_glm53_flash_index_head_dim_defaults_to_128(tmp_path: Path) -> None:
    # Glm5NextTextConfig(index_head_dim=128): the pooled indexer key of a config without it is 128 fp8 + a 4 B
    # scale (SGLang NSATokenToKVPool: 132 B a key), one key per index_kpool 4 tokens
    path = _glm53_flash_like(tmp_path)
    cfg = json.loads((Path(path) / "config.json").read_text())
    del cfg["text_config"]["index_head_dim"]
    (Path(path) / "config.json").write_text(json.dumps(cfg))
    assert load_model(path).layers[3].caches == (MlaLatent(512, 0), IndexerK(128, 4))


def test_glm53_flash_indexer_flags_only_full_layers(tmp_path: Path) -> None:
    # without indexer_types every layer "owns" an indexer, but only the MLA (non-KDA) layers build one
    # (Glm5NextTextConfig.is_kda_layer: KDA layers have no attention): layers 3 and 7 of the 8
    m = load_model(_glm53_flash_like(tmp_path))
    assert m.indexer_full == (False, False, False, True) * 2


@pytest.mark.parametrize("key", ["qk_nope_head_dim", "v_head_dim"])
def test_kimi_linear_without_its_mla_head_dims_is_refused(tmp_path: Path, key: str) -> None:
    # vLLM transformers_utils/configs/kimi_linear.py KimiLinearConfig: qk_nope_head_dim=None, v_head_dim=None;
    # KimiMLAAttention adds qk_nope_head_dim + qk_rope_head_dim: no engine builds the MLA layer without them
    # (kvplan assumed 128 for each before)
    cfg = _kimi_linear_config()
    del cfg[key]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=f"{key}: missing"):
        load_model(str(tmp_path))


def test_a_qwen3_5_vision_config_without_num_hidden_layers_reads_sglang_s_24(tmp_path: Path) -> None:
    # SGLang 0.5.23 memory_hook.adjust_mem_fraction_for_vlm reads the vision tower by getattr(vision_config,
    # "num_hidden_layers", 24) and (…, "hidden_size", 1024): Qwen3.6-35B-A3B's vision_config writes depth 27 and
    # hidden_size 1,152, so SGLang sizes a tower of 24 layers × 1,152; without hidden_size, 24 × 1,024
    src = Path(__file__).parents[1] / "data" / "hf" / "qwen3.6-35b-a3b" / "config.json"
    cfg = json.loads(src.read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).vision_tower == (24, 1_152)
    del cfg["vision_config"]["hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).vision_tower == (24, 1_024)


def test_deepseek_v4_without_index_head_dim_is_refused(tmp_path: Path) -> None:
    # the ratio-4 layers' indexer key is index_head_dim fp8 + its scales (vLLM DeepseekV4Indexer); no engine
    # default for it was found, and every published V4 config names it (Flash and Pro: 128), so a config without
    # it is refused rather than planned on a guess (kvplan assumed 128)
    cfg = json.loads(V4_FLASH.read_text())
    del cfg["index_head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"index_head_dim"):
        load_model(str(tmp_path))


def test_a_deepseek_v4_compress_ratio_of_1_is_a_window_only_layer(tmp_path: Path) -> None:
    # vLLM DeepseekV4MultiHeadLatentAttentionWrapper builds a compressor only for compress_ratio > 1: a layer of
    # ratio 1 keeps the sliding window alone, as a ratio-0 layer does (V4-Flash's layers 0 and 1)
    cfg = json.loads(V4_FLASH.read_text())
    cfg["compress_ratios"][0] = 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert m.layers[0].caches == m.layers[1].caches


@pytest.mark.parametrize("key", ["index_n_heads", "index_topk"])
def test_deepseek_v4_indexer_heads_and_top_k_are_required(tmp_path: Path, key: str) -> None:
    # the ratio-4 layers' indexer reads index_n_heads and index_topk with no default (as the DSA models from_hf
    # refuses without them); kvplan read a missing one as 0, and a top-k or head count of 0 builds no indexer
    cfg = json.loads(V4_FLASH.read_text())
    for value in (None, 0):
        cfg[key] = value
        (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
        with pytest.raises(ConfigError, match=key):
            load_model(str(tmp_path))


def test_glm53_flash_indexer_only_with_a_top_k(tmp_path: Path) -> None:
    # SGLang configs/model_config.py is_deepseek_nsa: the DSA indexer only where index_topk is not None
    # (Glm5NextTextConfig's default None): without it the full layers hold the 512-wide latent alone
    path = _glm53_flash_like(tmp_path)
    cfg = json.loads((Path(path) / "config.json").read_text())
    del cfg["text_config"]["index_topk"]
    (Path(path) / "config.json").write_text(json.dumps(cfg))
    m = load_model(path)
    assert m.layers[3].caches == (MlaLatent(512, 0),) and m.index_topk == 0 and m.index_n_heads == 0
    # a top-k of 0 selects nothing: refused, as is a top-k without index_n_heads (Glm5NextTextConfig
    # index_n_heads=None; the indexer asserts it is set)
    with pytest.raises(ConfigError, match="index_topk"):
        load_model(_glm53_flash_like(tmp_path, index_topk=0))
    with pytest.raises(ConfigError, match="index_n_heads"):
        load_model(_glm53_flash_like(tmp_path, index_n_heads=None))


def test_glm53_flash_layer_types_pick_the_kda_layers(tmp_path: Path) -> None:
    # no linear_attn_config: Glm5NextTextConfig builds kda_layers from layer_types ("linear_attention"), one entry
    # a layer: full layers 0 and 4 here, not the every-fourth default (3 and 7)
    types = ["full_attention", "linear_attention", "linear_attention", "linear_attention"] * 2
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=None, layer_types=types))
    assert m.full_layer_ids == (0, 4)
    with pytest.raises(ConfigError, match="layer_types: has 7 entries for 8 layers"):
        load_model(_glm53_flash_like(tmp_path, linear_attn_config=None, layer_types=types[:7]))


def test_glm53_flash_qk_nope_head_dim_defaults_to_256(tmp_path: Path) -> None:
    # Glm5NextTextConfig(qk_nope_head_dim=256, qk_rope_head_dim=0, v_head_dim=256): the MLA head is 256 + 0
    m = load_model(_glm53_flash_like(tmp_path))
    assert (m.head_dim, m.v_head_dim) == (256, 256)


def test_glm53_flash_indexer_types_full_own_the_index_keys(tmp_path: Path) -> None:
    # indexer_types: a "full" layer computes and caches its own index keys, a "shared" one reuses the top-k of the
    # last full layer and caches none; of the two MLA layers (3, 7), 3 is full and 7 shared here
    types = ["full"] * 7 + ["shared"]
    m = load_model(_glm53_flash_like(tmp_path, indexer_types=types))
    assert m.layers[3].caches == (MlaLatent(512, 0), IndexerK(128, 4))
    assert m.layers[7].caches == (MlaLatent(512, 0),)


def test_deepseek_v4_has_one_kv_head() -> None:
    # vLLM DeepseekV4MultiHeadLatentAttentionWrapper: one 512-wide KV head a layer (the config's
    # num_key_value_heads 1, the only value the loader takes)
    m = load_model(str(V4_FLASH.parent))
    assert (m.num_kv_heads, m.head_dim) == (1, 512)


def test_query_heads_left_out_are_the_config_classes_defaults(tmp_path: Path) -> None:
    # Glm5NextTextConfig(num_attention_heads=64) (SGLang srt/configs/glm5_next.py, vLLM alike) and KimiLinearConfig(
    # num_attention_heads=32) (vLLM configs/kimi_linear.py, moonshotai configuration_kimi.py): the engines build that
    # many query heads when the config leaves the key out (kvplan read 0: a prefix hit's attention FLOPs of 0).
    # Without hidden_size the parameter count (which requires the key) is not taken, so the loader's default shows
    assert load_model(_glm53_flash_like(tmp_path, num_attention_heads=None)).num_attention_heads == 64
    kimi = {k: v for k, v in _kimi_linear_config().items() if k not in ("num_attention_heads", "hidden_size")}
    (tmp_path / "config.json").write_text(json.dumps(kimi))
    assert load_model(str(tmp_path)).num_attention_heads == 32


# --------------------------------------------------------------------------- whole-module run after seed 61207


def test_qwen3_next_num_nextn_predict_layers_0_is_no_mtp_layer(tmp_path: Path) -> None:
    # num_nextn_predict_layers 0 is a value (vLLM qwen3_next_mtp.py builds range(0) MTP layers), not refused
    assert load_model(str(_qwen3_next_like(tmp_path, num_nextn_predict_layers=0))).num_mtp_layers == 0


def test_a_flat_config_without_vision_config_has_no_tower(tmp_path: Path) -> None:
    # a Qwen3_5ForConditionalGeneration config written flat (no text_config, no vision_config): SGLang's
    # adjust_mem_fraction_for_vlm finds no vision_config to size, so no tower
    src = Path(__file__).parents[1] / "data" / "hf" / "qwen3.6-35b-a3b" / "config.json"
    cfg = json.loads(src.read_text())
    flat = {**cfg["text_config"], "architectures": cfg["architectures"]}
    (tmp_path / "config.json").write_text(json.dumps(flat))
    assert load_model(str(tmp_path)).vision_tower == ()


def test_kimi_linear_layers_named_twice_are_refused_even_when_the_count_adds_up(tmp_path: Path) -> None:
    # KimiLinearConfig.is_kda_layer reads kda_layers, full_attention_layer_ids the rest: a layer in both lists is
    # two kinds at once. 27 layers: kda 1-20 and full 20-26 name 27 entries but layer 20 twice and layer 27 never
    la = {"kda_layers": list(range(1, 21)), "full_attn_layers": list(range(20, 27)), "num_heads": 32, "head_dim": 128,
          "short_conv_kernel_size": 4}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(_kimi_linear_config(linear_attn_config=la)))
    with pytest.raises(ConfigError, match=r"must name each of the 27 layers once"):
        load_model(str(tmp_path))


def test_glm53_flash_all_kda_is_refused_naming_the_key_it_came_from(tmp_path: Path) -> None:
    # every layer KDA leaves no attention layer: the refusal names linear_attn_config.kda_layers when the list came
    # from there, layer_types when it came from those
    la = {"kda_layers": list(range(8)), "full_attn_layers": [], "num_heads": 64, "head_dim": 128,
          "short_conv_kernel_size": 4}  # fmt: skip
    with pytest.raises(ConfigError, match=r"text_config\.linear_attn_config\.kda_layers: leaves no attention layer"):
        load_model(_glm53_flash_like(tmp_path, linear_attn_config=la))
    with pytest.raises(ConfigError, match=r"text_config\.layer_types: leaves no attention layer"):
        load_model(_glm53_flash_like(tmp_path, linear_attn_config=None, layer_types=["linear_attention"] * 8))


def test_glm53_flash_rope_left_out_is_0(tmp_path: Path) -> None:
    # Glm5NextTextConfig(qk_rope_head_dim=0) (SGLang srt/configs/glm5_next.py): no rope half, a 512-wide latent
    m = load_model(_glm53_flash_like(tmp_path, qk_rope_head_dim=None))
    assert m.qk_rope_head_dim == 0 and m.layers[3].caches[0] == MlaLatent(512, 0)
