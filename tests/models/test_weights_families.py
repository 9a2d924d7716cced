"""Weights per GPU for every family (param_groups_from_hf): GQA dense, GQA MoE, MLA, DSA; splits and kv replication.

Every expected number is derived in a comment from the config values and the group formulas of
kvplan.models.weights (q/o h × heads × head_dim, k/v h × kv_heads × head_dim, a gated MLP 3 × h × intermediate,
experts 3 × h × moe_intermediate, routers n_experts × h, embeddings vocab × h, once when tied).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.quant import Fields
from kvplan.models.weights import HeadsGroup, _mla_shape, param_groups, param_groups_from_hf

HF = Path(__file__).parents[1] / "data" / "hf"

LLAMA_70B: dict[str, Any] = {
    # meta-llama/Llama-3.1-70B config.json values
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def per_gpu(groups: Any, split: Split) -> int:
    return sum(g.bytes_per_gpu(split) for g in groups)


def test_llama_70b_bf16_params_and_tp8_tp4() -> None:
    w = param_groups_from_hf(LLAMA_70B, "llama-3.1-70b")
    # per layer: q + o = 2 × 8192 × 64 × 128 = 134,217,728; k + v = 2 × 8192 × 8 × 128 = 16,777,216;
    # MLP 3 × 8192 × 28672 = 704,643,072 → 855,638,016 a layer × 80 = 68,451,041,280;
    # embeddings + lm_head 2 × 128256 × 8192 = 2,101,346,304 → 70,552,387,584; norms (2 a layer + the final
    # one) 161 × 8192 = 1,318,912 → 70,553,706,496 parameters: the published count, to the parameter.
    assert w.total_params == 70_552_387_584 + 161 * 8192 == 70_553_706_496
    assert w.family == "dense GQA" and w.summary == "bf16 checkpoint" and w.assumptions == ()
    # bf16: 2 B a parameter, every linear group split 8 ways at TP8 (8 kv heads = 8 ranks: no replication), the
    # norms on every rank: 70,552,387,584 × 2 / 8 + 1,318,912 × 2 = 17,638,096,896 + 2,637,824
    # = 17,640,734,720 B (17.6 GB; the whole checkpoint 141.1 GB).
    assert per_gpu(w.groups, Split.of(tp=8)) == 70_552_387_584 * 2 // 8 + 2_637_824 == 17_640_734_720
    # TP4: 141,104,775,168 / 4 + 2,637,824 = 35,278,831,616 B.
    assert per_gpu(w.groups, Split.of(tp=4)) == 35_276_193_792 + 2_637_824 == 35_278_831_616


def test_kv_projections_replicate_past_the_kv_heads() -> None:
    w = param_groups_from_hf(LLAMA_70B, "llama-3.1-70b")
    kv = next(g for g in w.groups if g.name == "kv_proj")
    assert isinstance(kv, HeadsGroup) and kv.heads == 8
    # k + v over 80 layers: 80 × 16,777,216 = 1,342,177,280 params, 2,684,354,560 B in bf16.
    # TP16: 8 kv heads over 16 ranks → each rank holds one head: 2,684,354,560 / 8 = 335,544,320 B,
    # not the 167,772,160 B a plain 16-way split would claim.
    assert kv.bytes_per_gpu(Split.of(tp=16)) == 335_544_320
    assert kv.bytes_per_gpu(Split.of(tp=8)) == 335_544_320
    # DP attention 2 at TP16: attention TP 8 → 8 ways, one head a rank: the same 335,544,320 B.
    assert kv.bytes_per_gpu(Split.of(tp=16, dp_attention=2)) == 335_544_320
    # TP4: 2 heads a rank: 2,684,354,560 / 4 = 671,088,640 B.
    assert kv.bytes_per_gpu(Split.of(tp=4)) == 671_088_640


@pytest.mark.parametrize("name", ["glm-5", "glm-5.3", "deepseek-v3.2", "glm-5.2-freq-only", "pattern"])
def test_mla_groups_equal_the_existing_moeshape_groups(name: str) -> None:
    """Every DSA golden keeps its weights: the per-module builder gives param_groups' bytes on every split (the
    parameter-group fallback; a config.json itself is now laid out per tensor, test_weights_one_path)."""
    path = HF / name / "config.json"
    config = json.loads(path.read_text())
    fp8 = (config.get("quantization_config") or {}).get("quant_method") == "fp8"
    legacy = (
        param_groups(
            _mla_shape(Fields(config, (), lambda p, m: ConfigError(m))), checkpoint_dtype="fp8" if fp8 else "bf16"
        )
        if config.get("hidden_size")
        else ()
    )
    new = param_groups_from_hf(config, str(path)).groups
    assert new == legacy  # the same ParamGroups, bytes per parameter written as param_groups writes them (16388/16384)
    for split in (Split.of(tp=8), Split.of(tp=8, dp_attention=8), Split.of(tp=16, ep=32, pp=2), Split.of(tp=1)):
        assert [g.bytes_per_gpu(split) for g in new] == [g.bytes_per_gpu(split) for g in legacy]


def test_inconsistent_heads_is_a_located_error() -> None:
    bad = {**LLAMA_70B, "num_key_value_heads": 6}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(bad, "x/config.json")
    assert str(e.value) == (
        "x/config.json: num_attention_heads: 64 attention heads are not a multiple of num_key_value_heads 6"
    )


def test_fail_callback_receives_the_key_path() -> None:
    seen: list[tuple[Any, str]] = []

    def fail(path: Any, message: str) -> None:
        seen.append((path, message))
        raise ConfigError(message, source="cfg", key=str(path))

    with pytest.raises(ConfigError):
        param_groups_from_hf({**LLAMA_70B, "num_hidden_layers": None}, "cfg", fail=fail)
    assert seen == [(("num_hidden_layers",), "missing (required)")]


def test_no_hidden_size_no_groups() -> None:
    w = param_groups_from_hf({"num_hidden_layers": 2, "torch_dtype": "bfloat16"}, "x")
    assert w.groups == () and w.family == "" and w.total_params == 0


def test_qwen3_moe_sparse_step_mlp_only_layers_and_tied_embeddings() -> None:
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "intermediate_size": 3072,
        "moe_intermediate_size": 512,
        "num_experts": 8,
        "mlp_only_layers": [0],
        "decoder_sparse_step": 2,
        "vocab_size": 1000,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    }
    g = {x.name: x.params for x in param_groups_from_hf(cfg, "tiny").groups}
    # MoE on layer i iff i not in mlp_only_layers and (i + 1) % 2 == 0: layers 1 and 3; 0 and 2 dense.
    # q + o 2 × 1024 × 1024 × 4 = 8,388,608; k + v 2 × 1024 × 256 × 4 = 2,097,152;
    # dense 3 × 1024 × 3072 × 2 = 18,874,368; experts 8 × 3 × 1024 × 512 × 2 = 25,165,824; routers 8 × 1024 × 2
    # = 16,384; tied embeddings 1000 × 1024 once = 1,024,000; norms (2 × 4 + 1) × 1024 + q/k norms 2 × 64 × 4
    # = 9,728
    assert g == {
        "attention": 8_388_608,
        "kv_proj": 2_097_152,
        "dense_mlp": 18_874_368,
        "routed_experts": 25_165_824,
        "router": 16_384,
        "embeddings": 1_024_000,
        "norms": 9_728,
    }


def test_llama_8b_gptq_int4_group128_whole_checkpoint() -> None:
    cfg = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    g = {x.name: x.bytes_per_gpu(Split.of(tp=1)) for x in param_groups_from_hf(cfg, "llama-gptq").groups}
    # int4 g128: 133/256 B a value (0.5 + fp16 scale and 4-bit zero per 128) + g_idx 4 B an input column.
    # q + o a layer: 33,554,432 values → 17,432,576 + g_idx 2 × 4096 × 4 = 32,768 → 17,465,344 × 32 = 558,891,008
    # k + v: 8,388,608 → 4,358,144 + 32,768 → 4,390,912 × 32 = 140,509,184
    # MLP: 176,160,768 → 91,521,024 + (4096 + 4096 + 14,336) × 4 = 90,112 → 91,611,136 × 32 = 2,931,556,352
    # embeddings and LM head stay bf16: 2,101,346,304; norms 532,480; rotary cache 33,554,432
    assert g == {
        "attention": 558_891_008,
        "kv_proj": 140_509_184,
        "dense_mlp": 2_931_556_352,
        "embeddings": 2_101_346_304,
        "norms": 532_480,
        "rotary_cache": 33_554_432,
    }
    assert sum(g.values()) == 5_766_389_760  # 5.37 GiB, against 14.99 GiB in bf16


def test_deepseek_v3_fp8_and_bf16_at_tp8_without_indexer() -> None:
    cfg = json.loads((HF / "deepseek-v3" / "config.json").read_text())
    fp8 = param_groups_from_hf(cfg, "deepseek-v3")
    assert fp8.family == "MLA MoE"  # no indexer groups: no wq_b / wk / weights_proj
    # per layer: q_a 7168 × 1536 + q_b 1536 × 128 × 192 + kv_a 7168 × 576 + kv_b 512 × 128 × 256 + o 128 × 128 × 7168
    # = 187,105,280 × 61 = 11,413,422,080; dense 3 × 7168 × 18,432 × 3 = 1,189,085,184; routed 256 × 3 × 7168 ×
    # 2048 × 58 = 653,908,770,816; shared 44,040,192 × 58 = 2,554,331,136; routers 256 × 7168 × 58 = 106,430,464;
    # embeddings 2 × 129,280 × 7168 = 1,853,358,080
    g = {x.name: x.params for x in fp8.groups if x.name != "mtp"}
    assert g == {
        "attention": 11_413_422_080,
        "dense_mlp": 1_189_085_184,
        "routed_experts": 653_908_770_816,
        "shared_experts": 2_554_331_136,
        "router": 106_430_464,
        "embeddings": 1_853_358_080,
    }
    # fp8 128×128 blocks (4,097/4,096 B) at TP8: attention 11,416,208,560 / 8 = 1,427,026,070; dense 148,671,936;
    # routed 81,758,552,064; shared 319,369,344; routers bf16 whole 212,860,928; embeddings bf16 463,339,520
    # → 84,329,819,862 B (78.5 GiB) without the MTP layer
    split = Split.of(tp=8)
    assert sum(x.bytes_per_gpu(split) for x in fp8.groups if x.name != "mtp") == 84_329_819_862
    # the same model in bf16 (DeepSeek-V3 as an upcast checkpoint): 2 B everywhere: 2,853,355,520 + 297,271,296
    # + 163,477,192,704 + 638,582,784 + 212,860,928 + 463,339,520 = 167,942,602,752 B, more than an H200 holds
    bf16 = param_groups_from_hf({**cfg, "quantization_config": None}, "deepseek-v3-bf16")
    assert sum(x.bytes_per_gpu(split) for x in bf16.groups if x.name != "mtp") == 167_942_602_752
