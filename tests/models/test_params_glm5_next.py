"""GLM-5.3-Flash's parameter count (kvplan.models.params_glm5_next) and the glm-5.3-flash preset.

Every expected value is derived in a comment from the preset's fields (kvplan/configs/models/glm-5.3-flash.yaml):
h 4096; KDA 64 heads × 128 (p = 8,192), kernel 4, on the 34 layers with i % 4 != 3; MLA on the 11 others (3, 7, …,
43): 64 heads, q_lora 1536, kv_lora 512, nope 256, rope 0, v 256; indexer 32 heads × 128, kpool 4; mHC hc_mult 4;
3 dense layers of 12,288, 42 MoE layers of 288 routed + 1 shared expert of 2,048; vocab 154,880 untied; one MTP
layer; a vision tower of 24 blocks (1024 wide, MLP 4096, 16 heads, patch 14, temporal 2, merge 2, out 4096,
projection MLP 10,240).

The published figure: patrickbdevaney/glm-5.3-reap ``stages/s00_smoke.py`` records, "from
research/glm53_tensors.json (all 62 shard headers, read 2026-08-27)" of the zai-org/GLM-5.3-Flash FP8 checkpoint,
``total_params`` 321,342,220,638 and ``routed_expert_params`` 311,672,586,240: element counts of every tensor,
the fp8 block scales (``weight_scale_inv``, one fp32 per 128 × 128 block) included. kvplan reproduces both exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.cache import IndexerK, LinearState, MlaLatent
from kvplan.models.from_hf import load_model

PUBLISHED_TOTAL_ELEMENTS = 321_342_220_638  # glm-5.3-reap s00_smoke.py EXPECT["total_params"] (shard headers)
PUBLISHED_ROUTED_ELEMENTS = 311_672_586_240  # EXPECT["routed_expert_params"]: 43 layers' experts and their scales


@pytest.fixture(scope="module")
def flash():  # type: ignore[no-untyped-def]
    return load_model("glm-5.3-flash")


def _groups(arch) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {g.name: g.params for g in arch.param_groups}


def test_preset_layers(flash) -> None:  # type: ignore[no-untyped-def]
    kda = [layer.index for layer in flash.layers if isinstance(layer.caches[0], LinearState)]
    mla = [layer.index for layer in flash.layers if isinstance(layer.caches[0], MlaLatent)]
    assert len(kda) == 34 and mla == list(range(3, 45, 4))  # 45 layers: 11 with i % 4 == 3, the 34 others KDA
    assert all(isinstance(flash.layers[i].caches[1], IndexerK) for i in mla)  # the pooled indexer on every MLA layer
    assert flash.index_kpool == 4 and flash.qk_rope_head_dim == 0 and flash.kv_lora_rank == 512
    assert flash.num_mtp_layers == 1 and flash.max_position_embeddings == 1_048_576


def test_parameter_groups_derived(flash) -> None:  # type: ignore[no-untyped-def]
    g = _groups(flash)
    # KDA, sharded: q, k, v 3 × 8,192 × 4,096 = 100,663,296; b 64 × 4,096 = 262,144; f_b, g_b 2 × 8,192 × 128 =
    # 2,097,152; o 4,096 × 8,192 = 33,554,432; q/k/v_conv1d 3 × 8,192 × 4 = 98,304, A_log 64, dt_bias 8,192
    # → 136,683,584 a layer × 34 = 4,647,241,856
    assert g["linear_attention"] == 34 * (100_663_296 + 262_144 + 2_097_152 + 33_554_432 + 98_304 + 64 + 8_192)
    assert g["linear_attention"] == 4_647_241_856
    # f_a, g_a (ReplicatedLinear) 2 × 128 × 4,096 = 1,048,576 × 34
    assert g["linear_attention_replicated"] == 35_651_584
    # mHC: 2 × ((2 + 4) × 4 × (4 × 4,096) + 24 + 3) = 2 × 393,243 = 786,486 a layer × 45
    assert g["mhc"] == 35_391_870
    # MLA, attention TP: q_b 16,384 × 1,536 = 25,165,824 + kv_b 32,768 × 512 = 16,777,216 + o 4,096 × 16,384 =
    # 67,108,864 → 109,051,904 × 11; replicated q_a 1,536 × 4,096 + kv_a (512 + 0) × 4,096 = 8,388,608 × 11
    assert g["attention"] == 11 * 109_051_904 == 1_199_570_944
    assert g["attention_latent"] == 11 * 8_388_608 == 92_274_688
    # indexer: wq_b 4,096 × 1,536 = 6,291,456 + wk 128 × 4,096 = 524,288 + weights_proj 32 × 4,096 = 131,072 +
    # compress gate 128 × 4,096 = 524,288 + compress ape 4 × 128 = 512 + k_norm 2 × 128 = 256 → 7,471,872 × 11
    assert g["indexer"] == 11 * 7_471_872 == 82_190_592
    # dense 3 × 12,288 × 4,096 = 150,994,944 × 3 layers; routed 288 × 3 × 2,048 × 4,096 = 7,247,757,312 × 42;
    # shared 25,165,824 × 42; router 288 × 4,096 + 288 (e_score_correction_bias) = 1,179,936 × 42
    assert g["dense_mlp"] == 452_984_832
    assert g["routed_experts"] == 42 * 7_247_757_312 == 304_405_807_104
    assert g["shared_experts"] == 42 * 25_165_824 == 1_056_964_608
    assert g["router"] == 42 * 1_179_936 == 49_557_312
    assert g["embeddings"] == 2 * 154_880 * 4_096 == 1_268_776_960
    # norms: final 4,096 + 45 × 2 × 4,096 + 34 KDA o_norm × 128 + 11 × (1,536 + 512) q_a / kv_a layernorms
    assert g["norms"] == 4_096 + 368_640 + 4_352 + 22_528 == 399_616
    # MTP: MLA 8,388,608 + 109,051,904 + indexer 7,471,872 + routed 7,247,757,312 + shared 25,165,824 + router
    # 1,179,936 + eh_proj 4,096 × 8,192 = 33,554,432 + norms 1,536 + 512 + 5 × 4,096 = 22,528
    assert g["mtp"] == 7_432_592_416
    # vision: a block qkv 3,072 × 1,024 + proj 1,024² + gate, up 2 × 4,096 × 1,024 + down 1,024 × 4,096 + biases
    # (3,072 + 1,024 + 2 × 4,096 + 1,024) + q/k norms 2 × 64 + norm1, norm2 2 × 1,024 = 16,792,704 × 24
    # = 403,024,896; patch embed 1,024 × 3 × 2 × 14 × 14 + 1,024 = 1,205,248; post layernorm 1,024; downsample
    # 4,096 × 1,024 × 2 × 2 + 4,096 = 16,781,312; merger proj 4,096² + gate, up 2 × 10,240 × 4,096 + down
    # 4,096 × 10,240 + LayerNorm 2 × 4,096 = 142,614,528
    assert g["vision"] == 403_024_896 + 1_205_248 + 1_024 + 16_781_312 + 142_614_528 == 563_627_008
    assert flash.total_params == sum(g.values()) == 321_323_031_390


def test_matches_the_checkpoints_shard_headers(flash) -> None:  # type: ignore[no-untyped-def]
    # The shard headers count the fp8 block scales as elements too: one per 128 × 128 block of each fp8 matrix.
    # MLA (11 layers + MTP): q_a 12 × 32 + q_b 128 × 12 + kv_a 4 × 32 + o 32 × 128 = 6,144 → 73,728;
    # dense 3 × (96 × 32) × 3 layers = 27,648; experts 3 × 16 × 32 = 1,536 each × (288 + 1 shared) × 43 = 19,087,872
    scales = 12 * 6_144 + 27_648 + 1_536 * 289 * 43
    assert scales == 19_189_248
    assert flash.total_params + scales == PUBLISHED_TOTAL_ELEMENTS  # exact: error 0 of 321,342,220,638
    # the routed experts of the 42 MoE layers and the MTP layer, with their scales: 43 × 288 × (25,165,824 + 1,536)
    routed = _groups(flash)["routed_experts"] + 7_247_757_312 + 43 * 288 * 1_536
    assert routed == PUBLISHED_ROUTED_ELEMENTS


def test_checkpoint_bytes_and_the_fp8_resolution(flash) -> None:  # type: ignore[no-untyped-def]
    one = Split(tp=1, attention=1, experts=1)
    by = {g.name: g.bytes_per_gpu(one) for g in flash.param_groups}
    # fp8 (1 B + 4 B per 16,384 values): routed 304,405,807,104 × 16,388 / 16,384 = 304,480,124,928
    assert by["routed_experts"] == 304_405_807_104 + 304_405_807_104 // 16_384 * 4 == 304_480_124_928
    # the MLA group mixes fp8 q_b / o (92,274,688 a layer: + 22,528 B of scales) with bf16 kv_b (the checkpoint's
    # tensor listing has no fp8 kv_b_proj): (92,274,688 + 22,528 + 2 × 16,777,216) × 11
    assert by["attention"] == (92_274_688 + 22_528 + 33_554_432) * 11 == 1_384_368_128
    # KDA projections and gates, the indexer and the vision tower stay bf16 (modules_to_not_convert)
    for name in ("linear_attention_replicated", "vision", "embeddings"):
        assert by[name] == 2 * _groups(flash)[name]
    # fp32 (4 B): the mHC mixes, KDA conv / A_log / dt_bias (106,560 a layer), the router's correction bias, the ape
    assert by["mhc"] == 4 * 35_391_870
    assert by["linear_attention"] == 34 * (2 * 136_577_024 + 4 * 106_560) == 9_301_729_792
    assert by["router"] == 42 * (2 * 288 * 4_096 + 4 * 288) == 99_138_816
    assert by["indexer"] == 11 * (2 * 7_471_360 + 4 * 512) == 164_392_448
    # the whole FP8 checkpoint: 314,396,639,232 fp8 values + 19,189,248 × 4 B scales + 6,887,358,720 bf16 × 2 B
    # + 39,033,438 fp32 × 4 B (34 × 106,560 + 35,391,870 + 43 × 288 + 12 × 512)
    fp32 = 34 * 106_560 + 35_391_870 + 43 * 288 + 12 * 512
    assert fp32 == 39_033_438
    bf16 = 321_323_031_390 - 314_396_639_232 - fp32
    assert sum(by.values()) == 314_396_639_232 + 4 * 19_189_248 + 2 * bf16 + 4 * fp32 == 328_404_247_416


def test_tp_split(flash) -> None:  # type: ignore[no-untyped-def]
    one, eight = Split(tp=1, attention=1, experts=1), Split(tp=8, attention=8, experts=8)
    b1 = {g.name: g.bytes_per_gpu(one) for g in flash.param_groups}
    b8 = {g.name: g.bytes_per_gpu(eight) for g in flash.param_groups}
    # attention TP: the KDA heads (64 / 8 = 8 a rank) and the MLA heads; TP: dense, shared, embeddings, vision;
    # experts max(tp, ep) = 8
    for name in ("linear_attention", "attention", "dense_mlp", "shared_experts", "embeddings", "vision",
                 "routed_experts", "mtp"):  # fmt: skip
        assert b8[name] == b1[name] // 8, name
    assert b8["linear_attention"] == 9_301_729_792 // 8 == 1_162_716_224
    # replicated on every rank (ReplicatedLinear, routers, norms, mHC): the same bytes at TP 8
    for name in ("linear_attention_replicated", "attention_latent", "indexer", "router", "norms", "mhc"):
        assert b8[name] == b1[name], name
    # one H200 of the TP-8 deployment holds (no MTP: loaded only with speculative decoding)
    # 1,162,716,224 + 71,303,168 + 141,567,480 + 56,636,928 + 92,297,216 + 173,046,016 + 164,392,448
    # + 38,060,015,616 + 132,152,832 + 99,138,816 + 317,194,240 + 799,232 + 140,906,752 = 40,612,166,968 B (37.82 GiB)
    assert flash.estimated_weights_per_gpu(eight) == 40_612_166_968


def test_config_json_form_counts_the_same(tmp_path: Path, flash) -> None:  # type: ignore[no-untyped-def]
    # A config.json laid out as the Hugging Face repo's (text_config inside, quantization_config and vision_config
    # at the top): the parameter count reads the outer quantization and vision config through the text view.
    import yaml

    doc = yaml.safe_load(Path("kvplan/configs/models/glm-5.3-flash.yaml").read_text())
    path = tmp_path / "glm-5.3-flash" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc["config"]))
    arch = load_model(str(path))
    assert {g.name: (g.params, g.bytes_per_param_num, g.bytes_per_param_den) for g in arch.param_groups} == {
        g.name: (g.params, g.bytes_per_param_num, g.bytes_per_param_den) for g in flash.param_groups
    }
    # without its outer quantization_config every linear is bf16: 2 B × 321,323,031,390 parameters, + 2 B more for
    # each of the 39,033,438 fp32 ones
    del doc["config"]["quantization_config"]
    path.write_text(json.dumps(doc["config"]))
    bf16 = load_model(str(path))
    one = Split(tp=1, attention=1, experts=1)
    assert sum(g.bytes_per_gpu(one) for g in bf16.param_groups) == 2 * 321_323_031_390 + 2 * 39_033_438


def test_bad_kda_layer_names_its_key(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(Path("kvplan/configs/models/glm-5.3-flash.yaml").read_text())
    doc["config"]["text_config"]["linear_attn_config"]["kda_layers"][0] = 45  # layers are 0 to 44
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc["config"]))
    with pytest.raises(ConfigError) as e:
        load_model(str(path))
    assert "text_config.linear_attn_config.kda_layers" in str(e.value.key or e.value)


def test_config_class_defaults_count_the_checkpoint(tmp_path: Path, flash) -> None:  # type: ignore[no-untyped-def]
    # A config.json without text_config's q_lora_rank and num_nextn_predict_layers: the engines' config class fills
    # them in (SGLang 0.5.23 Glm5NextTextConfig q_lora_rank=1536, num_nextn_predict_layers=1; transformers 5.16.1-
    # 5.20, vLLM 0.33.0's, q_lora_rank: int = 1536), which are the checkpoint's (q_a_proj [1536, 4096], layer 45 the
    # MTP layer): the count stays the shard headers' 321,342,220,638 less the 19,189,248 fp8 block scales
    import yaml

    doc = yaml.safe_load(Path("kvplan/configs/models/glm-5.3-flash.yaml").read_text())
    for key in ("q_lora_rank", "num_nextn_predict_layers"):
        del doc["config"]["text_config"][key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc["config"]))
    arch = load_model(str(path))
    assert arch.total_params == PUBLISHED_TOTAL_ELEMENTS - 19_189_248 == flash.total_params
    assert (arch.num_mtp_layers, arch.mtp_layers_named, flash.mtp_layers_named) == (1, False, True)
    # a config naming 0 keeps 0 (Glm5NextTextConfig stores it: nextn_layer_ids empty, no NextN draft layer)
    doc["config"]["text_config"]["num_nextn_predict_layers"] = 0
    path.write_text(json.dumps(doc["config"]))
    assert (load_model(str(path)).num_mtp_layers, load_model(str(path)).mtp_layers_named) == (0, True)
    del doc["config"]["text_config"]["num_nextn_predict_layers"]
    # an explicit null is SGLang's q_proj path (`if self.q_lora_rank is not None`), per MLA layer (11 + MTP = 12):
    # q_proj 64 × 256 × 4,096 = 67,108,864 and the indexer's wq_b 32 × 128 × 4,096 = 16,777,216 in place of q_a
    # 1,536 × 4,096 = 6,291,456, q_a_layernorm 1,536, q_b 16,384 × 1,536 = 25,165,824, wq_b 4,096 × 1,536 = 6,291,456
    doc["config"]["text_config"]["q_lora_rank"] = None
    path.write_text(json.dumps(doc["config"]))
    per_layer = 67_108_864 + 16_777_216 - (6_291_456 + 1_536 + 25_165_824 + 6_291_456)
    assert load_model(str(path)).total_params == flash.total_params + 12 * per_layer
